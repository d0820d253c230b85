"""Text work off the batch's decode loop: each generation's pipeline runs in a lane of a small pool.

A batched model emits every row's ids on its one worker thread, between decode steps. Running a
request's text pipeline there (detokenize, stop and replace rules, routing, tool-call parsing) lets
one request's costly rules stall every row's next step. Instead, :meth:`TextLanes.lane` gives
each generation a :class:`Lane`: the ids (and the model's finish report) are queued as they come
and the worker goes straight back to decoding; a few pool threads run the lanes' pipelines.

* **In order, one at a time per lane**: a lane's notifications are delivered in the order they
  came, never two at once; the model's ``on_finish`` report goes through the lane too
  (:meth:`Lane.relay`), so the pipeline's own reports (a stop decided at an earlier token) still
  come first.
* **Fair**: lanes with work take turns; a turn delivers a lane's items for at most
  :data:`TURN_SECONDS`, then the lane goes to the back of the queue, so a request whose items are
  slow to process delays another's by about one turn, not by its whole backlog.
* **Bounded**: :attr:`Lane.pending` is what the lane holds; the server's ``ready`` predicate
  pauses a row whose lane falls behind (the row skips decode steps, the others go on).
* **No thread left behind**: pool threads start on demand and end after :data:`LINGER_SECONDS`
  without work. Disposing the lane's subscription disposes upstream and drops what is queued.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from typing import Any

import reactivex
from reactivex import abc
from reactivex.disposable import Disposable

from .._finish import Finish, FinishCallback

__all__ = ["LINGER_SECONDS", "TURN_SECONDS", "Lane", "TextLanes"]

log = logging.getLogger("rxstream.server")

TURN_SECONDS = 0.002
"""How long one lane's items are delivered before the next lane with work takes its turn."""

LINGER_SECONDS = 0.5
"""How long an idle pool thread waits for work before it ends."""

_NEXT, _ERROR, _DONE, _FINISH = 0, 1, 2, 3


class Lane:
    """One generation's queue of notifications, delivered by the pool (see the module docstring).

    Use it once: ``ids.pipe(lane)`` (it is an operator) and pass ``lane.relay(on_finish)`` to the
    model as its ``on_finish``.
    """

    __slots__ = ("_callback", "_items", "_lanes", "_observer", "_scheduled", "_upstream", "disposed")

    def __init__(self, lanes: TextLanes) -> None:
        self._lanes = lanes
        self._items: deque[tuple[int, Any]] = deque()
        self._observer: abc.ObserverBase[Any] | None = None
        self._upstream: abc.DisposableBase | None = None
        self._callback: FinishCallback | None = None
        self._scheduled = False  # in the pool's queue, or being delivered (guarded by the pool's lock)
        self.disposed = False

    @property
    def pending(self) -> int:
        """Notifications queued and not yet delivered."""
        return len(self._items)

    def relay(self, on_finish: FinishCallback | None) -> FinishCallback | None:
        """``on_finish`` delivered in the lane, after the items queued before it (None stays None)."""
        if on_finish is None:
            return None
        self._callback = on_finish

        def report(finish: Finish) -> None:
            self._put(_FINISH, finish)

        return report

    def __call__(self, source: reactivex.Observable[Any]) -> reactivex.Observable[Any]:
        def subscribe(
            observer: abc.ObserverBase[Any], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            if self._observer is not None:
                raise RuntimeError("a lane carries one subscription")
            self._observer = observer
            self._upstream = source.subscribe(
                lambda x: self._put(_NEXT, x),
                lambda e: self._put(_ERROR, e),
                lambda: self._put(_DONE, None),
                scheduler=scheduler,
            )
            if self.disposed:  # disposed while subscribing
                self._upstream.dispose()
            return Disposable(self._dispose)

        return reactivex.create(subscribe)

    def _put(self, kind: int, value: Any) -> None:
        if self.disposed:
            return
        self._items.append((kind, value))
        self._lanes._wake(self)

    def _dispose(self) -> None:
        self.disposed = True
        self._items.clear()
        upstream = self._upstream
        if upstream is not None:
            upstream.dispose()

    def _deliver(self, deadline: float) -> None:
        """Deliver queued items until none is left, the lane ends, or ``deadline`` passes."""
        items = self._items
        observer = self._observer
        while items and not self.disposed and observer is not None:
            kind, value = items.popleft()
            try:
                if kind == _NEXT:
                    observer.on_next(value)
                elif kind == _FINISH:
                    if self._callback is not None:
                        self._callback(value)
                else:
                    self.disposed = True  # terminal: nothing after it is delivered
                    items.clear()
                    if kind == _ERROR:
                        observer.on_error(value)
                    else:
                        observer.on_completed()
                    return
            except Exception:  # a downstream that raises past its own on_error: end the lane
                log.exception("text lane: a pipeline raised")
                self._dispose()
                return
            if time.perf_counter() >= deadline:
                return


class TextLanes:
    """A small pool of threads that runs generations' pipelines, lane by lane, fairly.

    Args:
        threads: pool threads at most (default: 2, or the CPU count up to 4); more let a slow
            item of one lane run beside the others' (the interpreter interleaves them).
        name: the threads' name.
    """

    def __init__(self, threads: int | None = None, *, name: str = "rxstream-text") -> None:
        if threads is None:
            threads = min(4, max(2, os.cpu_count() or 2))
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"TextLanes: threads must be a positive int, got {threads!r}")
        self.max_threads = threads
        self.name = name
        self._cond = threading.Condition()
        self._ready: deque[Lane] = deque()
        self._threads = 0
        self._idle = 0

    def lane(self) -> Lane:
        """A new lane (one generation's)."""
        return Lane(self)

    @property
    def threads(self) -> int:
        """Pool threads alive now."""
        with self._cond:
            return self._threads

    def _wake(self, lane: Lane) -> None:
        with self._cond:
            if lane._scheduled:
                return
            lane._scheduled = True
            self._ready.append(lane)
            if self._idle:
                self._cond.notify()
            elif self._threads < self.max_threads:
                self._threads += 1
                threading.Thread(target=self._run, name=self.name, daemon=True).start()

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                if not self._ready:
                    self._idle += 1
                    cond.wait_for(lambda: bool(self._ready), timeout=LINGER_SECONDS)
                    self._idle -= 1
                    if not self._ready:
                        self._threads -= 1
                        return
                lane = self._ready.popleft()
            lane._deliver(time.perf_counter() + TURN_SECONDS)
            with cond:
                if lane._items and not lane.disposed:
                    self._ready.append(lane)  # more to do: to the back, after the others
                else:
                    lane._scheduled = False
            time.sleep(0)  # let a thread waiting for the interpreter (the decode loop) take it
