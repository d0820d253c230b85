"""``MarbleTest``: marble-diagram tests on a virtual clock, with readable failures."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from reactivex import Observable, abc
from reactivex.notification import OnCompleted, OnError, OnNext
from reactivex.testing import TestScheduler
from reactivex.testing.recorded import Recorded

from ._diagram import Event, parse, render, render_subscription, subscription_frames

__all__ = ["MarbleMismatch", "MarbleTest"]

_T = TypeVar("_T")


class MarbleMismatch(AssertionError):
    """A stream did not match its diagram; the message shows expected and actual diagrams."""


class MarbleTest:
    """A virtual clock for marble tests; one frame of a diagram is one tick.

    >>> from reactivex import operators as ops
    >>> m = MarbleTest()
    >>> src = m.cold("-a-[bc]-|")
    >>> m.expect(src.pipe(ops.map(str.upper)), "-A-[BC]-|")
    >>> m.expect_subscriptions(src, "^----!")

    ``expect`` subscribes at frame 0, runs the clock until nothing is left to do (or until
    ``dispose_at``) and compares every notification with its frame. On a mismatch it raises
    :class:`MarbleMismatch` showing both diagrams and the values.
    """

    def __init__(self) -> None:
        self.scheduler = TestScheduler()
        # Frame 0 is this tick, not tick 0: RxPY records a disposal at tick 0 as "never".
        self.origin = 100
        self._start = self.origin

    # -- sources ---------------------------------------------------------------------------
    def cold(
        self, diagram: str, values: Mapping[str, Any] | None = None, error: BaseException | None = None
    ) -> Observable[Any]:
        """A cold source: its frames count from the moment each subscriber subscribes."""
        events = parse(diagram, values, error)
        return self.scheduler.create_cold_observable(*[_recorded(e) for e in events])

    def hot(
        self, diagram: str, values: Mapping[str, Any] | None = None, error: BaseException | None = None
    ) -> Observable[Any]:
        """A hot source: its frames are absolute; its ``^`` is frame 0, where ``run`` subscribes first."""
        events = parse(diagram, values, error, origin=self.origin)
        return self.scheduler.create_hot_observable(*[_recorded(e) for e in events])

    # -- running ---------------------------------------------------------------------------
    def run(
        self,
        observable: Observable[_T] | Callable[[], Observable[_T]],
        *,
        dispose_at: int | str | None = None,
    ) -> list[Event]:
        """Subscribe at the current frame, run the clock, and return what was observed.

        ``dispose_at`` disposes the subscription at that frame (an int, or a diagram whose
        ``!`` marks it).
        """
        scheduler = self.scheduler
        start = max(int(scheduler.clock), self.origin)
        self._start = start
        events: list[Event] = []
        holder: list[abc.DisposableBase] = []

        def now() -> int:
            return int(scheduler.clock) - start

        def subscribe(_: abc.SchedulerBase, __: Any = None) -> None:
            obs = observable if isinstance(observable, Observable) else observable()
            holder.append(
                obs.subscribe(
                    lambda v: events.append(Event(now(), "N", v)),
                    lambda e: events.append(Event(now(), "E", e)),
                    lambda: events.append(Event(now(), "C")),
                    scheduler=scheduler,
                )
            )

        scheduler.schedule_absolute(start, subscribe)
        if dispose_at is not None:
            frame = dispose_at if isinstance(dispose_at, int) else subscription_frames(dispose_at)[1]
            if frame is None:
                raise ValueError(f"dispose_at diagram {dispose_at!r} has no '!'")
            scheduler.schedule_absolute(start + frame, lambda *_: holder[0].dispose() if holder else None)
        scheduler.start()
        return events

    def expect(
        self,
        observable: Observable[Any] | Callable[[], Observable[Any]],
        diagram: str,
        values: Mapping[str, Any] | None = None,
        error: BaseException | type[BaseException] | None = None,
        *,
        dispose_at: int | str | None = None,
    ) -> None:
        """Run ``observable`` and assert that it emits exactly ``diagram``.

        ``error`` may be an exception (type and message are compared) or an exception type.
        """
        actual = self.run(observable, dispose_at=dispose_at)
        self.assert_events(actual, diagram, values, error)

    def assert_events(
        self,
        actual: list[Event],
        diagram: str,
        values: Mapping[str, Any] | None = None,
        error: BaseException | type[BaseException] | None = None,
    ) -> None:
        """Assert that ``actual`` events are exactly those of ``diagram``."""
        expected = parse(diagram, values)
        ok = len(expected) == len(actual) and all(
            _same(e, a, error) for e, a in zip(expected, actual, strict=True)
        )
        if not ok:
            legend: dict[str, Any] = dict(values or {})
            exp_d = render(expected, legend)
            act_d = render(actual, legend)
            lines = [
                "stream does not match its marble diagram",
                f"  expected: {exp_d}",
                f"  actual:   {act_d}",
            ]
            used = {k: v for k, v in legend.items() if k in exp_d or k in act_d}
            if used:
                lines.append("  values:   " + "  ".join(f"{k}={v!r}" for k, v in used.items()))
            errs = [a.value for a in actual if a.kind == "E"]
            if errs:
                lines.append(f"  error:    {type(errs[0]).__name__}: {errs[0]}")
            if error is not None:
                lines.append(f"  expected error: {error!r}")
            raise MarbleMismatch("\n".join(lines))

    def expect_subscriptions(self, source: Observable[Any], *diagrams: str) -> None:
        """Assert the subscriptions a cold/hot source saw, as ``^---!`` diagrams (one each).

        ``^`` marks the frame of subscription, ``!`` the frame of disposal (absent: still
        subscribed when the clock stopped).
        """
        subs = getattr(source, "subscriptions", None)
        if subs is None:
            raise TypeError("expect_subscriptions needs a source made by MarbleTest.cold or .hot")
        start = self._start
        actual = [
            (int(s.subscribe) - start, None if s.unsubscribe == sys.maxsize else int(s.unsubscribe) - start)
            for s in subs
        ]
        expected = [subscription_frames(d) for d in diagrams]
        if actual != expected:
            raise MarbleMismatch(
                "subscriptions do not match\n"
                + "  expected: "
                + " ".join(render_subscription(*e) for e in expected)
                + "\n"
                + "  actual:   "
                + " ".join(render_subscription(*a) for a in actual)
            )


def _recorded(e: Event) -> Recorded[Any]:
    if e.kind == "N":
        return Recorded(e.frame, OnNext(e.value))
    if e.kind == "C":
        return Recorded(e.frame, OnCompleted())
    return Recorded(e.frame, OnError(e.value))


def _same(expected: Event, actual: Event, error: BaseException | type[BaseException] | None) -> bool:
    if expected.frame != actual.frame or expected.kind != actual.kind:
        return False
    if expected.kind == "N":
        return type(expected.value) is type(actual.value) and bool(expected.value == actual.value)
    if expected.kind == "E" and error is not None:
        if isinstance(error, type):
            return isinstance(actual.value, error)
        return type(actual.value) is type(error) and str(actual.value) == str(error)
    return True
