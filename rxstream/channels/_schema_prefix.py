"""Where a string or a number in progress stops being able to match: the UTF-16 prefix tests on
keys and enum members (escapes included) and the whole-number test on exponents."""

from __future__ import annotations

import re
from typing import Final

from ._schema_node import utf16

__all__ = ["failure_position", "integral_dead_at", "prefix_failure"]


_SHORT_ESCAPES: Final = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}


def failure_position(
    raw: str, start: int, old: bytes, candidates: tuple[bytes, ...], pending: str = ""
) -> int | None:
    """Where a string stops being the start of any candidate.

    ``raw`` is string text as written (whole characters and escapes) at ``start``, following the
    UTF-16 prefix ``old`` (which some candidate starts with); ``pending`` is the start of an
    escape still open after it. Returns the position of the first character after which no
    candidate (UTF-16) can follow, even within an escape (``\\u00e`` already rules out ``t``,
    U+0074), or None when one still can.
    """
    prefix = old
    live = [c for c in candidates if c.startswith(prefix)]
    text = raw + pending
    n = len(text)
    i = 0
    while i < n:
        c = text[i]
        if c != "\\":
            unit = utf16(c)
            longer = [x for x in live if x.startswith(unit, len(prefix))]
            if not longer:
                return start + i
            prefix += unit
            live = longer
            i += 1
            continue
        at = len(prefix)
        live = [x for x in live if len(x) > at]  # an escape adds a character
        if not live:
            return start + i
        if i + 1 == n:
            return None
        kind = text[i + 1]
        if kind != "u":
            unit = utf16(_SHORT_ESCAPES.get(kind, kind))
            live = [x for x in live if x.startswith(unit, at)]
            if not live:
                return start + i + 1
            prefix += unit
            i += 2
            continue
        digits = text[i + 2 : i + 6].lower()
        for k in range(1, len(digits) + 1):
            live = [
                x
                for x in live
                if format(int.from_bytes(x[at : at + 2], "little"), "04x").startswith(digits[:k])
            ]
            if not live:
                return start + i + 1 + k
        if len(digits) < 4:
            return None
        prefix += int(digits, 16).to_bytes(2, "little")
        i += 6
    return None


def prefix_failure(
    old: bytes, piece: str, raw: str | None, start: int, candidates: tuple[bytes, ...], pending: str = ""
) -> tuple[bytes, int | None]:
    """Extend the UTF-16 prefix ``old`` by ``piece`` (decoded; ``raw`` as written, None when the
    same, at ``start``; ``pending``: an escape still open after it): the new prefix, and the
    position at which no candidate continues it (None while one does)."""
    prefix = old + utf16(piece)
    if any(c.startswith(prefix) for c in candidates) and (
        not pending or failure_position("", start, prefix, candidates, pending) is None
    ):
        return prefix, None
    return prefix, failure_position(piece if raw is None else raw, start, old, candidates, pending)


_NUMBER_PARTS = re.compile(r"-?([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?)([0-9]*))?")


def integral_dead_at(raw: str) -> int | None:
    """The index of the first character of ``raw`` (a number, or the start of one) after which
    no continuation is a whole number; None while one still is."""
    if "e" not in raw and "E" not in raw:
        return None  # an exponent can still make it whole
    m = _NUMBER_PARTS.match(raw)
    if m is None or m.group(3) != "-":
        return None  # a positive exponent can still grow
    digits = m.group(1) + (m.group(2) or "")
    if not digits.strip("0"):
        return None  # zero
    limit = len(digits) - len(digits.rstrip("0")) - len(m.group(2) or "")
    if limit < 0:
        return m.start(4) - 1  # the '-' of the exponent
    value = 0
    for k, d in enumerate(m.group(4)):
        value = value * 10 + ord(d) - 48
        if value > limit:
            return m.start(4) + k
    return None
