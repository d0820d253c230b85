"""What ``measure`` and ``checkpoint`` share: stages chained with a boundary after each, and
the lists of the sinks (and registered state) each stage makes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from reactivex import Observable, abc

from rxstream._describe import describe

from ._sink import StageSink, building, collecting, done_building, done_collecting

__all__ = ["Hook", "Stage", "chain", "check_stages"]

Stage: TypeAlias = Callable[[Observable[Any]], Observable[Any]]
"""One stage: an operator, whatever its item types."""

Hook = Callable[[], None]
_OnNext = abc.ObserverBase[object] | Callable[[object], None] | None
_OnError = Callable[[Exception], None] | None
_OnCompleted = Callable[[], None] | None


class _Boundary(Observable[object]):
    """After a stage: at subscription, the sinks the stage makes join its list (a hook may run
    first); items pass straight through (the subscribe goes to the stage unchanged)."""

    def __init__(self, inner: Observable[object], sinks: list[StageSink] | None, hook: Hook | None) -> None:
        super().__init__()
        self._inner = inner
        self._sinks = sinks
        self._hook = hook

    def subscribe(
        self,
        on_next: _OnNext = None,
        on_error: _OnError = None,
        on_completed: _OnCompleted = None,
        *,
        scheduler: abc.SchedulerBase | None = None,
    ) -> abc.DisposableBase:
        if self._hook is not None:
            self._hook()
        token = collecting(self._sinks)
        try:
            return self._inner.subscribe(on_next, on_error, on_completed, scheduler=scheduler)
        finally:
            done_collecting(token)


def check_stages(owner: str, stages: Sequence[object]) -> None:
    """At least one stage, each callable (``TypeError`` / ``ValueError`` naming ``owner``)."""
    if not stages:
        raise ValueError(f"{owner}: give at least one stage")
    for stage in stages:
        if not callable(stage):
            raise TypeError(f"{owner}: a stage must be an operator (callable), got {describe(stage)}")


def chain(
    source: Observable[object], stages: Sequence[Stage], at_start: Hook
) -> tuple[Observable[object], list[list[StageSink]]]:
    """The stages after ``source``, and the list each stage's sinks join. ``at_start`` runs when
    the source is subscribed: every stage's sinks exist then, and no item has come (a synchronous
    source emits all of them in that subscribe)."""
    per_stage: list[list[StageSink]] = [[] for _ in stages]
    stream: Observable[object] = _Boundary(source, None, at_start)  # the source's sinks are not a stage's
    for sinks, stage in zip(per_stage, stages, strict=True):
        token = building(sinks)  # operators a composite builds now join this stage
        try:
            stream = _Boundary(stage(stream), sinks, None)
        finally:
            done_building(token)
    return stream, per_stage
