"""Per-subscription plumbing shared by the rxstream operators.

An operator's subscribe function creates one :class:`OperatorSink` per subscriber. The sink owns
the upstream subscription, makes sure the subscriber sees at most one terminal notification,
reports the :class:`~rxstream.Finish` once, routes failures of the operator's own logic to
``on_error`` (never into the producer's thread) and disposes upstream when it ends the stream.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from reactivex import Observable, abc
from reactivex.disposable import Disposable, SingleAssignmentDisposable

from rxstream._describe import describe
from rxstream._finish import Finish, FinishReason

__all__ = ["OperatorSink", "describe", "operator"]

_In = TypeVar("_In")
_Out = TypeVar("_Out")


class OperatorSink(ABC, Generic[_In, _Out]):
    """State of one subscription of an operator.

    Subclasses implement :meth:`on_next` and :meth:`on_completed` and call :meth:`emit`,
    :meth:`end` (complete with a reason and dispose upstream) and :meth:`fail`.
    """

    __slots__ = ("_on_finish", "done", "name", "observer", "upstream")

    def __init__(self, name: str, observer: abc.ObserverBase[_Out],
                 on_finish: Callable[[Finish], None] | None = None) -> None:
        self.name = name
        self.observer = observer
        self.done = False
        self.upstream = SingleAssignmentDisposable()
        self._on_finish = on_finish

    def run(self, source: Observable[_In], scheduler: abc.SchedulerBase | None) -> abc.DisposableBase:
        """Subscribe to ``source``; return the disposable handed to the subscriber."""
        self.upstream.disposable = source.subscribe(
            self._guarded_next, self.on_error, self._guarded_completed, scheduler=scheduler
        )
        return Disposable(self.dispose)

    # -- upstream notifications -------------------------------------------------------------
    def _guarded_next(self, value: _In) -> None:
        if self.done:
            return
        try:
            self.on_next(value)
        except Exception as exc:  # the operator's own logic failed: tell the subscriber
            self.fail(exc)

    def _guarded_completed(self) -> None:
        if self.done:
            return
        try:
            self.on_completed()
        except Exception as exc:
            self.fail(exc)

    @abstractmethod
    def on_next(self, value: _In) -> None:
        """Handle one item from upstream (exceptions are routed to :meth:`fail`)."""

    def on_completed(self) -> None:
        """Default: the source ended by itself."""
        self.end(Finish(FinishReason.EOS), dispose=False)

    def on_error(self, error: Exception) -> None:
        """Forward an upstream error (held text is dropped)."""
        if self.done:
            return
        self.done = True
        failure = self.report(Finish(FinishReason.ERROR, error=error))
        self.observer.on_error(failure or error)

    # -- helpers for subclasses --------------------------------------------------------------
    def emit(self, value: _Out) -> None:
        self.observer.on_next(value)

    def report(self, finish: Finish) -> Exception | None:
        """Call ``on_finish`` once; return the exception it raised, if any."""
        callback = self._on_finish
        self._on_finish = None
        if callback is not None:
            try:
                callback(finish)
            except Exception as exc:
                return exc
        return None

    def end(self, finish: Finish, *, dispose: bool = True) -> None:
        """Complete the stream now for ``finish`` and (by default) dispose the upstream."""
        if self.done:
            return
        self.done = True
        failure = self.report(finish)
        if failure is not None:
            self.observer.on_error(failure)
        else:
            self.observer.on_completed()
        if dispose:
            self.upstream.dispose()

    def fail(self, error: Exception) -> None:
        """The operator's own logic failed: send ``error`` downstream and dispose the upstream."""
        if self.done:
            return
        self.done = True
        self.report(Finish(FinishReason.ERROR, error=error))
        self.observer.on_error(error)
        self.upstream.dispose()

    def dispose(self) -> None:
        """The subscriber disposed: report ``cancelled`` (if still running) and dispose upstream."""
        if not self.done:
            self.done = True
            self.report(Finish(FinishReason.CANCELLED))
        self.upstream.dispose()


def operator(name: str, make_sink: Callable[[abc.ObserverBase[Any]], OperatorSink[Any, Any]]
             ) -> Callable[[Observable[Any]], Observable[Any]]:
    """Build an operator function whose subscriptions are handled by ``make_sink(observer)``."""

    def _operator(source: Observable[Any]) -> Observable[Any]:
        def subscribe(observer: abc.ObserverBase[Any],
                      scheduler: abc.SchedulerBase | None = None) -> abc.DisposableBase:
            return make_sink(observer).run(source, scheduler)

        return Observable(subscribe)

    _operator.__name__ = name
    _operator.__qualname__ = name
    return _operator
