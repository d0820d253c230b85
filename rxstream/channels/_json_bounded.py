"""JSON whose nesting is checked before ``json.loads`` recurses through it."""

from __future__ import annotations

import json
import re
from typing import Any

from ._json_lex import DEFAULT_MAX_DEPTH

__all__ = ["loads_bounded", "nesting_depth"]


def nesting_depth(text: str) -> int:
    """The deepest nesting of objects and arrays in ``text`` (JSON or nearly), strings skipped: a
    linear scan at C speed, to check a text before ``json.loads`` recurses through it."""
    depth = deepest = 0
    for m in _BRACKETS.finditer(text):
        c = m.group()
        if c == "{" or c == "[":
            depth += 1
            deepest = max(deepest, depth)
        elif c == "}" or c == "]":
            depth -= 1
    return deepest


def loads_bounded(text: str, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """``json.loads(text)``, refusing nesting deeper than ``max_depth`` with a ``ValueError``
    (``json.JSONDecodeError`` for invalid JSON, as ``json.loads``) instead of a ``RecursionError``."""
    if nesting_depth(text) > max_depth:
        raise ValueError(f"objects and arrays nested deeper than {max_depth} levels")
    return json.loads(text)


_BRACKETS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]')
