"""Transforms of a response template: a template of whole-string ``{placeholder}`` strings filled
from the parsed content and the delimiters' named groups (no string interpolation)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["apply_transform", "check_transform"]

_PLACEHOLDER = re.compile(r"\{(\w+(?:\.\w+)*)\}")


def check_transform(transform: Any, where: str) -> None:
    """Reject strings that mix a ``{placeholder}`` with other text (no interpolation)."""
    if isinstance(transform, Mapping):
        for value in transform.values():
            check_transform(value, where)
    elif isinstance(transform, list):
        for value in transform:
            check_transform(value, where)
    elif (
        isinstance(transform, str)
        and _PLACEHOLDER.search(transform)
        and not _PLACEHOLDER.fullmatch(transform)
    ):
        raise ValueError(
            f"{where}: transform string {transform!r} mixes a {{placeholder}} with other text; "
            'use a whole-string placeholder such as "{content}" or plain text (no string interpolation)'
        )


def apply_transform(transform: Any, scope: Mapping[str, Any]) -> Any:
    """Fill a transform template: every whole-string ``{name}`` / ``{name.key.key}`` placeholder
    becomes that value of ``scope`` (dotted keys index into dicts); other values stay as they are.

    Raises KeyError for a name not in ``scope``, ValueError for a dotted key that is missing or
    indexes into a non-dict.
    """
    if isinstance(transform, Mapping):
        return {k: apply_transform(v, scope) for k, v in transform.items()}
    if isinstance(transform, list):
        return [apply_transform(v, scope) for v in transform]
    if not isinstance(transform, str):
        return transform
    m = _PLACEHOLDER.fullmatch(transform)
    if m is None:
        return transform
    path = m.group(1)
    root, *keys = path.split(".")
    if root not in scope:
        raise KeyError(
            f"transform placeholder {{{path}}}: {root!r} is not defined (defined: {sorted(scope)})"
        )
    value = scope[root]
    for key in keys:
        if not isinstance(value, dict):
            raise ValueError(
                f"transform placeholder {{{path}}} cannot index into {type(value).__name__} at {key!r}"
            )
        if key not in value:
            raise ValueError(
                f"transform placeholder {{{path}}} is missing key {key!r} (keys: {sorted(value)})"
            )
        value = value[key]
    return value
