"""The ``serialize`` operator: make a source that calls ``on_next`` from several threads safe."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TypeVar, cast

from reactivex import Observable, abc
from reactivex.disposable import Disposable

from rxstream._finish import Finish, FinishReason

from ._sink import OperatorSink, operator

__all__ = ["serialize"]

_T = TypeVar("_T")

_NEXT, _ERROR, _COMPLETED = 0, 1, 2


def serialize() -> Callable[[Observable[_T]], Observable[_T]]:
    """Deliver notifications one at a time, in arrival order, whatever thread sends them.

    The Rx contract says notifications never overlap; a source fed by several threads
    (callbacks of a thread pool, say) can break it, and every rxstream operator assumes it.
    ``serialize`` restores it without holding a lock while downstream code runs: a thread that
    finds another one delivering queues its notification, and the delivering thread drains the
    queue before it returns (so no thread blocks on downstream work and nothing is reordered or
    lost). Nothing is delivered after the first ``on_error``/``on_completed``.

    If the subscriber raises from one of its callbacks, the operator stops for good: the queue is
    cleared, nothing more is delivered or queued, the upstream subscription is disposed, and the
    exception propagates to the thread that was delivering (as it does through reactivex's own
    operators, which let an observer's exception propagate to the producer).

    Marble diagram (on one thread it changes nothing)::

        source:   -a-b-|
        operator: serialize()
        result:   -a-b-|
    """
    return operator("serialize", _SerializeSink)


class _SerializeSink(OperatorSink[_T, _T]):
    """Queues notifications from any thread; one thread at a time delivers them."""

    __slots__ = ("_closed", "_emitting", "_ended", "_lock", "_queue")

    def __init__(self, observer: abc.ObserverBase[_T]) -> None:
        super().__init__("serialize", observer)
        self._lock = threading.Lock()
        self._queue: deque[tuple[int, _T | Exception | None]] = deque()
        self._emitting = False  # a thread is delivering
        self._ended = False  # a terminal notification was queued: nothing more is
        self._closed = False  # the subscriber disposed or raised: nothing is queued or delivered

    def run(self, source: Observable[_T], scheduler: abc.SchedulerBase | None) -> abc.DisposableBase:
        """Subscribe straight to the queue: a subscriber's exception is not the operator's failure
        (it propagates to the delivering thread) and the notifications may come from any thread."""
        self.subscribe_to(
            source, self.on_next, scheduler, on_error=self.on_error, on_completed=self.on_completed
        )
        return Disposable(self.dispose)

    def on_next(self, value: _T) -> None:
        self._push(_NEXT, value)

    def on_error(self, error: Exception) -> None:
        self._push(_ERROR, error)

    def on_completed(self) -> None:
        self._push(_COMPLETED, None)

    def dispose(self) -> None:
        self._close()
        super().dispose()

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            self._emitting = False
            self._queue.clear()

    def _push(self, kind: int, value: _T | Exception | None) -> None:
        with self._lock:
            if self._ended or self._closed:
                return
            if kind != _NEXT:
                self._ended = True
            self._queue.append((kind, value))
            if self._emitting:
                return  # the delivering thread takes it
            self._emitting = True
        self._drain()

    def _drain(self) -> None:
        """Deliver the queue until it is empty (only the thread that set ``_emitting``)."""
        queue = self._queue
        while True:
            with self._lock:
                if not queue or self._closed:
                    self._emitting = False
                    queue.clear()
                    return
                batch = list(queue)
                queue.clear()
            try:
                for kind, value in batch:
                    if kind == _NEXT:
                        self.observer.on_next(cast(_T, value))
                    elif kind == _ERROR:
                        super().on_error(cast(Exception, value))
                    else:
                        self.end(Finish(FinishReason.EOS), dispose=False)
            except BaseException:
                # The subscriber broke the contract: stop here, never wedge the queue.
                self._close()
                self.done = True
                self.upstream.dispose()
                raise
