"""The delimiters of a response template's fields: literal strings, or patterns checked for what
the streaming engine can run exactly (empty matches, lazy repeats, their longest match) and made
into ``rx`` rules."""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from typing import Any

from ..text import RegexRule, rx
from ..text._regex import empty_matches
from ._spec import Delimiter

__all__ = ["delimiters", "fail", "literals", "pattern", "regex_engine"]

_parser: Any = importlib.import_module("re._parser")


def fail(where: str, message: str) -> ValueError:
    """The one-line error for ``where`` (a field, a key) of a response template."""
    return ValueError(f"response_template: {where}: {message}")


def literals(value: Any, where: str, key: str) -> list[str]:
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, list):
        if not value:
            raise fail(where, f"{key!r} list must contain at least one literal")
        if not all(isinstance(s, str) for s in value):
            raise fail(where, f"{key!r} list must contain only strings")
        items = list(dict.fromkeys(value))
    else:
        raise fail(where, f"{key!r} must be a string or a list of strings, got {type(value).__name__}")
    if any(not s for s in items):
        raise fail(where, f"{key!r} literals cannot be empty strings")
    return items


def regex_engine() -> Any:
    try:
        return importlib.import_module("regex")
    except ImportError:  # pragma: no cover - regex comes with the test and bench extras
        return re


def pattern(source: Any, where: str, key: str) -> Any:
    if not isinstance(source, str):
        raise fail(where, f"{key!r} must be a string (a regular expression), got {type(source).__name__}")
    engine = regex_engine()
    try:
        return engine.compile(source, engine.DOTALL)
    except engine.error as exc:
        raise fail(where, f"invalid {key} {source!r}: {exc}") from None


def _walk(items: Any) -> Any:
    """Every (op, av) in a parse tree, depth first."""
    for op, av in items:
        yield str(op), av
        name = str(op)
        if name == "SUBPATTERN":
            yield from _walk(av[3])
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            yield from _walk(av[2])
        elif name == "BRANCH":
            for sub in av[1]:
                yield from _walk(sub)
        elif name in ("ASSERT", "ASSERT_NOT", "ATOMIC_GROUP"):
            yield from _walk(av[1] if name != "ATOMIC_GROUP" else av)


def _tree(compiled: Any) -> Any:
    return _parser.parse(compiled.pattern, int(compiled.flags) & ~0x2100)  # no regex VERSION0/1 bits


def _starts_open(tree: Any) -> bool:
    """Whether the pattern's first alternative is only ``^`` / ``\\A`` (its empty match at the
    start is what a backtracking engine takes first there)."""
    items = list(tree)
    while len(items) == 1 and str(items[0][0]) == "SUBPATTERN":
        items = list(items[0][1][3])
    if len(items) != 1 or str(items[0][0]) != "BRANCH":
        return False
    first = list(items[0][1][1][0])
    starts = ("AT_BEGINNING", "AT_BEGINNING_STRING")
    return bool(first) and all(str(op) == "AT" and str(av) in starts for op, av in first)


def _pattern_rule(
    compiled: Any, where: str, key: str, max_hold: int, *, opening: bool
) -> tuple[RegexRule | None, bool]:
    """The rx rule of a pattern delimiter, and whether its empty match opens the region at the start.

    None (only for a close): the pattern matches nothing but the empty string at the end.
    """
    try:
        empty = empty_matches(compiled)
    except ValueError as exc:
        raise fail(where, f"{key} {compiled.pattern!r} cannot be streamed exactly: {exc}") from None
    tree = _tree(compiled)
    lazy = any(op == "MIN_REPEAT" for op, _ in _walk(tree))
    width = tree.getwidth()[1]
    hold = width if 0 < width <= max_hold else max_hold
    rule: RegexRule | None = None
    try:
        rule = rx(compiled, max_hold=hold, shortest=lazy, allow_empty=bool(empty))
    except ValueError as exc:
        if not (empty and all(end for _, end in empty) and not opening):
            raise fail(where, f"{key} {compiled.pattern!r}: {exc}") from None
        # \Z: nothing but the end of the stream, where every region closes anyway
    if empty and opening and (not all(start for start, _ in empty) or not _starts_open(tree)):
        raise fail(
            where,
            f"{key} {compiled.pattern!r} can match the empty string; only a first alternative "
            "'^' or '\\A' (the region is open at the start, as in (?:^|<think>)) is supported",
        )
    if empty and not opening and not all(end for _, end in empty):
        raise fail(
            where,
            f"{key} {compiled.pattern!r} can match the empty string before the end of the text "
            "(it would close the region at once)",
        )
    return rule, bool(empty) and opening


def delimiters(
    field: Mapping[str, Any], where: str, literal_key: str, pattern_key: str, max_hold: int, opening: bool
) -> tuple[tuple[Delimiter, ...] | None, bool, frozenset[str]]:
    """(delimiters or None when the field has neither key, opens at the start, group names)."""
    if literal_key in field and pattern_key in field:
        raise fail(where, f"cannot specify both {literal_key!r} and {pattern_key!r}")
    if literal_key in field:
        return tuple(literals(field[literal_key], where, literal_key)), False, frozenset()
    if pattern_key in field:
        compiled = pattern(field[pattern_key], where, pattern_key)
        rule, at_start = _pattern_rule(compiled, where, pattern_key, max_hold, opening=opening)
        return ((rule,) if rule is not None else ()), at_start, frozenset(compiled.groupindex)
    return None, False, frozenset()
