"""The server's text lanes: a generation's pipeline runs off the model's thread, in order, fairly,
and nothing outlives its subscription."""

from __future__ import annotations

import threading
import time
from typing import Any

import reactivex
from reactivex import operators as ops
from reactivex.disposable import Disposable

from rxstream import Finish, FinishReason, FinishRecorder
from rxstream.server._lanes import LINGER_SECONDS, TextLanes


def producer(items: list[Any], emitted: threading.Event | None = None) -> reactivex.Observable[Any]:
    """Emits ``items`` from a thread of its own (as a model's worker does), then completes; records
    the time each ``on_next`` call returned."""

    def subscribe(observer: Any, scheduler: Any = None) -> Disposable:
        stop = threading.Event()

        def run() -> None:
            for x in items:
                if stop.is_set():
                    return
                observer.on_next(x)
            observer.on_completed()
            if emitted is not None:
                emitted.set()

        threading.Thread(target=run, name="fake-worker", daemon=True).start()
        return Disposable(stop.set)

    return reactivex.create(subscribe)


def wait(predicate: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return bool(predicate())


def test_the_producer_never_waits_for_a_slow_pipeline() -> None:
    lanes = TextLanes(2)
    lane = lanes.lane()
    emitted = threading.Event()
    got: list[int] = []
    done = threading.Event()

    def slow(x: int) -> None:
        time.sleep(0.02)
        got.append(x)

    producer(list(range(20)), emitted).pipe(lane).subscribe(slow, on_completed=done.set)
    assert emitted.wait(1.0), "the producer was held by its consumer"
    assert len(got) < 20  # it was done long before the pipeline (20 x 20 ms)
    assert done.wait(5) and got == list(range(20))


def test_items_run_in_order_on_a_lane_thread_never_two_at_once() -> None:
    lanes = TextLanes(3)
    lane = lanes.lane()
    seen: list[tuple[int, str]] = []
    inside = [0]
    overlaps = [0]
    done = threading.Event()

    def on_next(x: int) -> None:
        inside[0] += 1
        overlaps[0] = max(overlaps[0], inside[0])
        seen.append((x, threading.current_thread().name))
        time.sleep(0.0005)
        inside[0] -= 1

    producer(list(range(300))).pipe(lane, ops.map(lambda x: x)).subscribe(on_next, on_completed=done.set)
    assert done.wait(10)
    assert [x for x, _ in seen] == list(range(300))
    assert {name for _, name in seen} <= {"rxstream-text"}
    assert overlaps[0] == 1


def test_a_slow_lane_delays_another_by_about_one_turn() -> None:
    """A lane whose items are slow takes turns with the others: a quick lane's items are not queued
    behind the slow lane's whole backlog."""
    lanes = TextLanes(1)  # one thread: only the turns keep it fair
    slow_lane, quick_lane = lanes.lane(), lanes.lane()
    slow_done, quick_done = threading.Event(), threading.Event()
    slow_seen: list[int] = []

    def slow(x: int) -> None:
        time.sleep(0.01)
        slow_seen.append(x)

    producer(list(range(100))).pipe(slow_lane).subscribe(slow, on_completed=slow_done.set)
    time.sleep(0.05)  # the slow lane has a backlog of ~95 items (about a second of work)
    producer(list(range(50))).pipe(quick_lane).subscribe(lambda x: None, on_completed=quick_done.set)
    assert quick_done.wait(1.0)
    assert len(slow_seen) < 60, "the quick lane waited for the slow lane's backlog"
    assert slow_done.wait(5)


def test_the_models_finish_comes_after_the_items_before_it() -> None:
    """The model reports its finish on its own thread right after its last id; through the lane the
    pipeline's own report for an earlier item (a stop) still comes first."""
    lanes = TextLanes(2)
    lane = lanes.lane()
    recorder = FinishRecorder()
    relay = lane.relay(recorder)
    assert relay is not None
    done = threading.Event()

    def model(observer: Any, scheduler: Any = None) -> Disposable:
        def run() -> None:
            for x in range(10):
                observer.on_next(x)
            relay(Finish(FinishReason.EOS))
            observer.on_completed()

        threading.Thread(target=run, daemon=True).start()
        return Disposable()

    def pipeline(x: int) -> None:
        time.sleep(0.002)
        if x == 3:
            recorder(Finish(FinishReason.STOP, stop="3"))

    reactivex.create(model).pipe(lane).subscribe(pipeline, on_completed=done.set)
    assert done.wait(5)
    assert recorder.finish is not None and recorder.finish.reason is FinishReason.STOP
    assert lane.relay(None) is None


def test_disposing_drops_what_is_queued_and_disposes_upstream() -> None:
    lanes = TextLanes(2)
    lane = lanes.lane()
    disposed = threading.Event()
    release = threading.Event()
    got: list[int] = []

    def source(observer: Any, scheduler: Any = None) -> Disposable:
        for x in range(50):
            observer.on_next(x)
        return Disposable(disposed.set)

    def on_next(x: int) -> None:
        got.append(x)
        release.wait(2)

    subscription = reactivex.create(source).pipe(lane).subscribe(on_next)
    assert wait(lambda: got == [0])
    subscription.dispose()
    release.set()
    assert disposed.is_set()
    time.sleep(0.05)
    assert got == [0] and lane.pending == 0


def test_errors_reach_on_error_in_order() -> None:
    lanes = TextLanes(1)
    lane = lanes.lane()
    events: list[Any] = []
    done = threading.Event()

    def source(observer: Any, scheduler: Any = None) -> Disposable:
        observer.on_next(1)
        observer.on_error(ValueError("boom"))
        observer.on_next(2)  # after the end: never delivered
        return Disposable()

    reactivex.create(source).pipe(lane).subscribe(events.append, lambda e: (events.append(e), done.set()))
    assert done.wait(5)
    assert events[0] == 1 and isinstance(events[1], ValueError) and len(events) == 2


def test_no_thread_outlives_the_work() -> None:
    lanes = TextLanes(3)
    done = threading.Event()
    producer(list(range(100))).pipe(lanes.lane()).subscribe(lambda x: None, on_completed=done.set)
    assert done.wait(5)
    assert lanes.threads >= 1
    assert wait(lambda: lanes.threads == 0, timeout=LINGER_SECONDS + 3)
    # and the pool starts again when work comes
    again = threading.Event()
    producer([1]).pipe(lanes.lane()).subscribe(lambda x: None, on_completed=again.set)
    assert again.wait(5)
