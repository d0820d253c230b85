"""Tests for rxstream.aio: the asyncio bridges."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import time
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
