"""The ``serialize`` operator: make a source that calls ``on_next`` from several threads safe."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from reactivex import Observable, abc
from reactivex.disposable import Disposable, SingleAssignmentDisposable

__all__ = ["serialize"]

_T = TypeVar("_T")


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

    def _serialize(source: Observable[_T]) -> Observable[_T]:
        def subscribe(observer: abc.ObserverBase[_T],
                      scheduler: abc.SchedulerBase | None = None) -> abc.DisposableBase:
            lock = threading.Lock()
            queue: deque[tuple[int, Any]] = deque()
            # emitting: a thread is delivering; closed: nothing more may be queued or delivered
            # (the subscriber disposed, or one of its callbacks raised).
            state = {"emitting": False, "done": False, "closed": False}
            upstream = SingleAssignmentDisposable()

            def close() -> None:
                with lock:
                    state["closed"] = True
                    state["emitting"] = False
                    queue.clear()

            def push(kind: int, value: Any) -> None:
                with lock:
                    if state["done"] or state["closed"]:
                        return
                    if kind != 0:
                        state["done"] = True
                    queue.append((kind, value))
                    if state["emitting"]:
                        return
                    state["emitting"] = True
                while True:
                    with lock:
                        if not queue or state["closed"]:
                            state["emitting"] = False
                            queue.clear()
                            return
                        batch = list(queue)
                        queue.clear()
                    try:
                        for k, v in batch:
                            if k == 0:
                                observer.on_next(v)
                            elif k == 1:
                                observer.on_error(v)
                            else:
                                observer.on_completed()
                    except BaseException:
                        # The subscriber broke the contract: stop here, never wedge the queue.
                        close()
                        upstream.dispose()
                        raise

            upstream.disposable = source.subscribe(
                lambda v: push(0, v), lambda e: push(1, e), lambda: push(2, None), scheduler=scheduler
            )

            def on_dispose() -> None:
                close()
                upstream.dispose()

            return Disposable(on_dispose)

        return Observable(subscribe)

    return _serialize
