"""Sources: replay a recorded stream (token ids or text) as an Observable."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any, TypeVar

from reactivex import Observable, abc
from reactivex.disposable import MultipleAssignmentDisposable
from reactivex.scheduler import CurrentThreadScheduler, TimeoutScheduler

__all__ = ["replay"]

_T = TypeVar("_T")


def replay(
    items: Iterable[_T], interval: float = 0.0, *, scheduler: abc.SchedulerBase | None = None
) -> Observable[_T]:
    """A cold Observable that emits ``items`` one by one, ``interval`` seconds apart, then completes.

    Use it to replay a recorded generation (token ids, text chunks) through a pipeline as if a
    model were producing it. Each subscription replays from the start; disposing stops it.

    Args:
        items: the recorded items (materialized once, at call time).
        interval: seconds between items (0: as fast as possible, on the subscribing thread).
        scheduler: where to run (default: a timer thread when ``interval > 0``, else the
            current thread's trampoline).

    Raises:
        ValueError: ``interval`` is negative.
    """
    recorded = list(items)
    if interval < 0:
        raise ValueError(f"replay: interval must be >= 0, got {interval}")

    def subscribe(
        observer: abc.ObserverBase[_T], sched: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        default = TimeoutScheduler.singleton() if interval > 0 else CurrentThreadScheduler.singleton()
        s = scheduler or sched or default
        index = 0
        disposable = MultipleAssignmentDisposable()

        def step(_: abc.SchedulerBase, __: Any = None) -> None:
            nonlocal index
            if disposable.is_disposed:
                return
            if index < len(recorded):
                item = recorded[index]
                index += 1
                observer.on_next(item)
                if not disposable.is_disposed:
                    disposable.disposable = s.schedule_relative(timedelta(seconds=interval), step)
            else:
                observer.on_completed()

        disposable.disposable = (
            s.schedule(step) if interval == 0 else s.schedule_relative(timedelta(seconds=interval), step)
        )
        return disposable

    return Observable(subscribe)
