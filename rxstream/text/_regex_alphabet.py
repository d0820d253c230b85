"""The alphabet of a rule set: Unicode cut into classes of characters that behave alike.

Each character predicate of the NFA (a literal, a class, ``.``; see :mod:`rxstream.text._regex_syntax`)
is turned into a set of code-point intervals by running its own one-character pattern, compiled
with the rule's engine (``re`` or ``regex``) and the leaf's flags, over a string of all code
points (``(?:leaf)+`` finds maximal runs at C speed; a few milliseconds per leaf, cached). So
case folding, ``\\w``, ``\\d``, ``\\s`` and ASCII mode are the engine's own, not a re-implementation.

The interval boundaries of all predicates, plus those of the *contexts* the assertions look at
(``"\\n"``, ASCII word characters, Unicode word characters), cut the code space into atoms; atoms
with the same predicate set and context form one class. A DFA then works on class ids (a few
dozen, whatever the text), and each class has a context for ``^ $ \\b \\B``:

``EDGE`` (no character: start or end of the stream), ``NL`` (``"\\n"``), ``AWORD`` (ASCII word
character), ``UWORD`` (other Unicode word character), ``OTHER``.
"""

from __future__ import annotations

import array
import functools
import importlib
import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any

__all__ = ["AWORD", "CTX_COUNT", "EDGE", "NL", "OTHER", "UWORD", "Alphabet"]

EDGE, NL, AWORD, UWORD, OTHER = 0, 1, 2, 3, 4
CTX_COUNT = 5
_CACHE = 1 << 16  # characters whose class is remembered (the rest are looked up each time)


@functools.cache
def _all_code_points() -> str:
    """Every code point (surrogates included) in order: the text the predicates are run over."""
    return array.array("I", range(0x110000)).tobytes().decode("utf-32-le", "surrogatepass")


_PROPERTY_ITEM = r"\\[pP](?:\{[^}]*\}|[A-Za-z])|\[:\^?[A-Za-z]+:\]"
_CLASS = re.compile(r"\[(\^?)((?:\\U[0-9a-f]{8}(?:-\\U[0-9a-f]{8})?|\\[dDsSwW]|" + _PROPERTY_ITEM + r")+)\]")
_ITEM = re.compile(r"\\U([0-9a-f]{8})(?:-\\U([0-9a-f]{8}))?|\\([dDsSwW])|(" + _PROPERTY_ITEM + ")")

_FLAG_NAMES = ("IGNORECASE", "ASCII", "DOTALL", "MULTILINE", "VERBOSE")


def native_flags(engine: Any, flags: int) -> int:
    """``flags`` (``re``'s bits, as the parser and the leaves keep them) in ``engine``'s own bits
    (``regex`` numbers ASCII differently)."""
    if engine is re:
        return flags
    out = 0
    for name in _FLAG_NAMES:
        if flags & getattr(re, name):
            out |= getattr(engine, name)
    return int(out)


@functools.cache
def _cased(engine: Any, ascii_only: bool) -> tuple[int, ...]:
    """The code points whose match case folding can change, in order (a superset is fine: those
    are asked of the engine). ``re``: ``_sre``'s own test (ASCII letters under ASCII); ``regex``:
    every code point with a case or a case mapping, by its own properties."""
    if engine is re:
        if ascii_only:
            return tuple(c for c in range(128) if chr(c).isalpha())
        sre: Any = importlib.import_module("_sre")
        return tuple(c for c in range(0x110000) if sre.unicode_iscased(c))
    mapped = engine.compile(
        r"[\p{Cased}\p{Changes_When_Casefolded}\p{Changes_When_Lowercased}\p{Changes_When_Uppercased}"
        r"\p{Changes_When_Titlecased}\p{Changes_When_Casemapped}]"
    )
    return tuple(sorted({*_cased(re, False), *(m.start() for m in mapped.finditer(_all_code_points()))}))


@functools.cache
def _cased_text(engine: Any, ascii_only: bool) -> str:
    return "".join(map(chr, _cased(engine, ascii_only)))


@functools.lru_cache(maxsize=4096)
def _intervals(engine: Any, source: str, flags: int) -> tuple[tuple[int, int], ...]:
    """The code points matched by the one-character pattern ``source`` (``flags``: ``re``'s bits),
    as inclusive intervals.

    A class of literals, ranges, categories and (``regex``) property or POSIX classes is the union
    of its items (each category or property asked of the engine once, over all code points, and
    cached); with case folding, the engine decides the characters that folding can change (a few
    thousand), and the others keep what the class says of them without folding. Anything else is
    asked of the engine over all code points.
    """
    if source == ".":
        return _complement(((10, 10),)) if not flags & re.DOTALL else ((0, 0x10FFFF),)
    plain = _CLASS.fullmatch(source)
    if plain is None:
        return _engine_intervals(engine, source, flags)
    ivs: list[tuple[int, int]] = []
    for lo, hi, category, prop in _ITEM.findall(plain[2]):
        if category:
            ivs.extend(_item_intervals(engine, "\\" + category, flags & re.ASCII))
        elif prop:
            ivs.extend(_item_intervals(engine, "[" + prop + "]", flags & re.ASCII))
        else:
            ivs.append((int(lo, 16), int(hi or lo, 16)))
    merged = _merge(ivs)
    base = _complement(merged) if plain[1] else merged
    if not flags & re.IGNORECASE:
        return base
    # characters that folding cannot change match as without it; the others as the engine says
    ascii_only = bool(flags & re.ASCII) and engine is re
    cased = _cased(engine, ascii_only)
    folded = engine.compile(source, native_flags(engine, flags))
    inside = [cased[m.start()] for m in folded.finditer(_cased_text(engine, ascii_only))]  # a character each
    return _merge([*_minus(base, cased), *((c, c) for c in inside)])


@functools.lru_cache(maxsize=1024)
def _item_intervals(engine: Any, source: str, flags: int) -> tuple[tuple[int, int], ...]:
    """One category or property item of a class (``\\w``, ``[\\p{L}]``), asked of the engine once."""
    return _engine_intervals(engine, source, flags)


def _engine_intervals(engine: Any, source: str, flags: int) -> tuple[tuple[int, int], ...]:
    """The engine's own answer: ``(?:source)+`` over every code point, at C speed."""
    runs = engine.compile("(?:" + source + ")+", native_flags(engine, flags)).finditer(_all_code_points())
    return tuple((m.start(), m.end() - 1) for m in runs)


def _minus(ivs: tuple[tuple[int, int], ...], points: tuple[int, ...]) -> list[tuple[int, int]]:
    """``ivs`` without the code points ``points`` (ascending)."""
    out: list[tuple[int, int]] = []
    k = 0
    for lo, hi in ivs:
        k = bisect_left(points, lo, k)
        start = lo
        while k < len(points) and points[k] <= hi:
            if points[k] > start:
                out.append((start, points[k] - 1))
            start = points[k] + 1
            k += 1
        if start <= hi:
            out.append((start, hi))
    return out


def _merge(ivs: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ivs):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(hi, out[-1][1]))
        elif lo <= hi:
            out.append((lo, hi))
    return tuple(out)


def _complement(ivs: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in ivs:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= 0x10FFFF:
        out.append((nxt, 0x10FFFF))
    return tuple(out)


class Alphabet:
    """Character classes over the predicates ``leaves`` (``(source, flags)`` pairs).

    ``words=False`` (no ``\\b``/``\\B`` in the rules) leaves word characters without a context.

    Attributes:
        masks: per class, the bit mask of the predicates that contain it.
        ctx: per class, its context (NL, AWORD, UWORD or OTHER).
        sat: per predicate, per context, whether some class of that context satisfies it.
    """

    __slots__ = ("_atom_class", "_cache", "_starts", "ctx", "masks", "sat")

    def __init__(self, engine: Any, leaves: Sequence[tuple[str, int]], words: bool = True) -> None:
        sets = [_intervals(engine, src, fl) for src, fl in leaves]
        # without \b or \B, word characters need no context of their own (they are OTHER)
        aword = _intervals(engine, "\\w", re.ASCII) if words else ()
        uword = _intervals(engine, "\\w", 0) if words else ()
        cuts = {0, 10, 11}
        for ivs in (*sets, aword, uword):
            for lo, hi in ivs:
                cuts.add(lo)
                cuts.add(hi + 1)
        cuts.discard(0x110000)
        starts = sorted(cuts)
        members = [_membership(starts, ivs) for ivs in sets]
        in_aword = _membership(starts, aword)
        in_uword = _membership(starts, uword)
        ids: dict[tuple[int, int], int] = {}
        atom_class: list[int] = []
        self.masks: list[int] = []
        self.ctx: list[int] = []
        for a, lo in enumerate(starts):
            mask = 0
            for p, member in enumerate(members):
                if member[a]:
                    mask |= 1 << p
            c = NL if lo == 10 else AWORD if in_aword[a] else UWORD if in_uword[a] else OTHER
            key = (mask, c)
            k = ids.get(key)
            if k is None:
                k = ids[key] = len(self.masks)
                self.masks.append(mask)
                self.ctx.append(c)
            atom_class.append(k)
        self._starts = starts
        self._atom_class = atom_class
        self._cache: dict[str, int] = {}
        self.sat = [
            [any(m >> p & 1 and self.ctx[k] == c for k, m in enumerate(self.masks)) for c in range(5)]
            for p in range(len(leaves))
        ]

    def class_of(self, ch: str) -> int:
        """The class id of the character ``ch``."""
        k = self._cache.get(ch)
        if k is None:
            k = self._atom_class[bisect_right(self._starts, ord(ch)) - 1]
            if len(self._cache) < _CACHE:
                self._cache[ch] = k
        return k


def _membership(starts: list[int], ivs: Sequence[tuple[int, int]]) -> list[bool]:
    """Per atom (starting at ``starts[a]``), whether it lies inside the intervals ``ivs``."""
    inside = [False] * len(starts)
    for lo, hi in ivs:
        a = bisect_right(starts, lo) - 1
        while a < len(starts) and starts[a] <= hi:
            inside[a] = True
            a += 1
    return inside
