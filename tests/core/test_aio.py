"""Tests for rxstream.aio: the asyncio bridges."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import AsyncIterator, Callable

import pytest
import reactivex
from reactivex import abc
from reactivex.disposable import Disposable

from rxstream import FinishReason, FinishRecorder, Piece
from rxstream.aio import from_async_iterable, to_async_iterable


class ThreadSource:
    """A cold observable producing ``count`` items on its own thread, cancellable between items.

    Records how many items were produced, whether the subscription was disposed, and the thread.
    """

    def __init__(
        self, count: int, delay: float = 0.0, make: Callable[[int], object] = str, fail_at: int | None = None
    ) -> None:
        self.count = count
        self.delay = delay
        self.make = make
        self.fail_at = fail_at
        self.produced = 0
        self.disposed = threading.Event()
        self.finished = threading.Event()
        self.thread: threading.Thread | None = None

    def observable(self) -> reactivex.Observable[object]:
        def subscribe(observer: abc.ObserverBase[object], _s: abc.SchedulerBase | None = None) -> Disposable:
            def work() -> None:
                try:
                    for i in range(self.count):
                        if self.disposed.is_set():
                            return
                        if self.fail_at == i:
                            observer.on_error(ValueError(f"boom at {i}"))
                            return
                        observer.on_next(self.make(i))
                        self.produced += 1
                        if self.delay:
                            time.sleep(self.delay)
                    observer.on_completed()
                finally:
                    self.finished.set()

            self.thread = threading.Thread(target=work, name="test-producer", daemon=True)
            self.thread.start()
            return Disposable(self.disposed.set)

        return reactivex.create(subscribe)


async def collect(ait: AsyncIterator[object]) -> list[object]:
    return [x async for x in ait]


def test_items_and_completion_from_another_thread() -> None:
    src = ThreadSource(200, make=lambda i: f"<{i}>")
    items = asyncio.run(collect(to_async_iterable(src.observable())))
    assert "".join(str(x) for x in items) == "".join(f"<{i}>" for i in range(200))
    assert 1 <= len(items) <= 200
    assert src.finished.wait(2)


def test_coalesce_merges_queued_text_and_pieces() -> None:
    async def main() -> tuple[list[object], list[object]]:
        # a synchronous source emits everything during subscribe: all of it is queued at once
        texts = await collect(to_async_iterable(reactivex.of("a", "b", "c")))
        pieces = await collect(
            to_async_iterable(reactivex.of(Piece("x", (1,), (-0.5,)), Piece("y", (2,), (-1.0,)), 7, "z"))
        )
        return texts, pieces

    texts, pieces = asyncio.run(main())
    assert texts == ["abc"]
    assert pieces == [Piece("xy", (1, 2), (-0.5, -1.0)), 7, "z"]


def test_no_coalesce_keeps_items() -> None:
    items = asyncio.run(collect(to_async_iterable(reactivex.of("a", "b", "c"), coalesce=False)))
    assert items == ["a", "b", "c"]


def test_one_thread_hop_per_batch() -> None:
    """While the consumer is busy, many produced items cost one wake-up, not one each."""

    async def main() -> tuple[int, list[object]]:
        loop = asyncio.get_running_loop()
        calls = 0
        original = loop.call_soon_threadsafe

        def counting(*args: object, **kwargs: object) -> object:
            nonlocal calls
            calls += 1
            return original(*args, **kwargs)  # type: ignore[arg-type]

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        src = ThreadSource(100)
        out: list[object] = []
        async for item in to_async_iterable(src.observable()):
            out.append(item)
            time.sleep(0.01)  # a slow consumer: items pile up meanwhile
        return calls, out

    calls, out = asyncio.run(main())
    assert "".join(map(str, out)) == "".join(str(i) for i in range(100))
    assert calls <= len(out) + 1
    assert len(out) < 50


def test_error_is_raised_after_queued_items() -> None:
    async def main() -> list[object]:
        got: list[object] = []
        with pytest.raises(ValueError, match="boom at 3"):
            async for x in to_async_iterable(ThreadSource(10, fail_at=3).observable(), coalesce=False):
                got.append(x)
        return got

    assert asyncio.run(main()) == ["0", "1", "2"]


def test_break_disposes_subscription() -> None:
    src = ThreadSource(10_000, delay=0.001)

    async def main() -> None:
        async for _x in to_async_iterable(src.observable()):
            break

    asyncio.run(main())
    gc.collect()
    assert src.disposed.wait(2)
    assert src.finished.wait(2)
    assert src.produced < 10_000


def test_aclose_disposes_subscription() -> None:
    src = ThreadSource(10_000, delay=0.001)

    async def main() -> None:
        async with contextlib.aclosing(to_async_iterable(src.observable())) as ait:
            async for _x in ait:
                break
        assert src.disposed.is_set()

    asyncio.run(main())
    assert src.finished.wait(2)


def test_task_cancellation_disposes_subscription() -> None:
    src = ThreadSource(10_000, delay=0.002)

    async def consume(ait: AsyncIterator[object]) -> None:
        async for _x in ait:
            pass

    async def main() -> None:
        ait = to_async_iterable(src.observable())
        task = asyncio.create_task(consume(ait))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert src.disposed.is_set()
        del ait

    asyncio.run(main())
    assert src.finished.wait(2)
    assert src.produced < 10_000


def test_maxsize_blocks_the_producer_thread() -> None:
    src = ThreadSource(50)

    async def main() -> list[object]:
        out: list[object] = []
        ait = to_async_iterable(src.observable(), coalesce=False, maxsize=3)
        out.append(await ait.__anext__())
        await asyncio.sleep(0.2)  # the producer fills the queue and blocks
        assert src.produced <= 1 + 3
        assert not src.finished.is_set()
        async for x in ait:
            out.append(x)
        return out

    out = asyncio.run(main())
    assert out == [str(i) for i in range(50)]


def test_maxsize_releases_a_blocked_producer_on_close() -> None:
    src = ThreadSource(1000)

    async def main() -> None:
        ait = to_async_iterable(src.observable(), maxsize=2)
        await ait.__anext__()
        await asyncio.sleep(0.05)
        await ait.aclose()  # type: ignore[attr-defined]

    asyncio.run(main())
    assert src.finished.wait(2), "the producer thread stayed blocked after aclose"


def test_maxsize_never_blocks_a_producer_on_the_loop_thread() -> None:
    items = asyncio.run(collect(to_async_iterable(reactivex.from_iterable(range(20)), maxsize=1)))
    assert items == list(range(20))


def test_maxsize_validated() -> None:
    with pytest.raises(ValueError, match="maxsize"):
        to_async_iterable(reactivex.empty(), maxsize=0)


async def agen(n: int, log: list[str]) -> AsyncIterator[int]:
    try:
        for i in range(n):
            await asyncio.sleep(0)
            yield i
    finally:
        log.append("closed")


def test_from_async_iterable_is_cold_and_completes() -> None:
    log: list[str] = []
    rec = FinishRecorder()

    async def main() -> tuple[list[int], list[int]]:
        obs = from_async_iterable(lambda: agen(5, log), on_finish=rec)
        first: list[int] = []
        second: list[int] = []
        done = asyncio.Event()
        obs.subscribe(first.append, on_completed=lambda: None)
        obs.subscribe(second.append, on_completed=done.set)
        await asyncio.wait_for(done.wait(), 2)
        return first, second

    first, second = asyncio.run(main())
    assert first == second == [0, 1, 2, 3, 4]
    assert log == ["closed", "closed"]
    assert rec.finish is not None and rec.finish.reason is FinishReason.EOS


def test_from_async_iterable_error() -> None:
    async def bad() -> AsyncIterator[int]:
        yield 1
        raise KeyError("nope")

    async def main() -> tuple[list[int], BaseException]:
        got: list[int] = []
        fut: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
        from_async_iterable(bad).subscribe(got.append, on_error=fut.set_result)
        return got, await asyncio.wait_for(fut, 2)

    got, err = asyncio.run(main())
    assert got == [1] and isinstance(err, KeyError)


def test_from_async_iterable_dispose_cancels_task_from_another_thread() -> None:
    log: list[str] = []
    rec = FinishRecorder()

    async def slow() -> AsyncIterator[int]:
        try:
            i = 0
            while True:
                await asyncio.sleep(0.005)
                yield i
                i += 1
        finally:
            log.append("closed")

    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    try:
        got: list[int] = []
        sub = from_async_iterable(slow, loop=loop, on_finish=rec).subscribe(got.append)
        deadline = time.monotonic() + 2
        while len(got) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        sub.dispose()
        time.sleep(0.1)
        count = len(got)
        time.sleep(0.1)
        assert len(got) == count, "items kept coming after disposal"
        assert log == ["closed"]
        assert rec.finish is not None and rec.finish.reason is FinishReason.CANCELLED
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join(2)
        loop.close()


def test_from_async_iterable_without_loop_reports_error() -> None:
    errors: list[Exception] = []
    from_async_iterable(lambda: agen(1, [])).subscribe(on_error=errors.append)
    assert errors and "no event loop" in str(errors[0])


def test_round_trip() -> None:
    async def main() -> list[int]:
        return [x async for x in to_async_iterable(from_async_iterable(lambda: agen(30, [])), coalesce=False)]

    assert asyncio.run(main()) == list(range(30))


class GatedSource:
    """A cold observable on its own thread that emits ``count`` items once ``gate`` is set."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.gate = threading.Event()
        self.disposed = threading.Event()
        self.finished = threading.Event()
        self.produced = 0

    def observable(self) -> reactivex.Observable[str]:
        def subscribe(observer: abc.ObserverBase[str], _s: abc.SchedulerBase | None = None) -> Disposable:
            def work() -> None:
                try:
                    self.gate.wait(5)
                    for i in range(self.count):
                        if self.disposed.is_set():
                            return
                        observer.on_next(str(i))
                        self.produced += 1
                    observer.on_completed()
                finally:
                    self.finished.set()

            threading.Thread(target=work, name="test-gated", daemon=True).start()
            return Disposable(self.disposed.set)

        return reactivex.create(subscribe)


def test_loop_closed_under_a_waiting_consumer_disposes_the_source() -> None:
    """The consumer was waiting when its loop was closed: the next item must dispose the source."""
    src = GatedSource(100_000)
    loop = asyncio.new_event_loop()
    ait = to_async_iterable(src.observable())
    task: asyncio.Task[object] = loop.create_task(ait.__anext__())  # type: ignore[arg-type]
    loop.run_until_complete(asyncio.sleep(0.01))  # the task subscribes and waits for an item
    assert not task.done()
    loop.set_exception_handler(lambda _loop, _context: None)  # "Task was destroyed but it is pending"
    loop.close()
    src.gate.set()
    assert src.disposed.wait(2), "the source kept producing for a consumer that is gone"
    assert src.finished.wait(2)
    assert src.produced < 100_000
    del task, ait


def test_maxsize_producer_is_released_when_the_loop_closes() -> None:
    """A consumer that stops reading but stays referenced: closing its loop frees the producer."""
    src = GatedSource(100)
    kept: list[AsyncIterator[object]] = []

    async def main() -> object:
        ait = to_async_iterable(src.observable(), maxsize=2, coalesce=False)
        kept.append(ait)  # still referenced after the loop is gone: no finalizer runs
        src.gate.set()
        return await ait.__anext__()

    assert asyncio.run(main()) == "0"
    assert src.finished.wait(3), "the producer stayed blocked after its event loop closed"
    assert src.disposed.is_set()
    assert src.produced <= 1 + 2 + 1


def test_close_while_the_lock_is_held_by_the_same_thread() -> None:
    """The iterator's finalizer may run (garbage collection) on the producer thread inside on_next."""
    src = GatedSource(10)

    async def main() -> None:
        ait = to_async_iterable(src.observable())
        src.gate.set()
        await ait.__anext__()
        channel = ait._channel  # type: ignore[attr-defined]
        closed = threading.Event()

        def finalizer_inside_the_lock() -> None:
            with channel.cond:
                channel.close()
            closed.set()

        threading.Thread(target=finalizer_inside_the_lock, daemon=True).start()
        assert closed.wait(2), "close() deadlocked on the channel's own lock"
        assert src.disposed.is_set()

    asyncio.run(main())


def test_from_async_iterable_on_a_closed_loop_reports_error() -> None:
    loop = asyncio.new_event_loop()
    loop.close()
    rec = FinishRecorder()
    errors: list[Exception] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine was never awaited"
        from_async_iterable(lambda: agen(3, []), loop=loop, on_finish=rec).subscribe(on_error=errors.append)
        gc.collect()
    assert len(errors) == 1 and "from_async_iterable" in str(errors[0]) and "closed" in str(errors[0])
    assert rec.finish is not None and rec.finish.reason is FinishReason.ERROR
    assert rec.finish.error is errors[0]


def test_from_async_iterable_on_a_loop_not_yet_running() -> None:
    """Subscribing before the loop runs: the items come once it runs; disposal before that is quiet."""
    loop = asyncio.new_event_loop()
    try:
        got: list[int] = []
        done = threading.Event()
        from_async_iterable(lambda: agen(3, []), loop=loop).subscribe(got.append, on_completed=done.set)
        rec = FinishRecorder()
        log: list[str] = []
        sub = from_async_iterable(lambda: agen(3, log), loop=loop, on_finish=rec).subscribe(got.append)
        sub.dispose()
        assert got == [] and not done.is_set()
        loop.run_until_complete(asyncio.sleep(0.05))
        assert done.is_set() and got == [0, 1, 2]
        assert rec.finish is not None and rec.finish.reason is FinishReason.CANCELLED
    finally:
        loop.close()


def test_from_async_iterable_disposed_after_its_loop_closed_is_quiet(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Disposing a subscription whose event loop has since been closed logs nothing (it once logged
    'RuntimeError: Event loop is closed' from a cancelled concurrent Future's callback)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever)
    thread.start()
    got: list[int] = []
    started = threading.Event()

    async def endless() -> AsyncIterator[int]:
        started.set()
        while True:
            yield 1
            await asyncio.sleep(0.005)

    rec = FinishRecorder()
    sub = from_async_iterable(endless, loop=loop, on_finish=rec).subscribe(got.append)
    assert started.wait(5)

    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()
    with caplog.at_level(logging.DEBUG):
        sub.dispose()
    err = capfd.readouterr().err
    assert "RuntimeError" not in err and "Traceback" not in err, err
    assert not [r for r in caplog.records if r.exc_info or "closed" in r.getMessage()], caplog.records
    assert got and rec.finish is not None and rec.finish.reason is FinishReason.CANCELLED


_CANCELLING_CONSUMERS = """
import asyncio, gc
from rxstream.aio import from_async_iterable, to_async_iterable

async def numbers():
    i = 0
    while True:
        await asyncio.sleep(0.005)
        i += 1
        yield i

async def close_early(loop):
    it = to_async_iterable(from_async_iterable(numbers()))
    await it.__anext__()
    await it.aclose()

async def cancel_consumer(loop):
    async def consume():
        async for _ in to_async_iterable(from_async_iterable(numbers())):
            pass
    task = asyncio.ensure_future(consume())
    await asyncio.sleep(0.03)
    task.cancel()

async def dispose(loop):
    subscription = from_async_iterable(numbers()).subscribe(lambda x: None)
    await asyncio.sleep(0.02)
    subscription.dispose()

for case in (close_early, cancel_consumer, dispose):
    loop = asyncio.new_event_loop()
    loop.run_until_complete(case(loop))
    loop.close()  # at once: the cancellations have not run yet
    gc.collect()
print("done")
"""


def test_a_consumer_that_cancels_leaves_no_pending_task_warning() -> None:
    """A consumer that closes or cancels, then a loop closed at once: the subscription's task has
    not run its cancellation yet, and asyncio printed "Task was destroyed but it is pending!"."""
    done = subprocess.run(
        [sys.executable, "-c", _CANCELLING_CONSUMERS], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "done"
    assert "destroyed" not in done.stderr, done.stderr
