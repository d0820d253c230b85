"""The replay hub's bounds, on its own event loop (SEMANTICS §13): a stream's buffer keeps at most
its budget of events no reader needs, all buffers together at most theirs (finished streams
nobody follows go first), a reader is never skipped past silently, and a cursor outside the
buffer is refused."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from rxstream.server._replay_hub import Cursor, ReplayError, ReplayHub, parse_cursor


def ending(kind: str, message: str, number: int) -> bytes:
    return f"data: {kind} {number}\n\n".encode()


async def produce(n: int, size: int, gate: asyncio.Event | None = None) -> AsyncIterator[bytes]:
    for k in range(1, n + 1):
        if gate is not None:
            await gate.wait()
        yield f"data: {k:06d} {'x' * (size - 15)}\n\n".encode()  # size bytes
        await asyncio.sleep(0)


async def drain(hub: ReplayHub) -> None:
    for _ in range(200):
        await asyncio.sleep(0)
    while any(not s.done for s in hub.streams.values()):
        await asyncio.sleep(0.001)


def test_a_stream_nobody_reads_keeps_only_its_budget() -> None:
    async def main() -> None:
        hub = ReplayHub(grace=10, stream_bytes=1000, total_bytes=10_000)
        stream = hub.open("s1", "/p", produce(50, 100), ending)
        await drain(hub)
        assert stream.done and stream.last == 50
        assert stream.size <= 1000 and hub.total == stream.size
        assert stream.base == 51 - len(stream.events)  # the newest events are kept
        with pytest.raises(ReplayError) as info:
            hub.find(Cursor("s1", 0), "/p")
        assert info.value.status == 410 and "holds events" in str(info.value)
        assert hub.find(Cursor("s1", 49), "/p") is stream

    asyncio.run(main())


def test_all_buffers_together_keep_the_total_budget_finished_streams_first() -> None:
    async def main() -> None:
        hub = ReplayHub(grace=10, stream_bytes=10_000, total_bytes=2500)
        hub.open("old", "/p", produce(10, 100), ending)  # 1000 bytes, finished, nobody reads
        await drain(hub)
        assert hub.total == 1000
        gate = asyncio.Event()
        live = hub.open("live", "/p", produce(20, 100, gate), ending)
        gate.set()
        await drain(hub)
        assert "old" not in hub.streams  # forgotten first
        assert hub.total <= 2500 and live.size == hub.total

    asyncio.run(main())


def test_a_slow_reader_holds_the_producer_back_and_loses_nothing() -> None:
    async def main() -> None:
        hub = ReplayHub(grace=10, stream_bytes=300, total_bytes=10_000)
        stream = hub.open("s", "/p", produce(40, 100), ending)
        got: list[bytes] = []

        async def send(chunk: bytes) -> None:
            got.append(chunk)
            await asyncio.sleep(0.002)
            assert stream.size <= 300 + 100  # never more than the budget (and the one event)

        await stream.serve(0, send, None)
        events = [e for c in got for e in c.split(b"\n\n") if e]
        ids = [e.split(b"\n")[0] for e in events]
        assert ids == [b"id: s:%d" % n for n in range(1, 41)]

    asyncio.run(main())


def test_a_reader_left_behind_is_told_so() -> None:
    async def main() -> None:
        hub = ReplayHub(grace=10, stream_bytes=300, total_bytes=10_000)
        stream = hub.open("s", "/p", produce(30, 100), ending)
        sent: list[bytes] = []
        stalled = asyncio.Event()

        async def stuck(chunk: bytes) -> None:  # the reader takes the first events, then hangs
            sent.append(chunk)
            stalled.set()
            await asyncio.Event().wait()

        reader = asyncio.ensure_future(stream.serve(0, stuck, None))
        await stalled.wait()  # the reader joined and read the first events...
        first = sent[0]
        assert first.startswith(b"id: s:1\n")
        reader.cancel()  # ... and left: nothing holds the producer now
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        await drain(hub)
        last: list[bytes] = []

        async def keep(chunk: bytes) -> None:
            last.append(chunk)

        await stream.serve(1, keep, None)  # a cursor the buffer moved past
        assert last == [b"data: cursor_expired 2\n\n"]

    asyncio.run(main())


def test_grace_then_cancel_then_forget() -> None:
    async def main() -> None:
        hub = ReplayHub(grace=0.05, stream_bytes=10_000, total_bytes=100_000)
        gate = asyncio.Event()  # the generation never goes on by itself: only the cancel ends it
        stream = hub.open("s", "/p", produce(5, 50, gate), ending)

        async def ignore(_chunk: bytes) -> None:
            pass

        task = asyncio.ensure_future(stream.serve(0, ignore, None))
        await asyncio.sleep(0.01)
        task.cancel()  # the one client leaves
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.3)
        assert stream.done and hub.abandoned == 1  # cancelled when the grace period was over
        assert "s" not in hub.streams and hub.total == 0  # and forgotten one grace period later

    asyncio.run(main())


@pytest.mark.parametrize(
    ("text", "cursor"),
    [("abc", Cursor("abc", 0)), ("chatcmpl-1f:12", Cursor("chatcmpl-1f", 12)), (" s_1:0 ", Cursor("s_1", 0))],
)
def test_cursors_parse(text: str, cursor: Cursor) -> None:
    assert parse_cursor(text) == cursor


@pytest.mark.parametrize("text", ["", "a:b", "a:1:2", "a b", "x" * 101, "a:" + "9" * 13])
def test_bad_cursors_are_refused(text: str) -> None:
    with pytest.raises(ReplayError) as info:
        parse_cursor(text)
    assert info.value.status == 400
