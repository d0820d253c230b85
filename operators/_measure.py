"""The ``measure`` operator: a pipeline's stages, with a :class:`Meter` that times them as the
stream runs (SEMANTICS §14).

Two taps cost something per item: one before the first stage reads the clock (once per item: a
token id or a list of them) and one after the last stage counts what comes out (time to first
output, the gaps). Between the stages sit boundaries that cost nothing per item: they only note,
at subscription, which operators each stage made. Once an item has gone all the way through,
the meter asks each operator whether it now holds text back (``OperatorSink.holding``: a stop
string's possible start, a replacement's pending match, the bytes of an incomplete character, a
route's possible delimiter). ``benchmarks/meter.py`` measures the cost.

A stage **holds text back** from the arrival of the item after which it holds something until
the arrival of the item after which it holds nothing (or the stream's end): the meter adds
that time to the stage's held time, counts the holds and keeps the longest. So the held time
is exact to one item: a stop string that waits for the next token held its text for that
token's time. Stages that are not rxstream operators are never counted as holding.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence, Sized
from typing import Any

from reactivex import Observable, abc
from reactivex.disposable import Disposable

from rxstream._describe import describe
from rxstream._piece import Piece

from ._meter_figures import Check, Hold, MeterReport, OperatorFigures, StageFigures, figures
from ._sink import OperatorSink, StageSink
from ._stages import Stage, chain, check_stages

__all__ = ["Meter", "MeterReport", "OperatorFigures", "StageFigures", "measure"]


class Meter:
    """The figures of one stream through :func:`measure` (one subscription at a time).

    Args:
        clock: a function returning seconds (default ``time.perf_counter``).
    """

    __slots__ = (
        "_active",
        "_begin",
        "_chars",
        "_checks",
        "_clock",
        "_end",
        "_first",
        "_gap_max",
        "_gap_sum",
        "_gaps",
        "_items",
        "_last",
        "_names",
        "_operators",
        "_singles",
        "_stages",
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
        self._stages = [Hold() for _ in range(n + 1)]  # 0 unused: stage k is at k
        self._items = 0
        self._chars = 0
        self._checks: list[Check] = []  # the stages of several operators
        self._singles: list[tuple[Hold, Callable[[], bool]]] = []  # the stages of one
        self._operators: list[tuple[str, str, Hold]] = []

    def start(self, at: float | None = None) -> None:
        """Count the time to first token from ``at`` (a reading of the meter's clock; default:
        now) instead of from the subscription: a server gives the request's arrival."""
        self._begin = self._clock() if at is None else at

    def report(self) -> MeterReport:
        """The figures so far (holds still open count up to the last item's arrival)."""
        begin = self._begin if self._begin is not None else 0.0
        stages = tuple(
            StageFigures(name, *figures(self._stages[k], self.now)) for k, name in enumerate(self._names, 1)
        )
        operators = tuple(
            OperatorFigures(stage, name, *figures(hold, self.now)) for stage, name, hold in self._operators
        )
        return MeterReport(
            tokens=self._tokens,
            items=self._items,
            chars=self._chars,
            ttft=None if self._first is None else self._first - begin,
            gaps=self._gaps,
            gap_mean=self._gap_sum / self._gaps if self._gaps else 0.0,
            gap_max=self._gap_max,
            stages=stages,
            operators=operators,
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

    def _watch(self, per_stage: list[list[StageSink]]) -> None:
        """The sinks each stage made (known once the subscription has gone up the chain)."""
        for k, sinks in enumerate(per_stage, 1):
            ops: list[tuple[Hold, Callable[[], bool]]] = []
            for sink in reversed([s for s in sinks if isinstance(s, OperatorSink)]):  # made downstream first
                hold = Hold()
                self._operators.append((self._names[k - 1], sink.name, hold))
                if type(sink).holding is not OperatorSink.holding:  # the others never hold: not asked
                    ops.append((hold, sink.holding_probe()))
            if len(ops) == 1:  # the stage holds when its one operator does: one hold for both
                self._stages[k] = ops[0][0]
                self._singles.append(ops[0])
            elif ops:
                self._checks.append((self._stages[k], tuple(ops)))

    def _close(self, now: float) -> None:
        """The stream ended (or was disposed): every hold still open ends now."""
        for stage, ops in self._checks:
            if stage is not None:
                stage.release(now)
            for hold, _ in ops:
                hold.release(now)
        for hold, _ in self._singles:
            hold.release(now)
        if self._end is None:
            self._end = now
        self._active = False

    def _on_item(self, emit: Callable[[object], None]) -> Callable[[object], None]:
        """The source tap's ``on_next``: the clock, the tokens, the item, then the holds (the
        stages of one operator inline: the common case)."""
        clock = self._clock
        singles = tuple(self._singles)
        checks = tuple(self._checks)

        def on_next(value: object) -> None:
            self.now = now = clock()
            self._tokens += 1 if type(value) is int else _count(value)
            emit(value)
            if self._end is not None:  # the item ended the stream (a stop): every hold is closed
                return
            for hold, holding in singles:
                if holding():
                    if hold.since is None:
                        hold.since = now
                elif hold.since is not None:
                    hold.release(now)
            for stage, ops in checks:  # a stage of several operators: each, and the stage
                held = False
                for hold, holding in ops:
                    if holding():
                        held = True
                        if hold.since is None:
                            hold.since = now
                    elif hold.since is not None:
                        hold.release(now)
                if stage is not None:
                    if held:
                        if stage.since is None:
                            stage.since = now
                    elif stage.since is not None:
                        stage.release(now)

        return on_next

    def _on_output(self, emit: Callable[[object], None]) -> Callable[[object], None]:
        """The last tap's ``on_next``: what came out, and when."""

        def on_next(value: object) -> None:
            now = self.now
            self._items += 1
            if type(value) is str:
                self._chars += len(value)
            else:
                text = getattr(value, "text", None)  # a Piece, a Segment, a TextDelta
                if type(text) is str:
                    self._chars += len(text)
            if self._first is None:
                self._first = now
            else:
                gap = now - self._last
                self._gaps += 1
                self._gap_sum += gap
                if gap > self._gap_max:
                    self._gap_max = gap
            self._last = now
            emit(value)

        return on_next


class _SourceTap(Observable[Any]):
    """Before the first stage: every stage's operators exist when it is subscribed (the
    subscription came up the chain), and no item has come yet; then each item is timed."""

    def __init__(self, source: Observable[Any], meter: Meter) -> None:
        super().__init__()
        self._source = source
        self._meter = meter

    def subscribe(
        self,
        on_next: Any = None,
        on_error: Any = None,
        on_completed: Any = None,
        *,
        scheduler: abc.SchedulerBase | None = None,
    ) -> abc.DisposableBase:
        meter = self._meter
        if hasattr(on_next, "on_next"):  # an observer
            on_next, on_error, on_completed = on_next.on_next, on_next.on_error, on_next.on_completed
        clock = meter._clock
        done = on_completed if on_completed is not None else _nothing

        def completed() -> None:
            meter.now = clock()
            done()
            meter._close(meter.now)

        def failed(error: Exception) -> None:
            meter.now = clock()
            if on_error is not None:
                on_error(error)
            meter._close(meter.now)

        return self._source.subscribe(
            meter._on_item(on_next or _ignore), failed, completed, scheduler=scheduler
        )


def _nothing() -> None:
    pass


def _ignore(_value: object) -> None:
    pass


def _count(value: object) -> int:
    """How many token ids an item holds (a list or tuple of ids, or a Piece; text: none)."""
    if isinstance(value, Piece):
        return len(value.ids)
    if isinstance(value, str):
        return 0
    return len(value) if isinstance(value, Sized) else 1


def measure(
    meter: Meter, *stages: Stage, names: Sequence[str] | None = None
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
    check_stages("measure", stages)
    if names is None:
        labels = tuple(getattr(s, "__name__", f"stage{k}") for k, s in enumerate(stages, 1))
    else:
        labels = tuple(str(n) for n in names)
        if len(labels) != len(stages):
            raise ValueError(f"measure: {len(stages)} stages but {len(labels)} names")

    def _measure(source: Observable[Any]) -> Observable[Any]:  # the stages' own item types
        def subscribe(
            observer: abc.ObserverBase[object], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            try:
                meter._subscribed(labels)
            except RuntimeError as exc:
                observer.on_error(exc)
                return Disposable()
            stream, per_stage = chain(_SourceTap(source, meter), stages, lambda: meter._watch(per_stage))
            last = meter._on_output(observer.on_next)
            inner = stream.subscribe(last, observer.on_error, observer.on_completed, scheduler=scheduler)

            def dispose() -> None:
                inner.dispose()
                meter._close(meter._clock())

            return Disposable(dispose)

        return Observable(subscribe)

    return _measure
