"""The ``measure`` operator: a pipeline's stages, with a :class:`Meter` that times them as the
stream runs (SEMANTICS §15).

A tap sits before the first stage and after each stage. The first reads the clock once per
item (a token id, or a list of them); the others count what each stage emits and reuse that
reading (what a stage emits while an item passes through happens in the same call). Once an
item has gone all the way through, the meter asks each stage whether it now holds text back
(``OperatorSink.holding``: a stop string's possible start, a replacement's pending match, the
bytes of an incomplete character, a route's possible delimiter).

A stage **holds text back** from the arrival of the item after which it holds something until
the arrival of the item after which it holds nothing (or the stream's end): the meter adds
that time to the stage's held time, counts the holds and keeps the longest. So the held time
is exact to one item: a stop string that waits for the next token held its text for that
token's time. Stages that are not rxstream operators are never counted as holding.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass
from typing import Any

from reactivex import Observable, abc
from reactivex.disposable import Disposable

from rxstream._describe import describe
from rxstream._piece import Piece

from ._sink import StageSink, collecting, done_collecting

__all__ = ["Meter", "MeterReport", "StageFigures", "measure"]

_Stage = Callable[[Observable[Any]], Observable[Any]]


@dataclass(frozen=True, slots=True)
class StageFigures:
    """What one stage did: ``items`` and ``chars`` emitted; ``held`` seconds it held text back
    in all, ``longest`` of one wait, and ``holds``: how many waits were longer than zero."""

    name: str
    items: int
    chars: int
    held: float
    longest: float
    holds: int


@dataclass(frozen=True, slots=True)
class MeterReport:
    """A stream's figures so far.

    Attributes:
        tokens: token ids that entered the first stage (0 for a stream of text).
        ttft: seconds from the start (the subscription, or :meth:`Meter.start`) to the first
            output of the last stage, or None before it.
        gaps: how many gaps between outputs of the last stage; ``gap_mean`` and ``gap_max``
            their mean and longest, in seconds (0.0 with none).
        stages: the figures of each stage, in order.
        seconds: from the start to the end of the stream (None while it runs).
    """

    tokens: int
    ttft: float | None
    gaps: int
    gap_mean: float
    gap_max: float
    stages: tuple[StageFigures, ...]
    seconds: float | None


class Meter:
    """The figures of one stream through :func:`measure` (one subscription at a time).

    Args:
        clock: a function returning seconds (default ``time.perf_counter``).
    """

    __slots__ = (
        "_active",
        "_begin",
        "_chars",
        "_clock",
        "_end",
        "_first",
        "_gap_max",
        "_gap_sum",
        "_gaps",
        "_held",
        "_holds",
        "_items",
        "_last",
        "_longest",
        "_names",
        "_since",
        "_tokens",
        "now",
    )

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        if not callable(clock):
            raise TypeError(f"Meter: clock must be callable, got {describe(clock)}")
        self._clock = clock
        self._names: tuple[str, ...] = ()
        self._active = False
        self._begin: float | None = None
        self._reset(0)

    def _reset(self, n: int) -> None:
        self.now = 0.0
        self._tokens = 0
        self._first: float | None = None
        self._last = 0.0
        self._end: float | None = None
        self._gaps = 0
        self._gap_sum = 0.0
        self._gap_max = 0.0
        # per tap (0: before the first stage; k: after stage k)
        self._since: list[float | None] = [None] * (n + 1)
        self._held = [0.0] * (n + 1)
        self._longest = [0.0] * (n + 1)
        self._holds = [0] * (n + 1)
        self._items = [0] * (n + 1)
        self._chars = [0] * (n + 1)

    def start(self, at: float | None = None) -> None:
        """Count the time to first token from ``at`` (a reading of the meter's clock; default:
        now) instead of from the subscription: a server gives the request's arrival."""
        self._begin = self._clock() if at is None else at

    def report(self) -> MeterReport:
        """The figures so far (a consistent copy; safe to call while the stream runs on the thread
        that drives it)."""
        begin = self._begin if self._begin is not None else 0.0
        stages = tuple(
            StageFigures(
                name,
                self._items[k],
                self._chars[k],
                self._held[k],
                self._longest[k],
                self._holds[k],
            )
            for k, name in enumerate(self._names, 1)
        )
        return MeterReport(
            tokens=self._tokens,
            ttft=None if self._first is None else self._first - begin,
            gaps=self._gaps,
            gap_mean=self._gap_sum / self._gaps if self._gaps else 0.0,
            gap_max=self._gap_max,
            stages=stages,
            seconds=None if self._end is None else self._end - begin,
        )

    # -- the taps ---------------------------------------------------------------------------
    def _subscribed(self, names: tuple[str, ...]) -> None:
        if self._active:
            raise RuntimeError("Meter: it measures one stream at a time (give each stream its own)")
        self._active = True
        self._names = names
        begin = self._begin
        self._reset(len(names))
        if begin is None:
            self._begin = self._clock()

    def _settle(self, now: float, checks: list[tuple[int, tuple[Callable[[], bool], ...]]]) -> None:
        """After an item went through: start or end each stage's hold."""
        since = self._since
        for k, holding in checks:
            held = any(h() for h in holding)
            began = since[k]
            if held:
                if began is None:
                    since[k] = now
            elif began is not None:
                since[k] = None
                self._release(k, now - began)

    def _release(self, k: int, wait: float) -> None:
        self._held[k] += wait
        self._holds[k] += 1
        if wait > self._longest[k]:
            self._longest[k] = wait

    def _close(self, now: float) -> None:
        """The stream ended (or was disposed): every hold still open ends now."""
        since = self._since
        for k, began in enumerate(since):
            if began is not None:
                since[k] = None
                self._release(k, now - began)
        if self._end is None:
            self._end = now
        self._active = False

    def _source_tap(
        self, source: Observable[object], checks: list[tuple[int, tuple[Callable[[], bool], ...]]]
    ) -> Observable[object]:
        clock = self._clock

        def subscribe(
            observer: abc.ObserverBase[object], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            emit = observer.on_next

            def on_next(value: object) -> None:
                self.now = now = clock()
                self._tokens += 1 if type(value) is int else _count(value)
                emit(value)
                if checks:
                    self._settle(now, checks)

            def on_completed() -> None:
                self.now = clock()
                observer.on_completed()
                self._close(self.now)

            def on_error(error: Exception) -> None:
                self.now = clock()
                observer.on_error(error)
                self._close(self.now)

            token = collecting(None)  # the source's own sinks are not a stage's
            try:
                return source.subscribe(on_next, on_error, on_completed, scheduler=scheduler)
            finally:
                done_collecting(token)

        return Observable(subscribe)

    def _stage_tap(
        self, stage: Observable[object], k: int, last: bool, sinks: list[StageSink]
    ) -> Observable[object]:
        items, chars = self._items, self._chars

        def subscribe(
            observer: abc.ObserverBase[object], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            emit = observer.on_next

            def on_next(value: object) -> None:
                items[k] += 1
                chars[k] += _chars(value)
                if last:
                    self._output(self.now)
                emit(value)

            token = collecting(sinks)  # the sinks this stage makes (each tap above collects its own)
            try:
                return stage.subscribe(on_next, observer.on_error, observer.on_completed, scheduler=scheduler)
            finally:
                done_collecting(token)

        return Observable(subscribe)

    def _output(self, now: float) -> None:
        if self._first is None:
            self._first = now
        else:
            gap = now - self._last
            self._gaps += 1
            self._gap_sum += gap
            if gap > self._gap_max:
                self._gap_max = gap
        self._last = now


def _count(value: object) -> int:
    """How many token ids an item holds (a list or tuple of ids, or a Piece; text: none)."""
    if isinstance(value, Piece):
        return len(value.ids)
    if isinstance(value, str):
        return 0
    return len(value) if isinstance(value, Sized) else 1


def _chars(value: object) -> int:
    """The characters of an output item: a str, a Piece's or a Segment's text; 0 otherwise."""
    if type(value) is str:
        return len(value)
    text = getattr(value, "text", None)
    return len(text) if isinstance(text, str) else 0


def measure(
    meter: Meter, *stages: _Stage, names: Sequence[str] | None = None
) -> Callable[[Observable[Any]], Observable[Any]]:
    """The ``stages`` one after the other (as ``pipe`` would), measured by ``meter``.

    Args:
        meter: the :class:`Meter` that keeps the figures (read them with ``meter.report()``).
        stages: operators (at least one), e.g. ``detokenize(tok), stop(["\\n\\n"]), replace(...)``.
        names: a name per stage for the report (default: each operator's ``__name__``).

    Raises:
        TypeError: a meter that is not a :class:`Meter`, a stage that is not callable.
        ValueError: no stages, or ``names`` of another length.

    The stream is the same as without the meter: items, timing, errors and disposal pass
    through unchanged. Subscribing twice at once is an error (``on_error``): a meter measures one
    stream.

    Marble diagram: the stream is unchanged (``stop(["ab"])`` holds "a" back until "y" shows
    that no "ab" starts there; the meter counts that as one hold of the stop stage)::

        source:   -a-b-c-|      a="xa", b="y", c="z"
        operator: measure(Meter(), stop(["ab"]))
        result:   -a-b-c-|      a="x", b="ay", c="z"
    """
    if not isinstance(meter, Meter):
        raise TypeError(f"measure: meter must be a Meter, got {describe(meter)}")
    if not stages:
        raise ValueError("measure: give at least one stage")
    for stage in stages:
        if not callable(stage):
            raise TypeError(f"measure: a stage must be an operator (callable), got {describe(stage)}")
    if names is None:
        labels = tuple(getattr(s, "__name__", f"stage{k}") for k, s in enumerate(stages, 1))
    else:
        labels = tuple(str(n) for n in names)
        if len(labels) != len(stages):
            raise ValueError(f"measure: {len(stages)} stages but {len(labels)} names")
    n = len(stages)

    def _measure(source: Observable[Any]) -> Observable[Any]:  # the stages' own item types
        def subscribe(
            observer: abc.ObserverBase[object], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            try:
                meter._subscribed(labels)
            except RuntimeError as exc:
                observer.on_error(exc)
                return Disposable()
            checks: list[tuple[int, tuple[Callable[[], bool], ...]]] = []
            stream = meter._source_tap(source, checks)
            per_stage: list[list[StageSink]] = []
            for k, stage in enumerate(stages, 1):
                sinks: list[StageSink] = []
                per_stage.append(sinks)
                stream = meter._stage_tap(stage(stream), k, k == n, sinks)
            inner = stream.subscribe(observer, scheduler=scheduler)
            # the sinks are made as the subscription goes up the chain: known from here on
            for k, sinks in enumerate(per_stage, 1):
                if sinks:
                    checks.append((k, tuple(s.holding for s in sinks)))

            def dispose() -> None:
                inner.dispose()
                meter._close(meter._clock())

            return Disposable(dispose)

        return Observable(subscribe)

    return _measure
