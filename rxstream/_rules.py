"""Validation of replace rules and stop strings (shared by operators, engines and the compat layer)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["Rules", "normalize_rules", "normalize_stops"]

Rules = Mapping[str, str] | Iterable[tuple[str, str]]
"""Replace rules: a mapping ``{pattern: replacement}`` or ``(pattern, replacement)`` pairs."""


def normalize_rules(rules: Rules, *, owner: str = "replace") -> tuple[tuple[str, str], ...]:
    """Check rules and return them as pairs; a pattern given twice keeps its first rule.

    Raises:
        TypeError: ``rules`` is not a mapping or iterable of pairs, or an item is not a ``str``.
        ValueError: a pattern is empty.
    """
    if isinstance(rules, str | bytes):
        raise TypeError(f"{owner}: rules must be a mapping or (pattern, replacement) pairs, got {rules!r}")
    items: Iterable[object]
    if isinstance(rules, Mapping):
        items = rules.items()
    else:
        try:
            items = list(rules)
        except TypeError:
            raise TypeError(
                f"{owner}: rules must be a mapping or (pattern, replacement) pairs, got {rules!r}"
            ) from None
    seen: dict[str, str] = {}
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise TypeError(f"{owner}: each rule must be a (pattern, replacement) pair, got {item!r}")
        pattern, replacement = item
        if not isinstance(pattern, str):
            raise TypeError(f"{owner}: pattern must be a str, got {type(pattern).__name__}: {pattern!r}")
        if not pattern:
            raise ValueError(f"{owner}: pattern must be non-empty, got {pattern!r}")
        if not isinstance(replacement, str):
            raise TypeError(
                f"{owner}: replacement for {pattern!r} must be a str, "
                f"got {type(replacement).__name__}: {replacement!r}"
            )
        seen.setdefault(pattern, replacement)
    return tuple(seen.items())


def normalize_stops(stops: str | Iterable[str], *, owner: str = "stop", what: str = "stop string"
                    ) -> tuple[str, ...]:
    """Check stop strings (one ``str`` or several) and return them without duplicates.

    Raises:
        TypeError: a stop string is not a ``str``.
        ValueError: a stop string is empty.
    """
    if isinstance(stops, str):
        stops = (stops,)
    try:
        items = list(stops)
    except TypeError:
        raise TypeError(f"{owner}: {what}s must be a str or an iterable of str, got {stops!r}") from None
    out: dict[str, None] = {}
    for s in items:
        if not isinstance(s, str):
            raise TypeError(f"{owner}: {what} must be a str, got {type(s).__name__}: {s!r}")
        if not s:
            raise ValueError(f"{owner}: {what} must be non-empty, got {s!r}")
        out.setdefault(s)
    return tuple(out)
