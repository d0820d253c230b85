"""The checks on one input: runs of the parser and the reference (cached), the parity, retraction
and flush checks, and the minimizing of a failing chunking."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ._chunkings import Chunking, Data
from ._merge import MergeText, _is_prefix, _Merger
from ._parity_report import Check, ParityError, _Failure, _format
from ._parity_run import _as_events, _Outcome, _Run, _run_feed, _run_operator, _where

if TYPE_CHECKING:
    from ._parity import Parity

_MAX_TRUNCATIONS = 256
"""Fixed chunkings (one chunk per character...) are finished early at every cut up to this many
(each is a run of the parser: the cost grows as the square of the cuts); beyond, at the cuts that
end inside a delimiter or a UTF-8 character, and an even spread of the others."""
_RUN_CACHE = 4096


def _ends_inside(data: Data, end: int, delimiter: Data) -> bool:
    """Whether ``data[:end]`` ends with a proper prefix of ``delimiter``."""
    if type(delimiter) is not type(data):
        return False
    return any(data.endswith(delimiter[:k], 0, end) for k in range(1, len(delimiter)))  # type: ignore[arg-type]


def _minimize(cuts: list[int], fails: Callable[[list[int]], bool]) -> list[int]:
    """Delta debugging: drop cuts while ``fails`` still holds, down to a chunking from which no
    single cut can be dropped."""
    if cuts and fails([]):
        return []
    granularity = 2
    while cuts:
        size = math.ceil(len(cuts) / granularity)
        for start in range(0, len(cuts), size):
            candidate = cuts[:start] + cuts[start + size :]
            if fails(candidate):
                cuts = candidate
                granularity = max(granularity - 1, 2)
                break
        else:
            if size == 1:
                break
            granularity = min(granularity * 2, len(cuts))
    return cuts


# ------------------------------------------------------------------ the checks
class _Session:
    """The checks for one input: runs the parser and the reference, with caches."""

    def __init__(self, parity: Parity, data: Data, delimiters: Iterable[Data] = ()) -> None:
        self.parity = parity
        self.data = data
        self.delimiters: tuple[Data, ...] = tuple(
            d.encode() if isinstance(data, bytes) and isinstance(d, str) else d for d in delimiters
        )
        self.refs: dict[int, _Outcome] = {}
        self.runs: OrderedDict[tuple[int, tuple[int, ...]], _Outcome] = OrderedDict()

    def run(self, chunks: Sequence[Data]) -> _Run:
        p = self.parity
        if p.factory is not None:
            return _run_feed(p.factory, chunks)
        assert p.operator is not None
        return _run_operator(p.operator, chunks, p.timeout)

    def outcome(self, run: _Run, n: int) -> _Outcome:
        if run.error is not None:
            return _Outcome(error=run.error, where=_where(run, n))
        return _Outcome(self.parity.normalize(run.events))

    def expected(self, end: int) -> _Outcome:
        """The batch result of ``data[:end]``."""
        if end not in self.refs:
            text = self.data[:end]
            reference = self.parity.reference
            if reference is None:
                self.refs[end] = self.outcome(self.run([text]), 1)
            else:
                try:
                    result = _as_events(reference(text))
                except Exception as exc:
                    self.refs[end] = _Outcome(error=exc, where="in the reference")
                else:
                    self.refs[end] = _Outcome(self.parity.normalize(result))
        return self.refs[end]

    def truncations(self, chunking: Chunking) -> list[int]:
        """Where the flush check ends a stream of ``chunking`` (see :data:`_MAX_TRUNCATIONS`)."""
        points = sorted({c for c in chunking.cuts if c < len(self.data)})
        if len(points) <= _MAX_TRUNCATIONS:
            return points
        data = self.data
        inside = set()
        for p in points:
            if isinstance(data, bytes) and p < len(data) and 0x80 <= data[p] < 0xC0:
                inside.add(p)
            elif any(_ends_inside(data, p, d) for d in self.delimiters):
                inside.add(p)
        rest = [p for p in points if p not in inside]
        room = max(_MAX_TRUNCATIONS - len(inside), 0)
        spread = rest[:: max(1, math.ceil(len(rest) / room))] if room else []
        return sorted(inside.union(spread))

    def retracted(self, run: _Run, final: Any) -> int | None:
        """The first chunk after which the events so far, normalized, are not a prefix of
        ``final`` (None: there is none). With :class:`MergeText` the events are merged once, as
        they come; any other ``normalize`` runs on every prefix."""
        normalize = self.parity.normalize
        if not isinstance(normalize, MergeText):
            seen = 0
            for step, mark in enumerate(run.marks):
                if mark != seen:
                    seen = mark
                    if not _is_prefix(normalize(run.events[:mark]), final, MergeText()):
                        return step
            return None
        merger = _Merger(normalize)
        checked = seen = 0
        for step, mark in enumerate(run.marks):
            if mark == seen:
                continue
            for item in merger.push(run.events[seen:mark]):  # final from here on
                if checked >= len(final) or item != final[checked]:
                    return step
                checked += 1
            seen = mark
            last = merger.pending()
            if last is not None and not (
                checked < len(final)
                and (last == final[checked] or normalize.is_partial(last, final[checked]))
            ):
                return step
        return None

    def ended(self, chunking: Chunking, end: int) -> tuple[Chunking, _Outcome]:
        """The stream ended (finished) at offset ``end``: its chunking and result (cached)."""
        short = chunking.truncated(end)
        key = (end, short.cuts)
        if key in self.runs:
            self.runs.move_to_end(key)
            return short, self.runs[key]
        outcome = self.outcome(self.run(short.chunks), len(short.chunks))
        self.runs[key] = outcome
        if len(self.runs) > _RUN_CACHE:
            self.runs.popitem(last=False)
        return short, outcome

    def failure(
        self, chunking: Chunking, checks: Collection[Check], truncations: Iterable[int] | None = None
    ) -> _Failure | None:
        """The first check ``chunking`` fails, or None. ``truncations``: where the flush check ends
        the stream early (default: at every cut)."""
        chunks = chunking.chunks
        run = self.run(chunks)
        actual = self.outcome(run, len(chunks))
        expected = self.expected(len(self.data))
        if "parity" in checks and not actual.same(expected):
            return _Failure("parity", chunking, expected, actual)
        if "retraction" in checks and run.error is None:
            step = self.retracted(run, actual.value)
            if step is not None:
                so_far = self.parity.normalize(run.events[: run.marks[step]])
                return _Failure("retraction", chunking, expected, actual, step, so_far)
        if "flush" in checks:
            ends = self.truncations(chunking) if truncations is None else sorted(set(truncations))
            for end in ends:
                short, outcome = self.ended(chunking, end)
                if not outcome.same(self.expected(end)):
                    return _Failure("flush", short, self.expected(end), outcome)
        return None

    def error(self, failure: _Failure, found: Chunking) -> ParityError:
        """Minimize ``failure``'s chunking and describe it."""
        check = failure.check
        target = failure.chunking  # for flush: already cut at the end that failed
        sub = self if target.data == self.data else _Session(self.parity, target.data)
        sub.refs = self.refs if sub is self else {k: v for k, v in self.refs.items() if k <= len(target.data)}
        as_parity: Check = "parity" if check == "flush" else check

        def fails(cuts: list[int]) -> bool:
            candidate = Chunking(target.data, tuple(cuts), target.source)
            return sub.failure(candidate, (as_parity,)) is not None

        cuts = _minimize(list(target.cuts), fails)
        minimal = sub.failure(Chunking(target.data, tuple(cuts), target.source), (as_parity,))
        if minimal is None:  # the parser does not fail the same way twice: report what was found
            minimal = failure
        minimal.check = check
        return ParityError(
            _format(minimal, found, self.data, self.parity.reference is not None),
            check=check,
            chunking=minimal.chunking,
            found=found,
            expected=minimal.expected.error or minimal.expected.value,
            actual=minimal.actual.error or minimal.actual.value,
        )


class _Found(Exception):
    """Raised inside the ``hypothesis`` run to carry a failure out of it."""

    def __init__(self, failure: _Failure, found: Chunking) -> None:
        super().__init__(failure.check, found.describe())
        self.failure = failure
        self.found = found
