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
import re
from bisect import bisect_right
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


_PLAIN = re.compile(r"\[(\^?)((?:\\U[0-9a-f]{8}(?:-\\U[0-9a-f]{8})?)+)\]")
_ITEM = re.compile(r"\\U([0-9a-f]{8})(?:-\\U([0-9a-f]{8}))?")


@functools.lru_cache(maxsize=1024)
def _intervals(engine: Any, source: str, flags: int) -> tuple[tuple[int, int], ...]:
    """The code points matched by the one-character pattern ``source``, as inclusive intervals.

    Literal sets and ``.`` are read off directly; anything with case folding or a category
    (``\\w``...) is asked of the engine, over all code points.
    """
    plain = _PLAIN.fullmatch(source)
    if source == "." or (plain is not None and not flags & re.IGNORECASE):
        if source == ".":
            ivs = [(10, 10)] if not flags & re.DOTALL else []
            negate = True
        else:
            assert plain is not None
            ivs = [(int(lo, 16), int(hi or lo, 16)) for lo, hi in _ITEM.findall(plain[2])]
            negate = bool(plain[1])
        merged = _merge(ivs)
        return _complement(merged) if negate else merged
    runs = engine.compile("(?:" + source + ")+", flags).finditer(_all_code_points())
    return tuple((m.start(), m.end() - 1) for m in runs)


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
        aword = _intervals(engine, "\\w", engine.ASCII) if words else ()
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
