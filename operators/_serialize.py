"""The ``serialize`` operator: make a source that calls ``on_next`` from several threads safe."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from reactivex import Observable, abc
from reactivex.disposable import CompositeDisposable, Disposable

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
            state = {"emitting": False, "done": False, "disposed": False}

            def push(kind: int, value: Any) -> None:
                with lock:
                    if state["done"] or state["disposed"]:
                        return
                    if kind != 0:
                        state["done"] = True
                    queue.append((kind, value))
                    if state["emitting"]:
                        return
                    state["emitting"] = True
                while True:
                    with lock:
                        if not queue or state["disposed"]:
                            state["emitting"] = False
                            queue.clear()
                            return
                        batch = list(queue)
                        queue.clear()
                    for k, v in batch:
                        if k == 0:
                            observer.on_next(v)
                        elif k == 1:
                            observer.on_error(v)
                        else:
                            observer.on_completed()

            def on_dispose() -> None:
                with lock:
                    state["disposed"] = True

            upstream = source.subscribe(
                lambda v: push(0, v), lambda e: push(1, e), lambda: push(2, None), scheduler=scheduler
            )
            return CompositeDisposable(Disposable(on_dispose), upstream)

        return Observable(subscribe)

    return _serialize
