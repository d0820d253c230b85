"""Resumable, multicast event streams (SEMANTICS §13): every event of a stream is numbered and
kept in a replay buffer, so a client that comes back with ``Last-Event-ID`` gets exactly the
events after it, and several clients may follow one generation.

One :class:`SharedStream` per streamed response: a producer task reads the response's events
into the buffer; each client is a reader from its own cursor. When the last reader leaves, the
generation goes on for the hub's grace period, then it is cancelled; a finished stream is kept
for the same period, so that a client that lost the tail can fetch it.

Bounded: a stream's buffer holds at most ``stream_bytes``; past that, events every reader has
read are dropped (a reader that has not read the oldest event holds the producer back, as a
client holds back a generation today); with no reader, the oldest events are dropped. All
buffers together hold at most ``total_bytes`` of events no reader still needs. A cursor older
than the buffer is refused, never answered with a wrong resume.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._replay_hub import ReplayHub

__all__ = ["KEEPALIVE", "Ending", "Send", "SharedStream"]

KEEPALIVE = b": keep-alive\n\n"

_PINGS = (KEEPALIVE, b"event: ping\n")
"""Chunks that are not events of the stream (keep-alive comments, the Messages API's ping)."""

Send = Callable[[bytes], Awaitable[None]]
"""Sends bytes of a response's body to its client."""

Ending = Callable[[str, str, int], bytes]
"""The last event a reader gets when its stream ends early, in its protocol's shape:
``ending(kind, message, number)`` (``kind``: ``"cancelled"`` or ``"cursor_expired"``; ``number``:
the event's number)."""


class _Reader:
    """One client following a stream: its cursor, the future it waits on for more (woken by the
    producer, or by its keep-alive ticker), when it last sent something."""

    __slots__ = ("cursor", "failed", "lock", "ping", "send", "sent", "waiter")

    def __init__(self, cursor: int, now: float) -> None:
        self.cursor = cursor
        self.waiter: asyncio.Future[None] | None = None
        self.ping = False
        self.sent = now
        self.send: Send | None = None  # set while caught up: the producer sends to it directly
        self.failed = False  # a send to it failed (the client is gone)
        self.lock = asyncio.Lock()  # one send at a time (the producer's events, the pump's pings)

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class _Ticker:
    """The keep-alive timer of one reader (re-armed each interval)."""

    __slots__ = ("handle",)

    def __init__(self) -> None:
        self.handle: asyncio.TimerHandle | None = None

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()


class SharedStream:
    """One response's events, numbered from 1, with the readers that follow it."""

    def __init__(self, hub: ReplayHub, sid: str, path: str, ending: Ending) -> None:
        self.hub = hub
        self.sid = sid
        self.path = path
        self.ending = ending
        self.cancelled = False  # by an explicit request
        self.events: deque[bytes] = deque()
        self.base = 1  # the number of events[0]
        self.size = 0  # bytes in events
        self.done = False
        self.readers: set[_Reader] = set()
        self.task: asyncio.Task[None] | None = None
        self._read = asyncio.Event()  # a reader moved on (the producer may wait for it)
        self._timer: asyncio.TimerHandle | None = None
        self._prefix = f"id: {sid}:".encode()
        self._direct = 0  # readers the producer sends to

    @property
    def last(self) -> int:
        """The number of the last event so far (0 before the first)."""
        return self.base + len(self.events) - 1

    # -- the producer -----------------------------------------------------------------------
    def start(self, events: AsyncIterator[bytes]) -> None:
        self.task = asyncio.ensure_future(self._produce(events))

    async def _produce(self, events: AsyncIterator[bytes]) -> None:
        try:
            async for chunk in events:
                if chunk.startswith(_PINGS):
                    continue
                if self.size >= self.hub.stream_bytes:
                    await self._room()
                self._append(chunk)
                if self._direct:
                    await self._push()
        except asyncio.CancelledError:
            if not self.done:
                why = "by a request" if self.cancelled else f"{self.hub.grace:g} s after its last client left"
                self._append(self.ending("cancelled", f"the stream was cancelled {why}", self.last + 1))
                if self._direct:
                    await self._push()
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
            self.done = True
            self._wake(all_readers=True)
            if not self.readers:
                self._arm()

    async def _room(self) -> None:
        """Wait while the buffer is full of events a reader has not read."""
        budget = self.hub.stream_bytes
        while self.size >= budget:
            self._trim(budget - 1)  # room for the next event: below the budget
            if self.size < budget or not self.readers:
                return
            self._read.clear()
            await self._read.wait()

    def _append(self, chunk: bytes) -> None:
        self.events.append(chunk)
        self.size += len(chunk)
        self.hub.total += len(chunk)
        self._wake()
        if self.size > self.hub.stream_bytes:
            self._trim(self.hub.stream_bytes)
        if self.hub.total > self.hub.total_bytes:
            self.hub.reclaim()

    def _wake(self, all_readers: bool = False) -> None:
        """New events (or the end): wake the readers that fetch them (the producer sends to the
        caught-up ones itself), or every reader."""
        for reader in self.readers:
            if all_readers or reader.send is None:
                reader.wake()

    async def _push(self) -> None:
        """Send the newest event to every caught-up reader (in the producer: no task hop)."""
        n = self.last
        data = b"%s%d\n%s" % (self._prefix, n, self.events[-1])
        loop = asyncio.get_running_loop()
        for reader in [r for r in self.readers if r.send is not None and r.cursor == n - 1]:
            send = reader.send
            assert send is not None
            try:
                async with reader.lock:
                    await send(data)
            except Exception:  # the client went away: its pump ends, the stream goes on
                reader.failed = True
                reader.wake()
                continue
            reader.cursor = n
            reader.sent = loop.time()
        self._read.set()

    def _trim(self, budget: int) -> None:
        """Drop the oldest events until ``budget`` bytes are left, but none a reader still needs."""
        keep = min((r.cursor for r in self.readers), default=self.last)
        events = self.events
        while self.size > budget and events and self.base <= keep:
            gone = len(events.popleft())
            self.size -= gone
            self.hub.total -= gone
            self.base += 1

    # -- readers ----------------------------------------------------------------------------
    def _batch(self, reader: _Reader) -> bytes:
        """The buffered events after the reader's cursor, with their ``id:`` lines (it moves on)."""
        start = reader.cursor - self.base + 1
        parts = []
        for n, i in enumerate(range(start, len(self.events)), reader.cursor + 1):
            parts.append(b"%s%d\n%s" % (self._prefix, n, self.events[i]))
        reader.cursor = self.last
        self._read.set()
        return b"".join(parts)

    def _expired(self, reader: _Reader) -> bytes:
        message = (
            f"this client fell behind stream {self.sid!r}: its replay buffer "
            f"({self.hub.stream_bytes} bytes) no longer holds the events after {reader.cursor}"
        )
        return self.ending("cursor_expired", message, reader.cursor + 1)

    async def serve(self, after: int, send: Send, keepalive: float | None) -> None:
        """Send the events after number ``after`` with ``send``: what the buffer holds, then
        each new event as the producer appends it (to a caught-up reader the producer sends
        itself), a keep-alive comment after ``keepalive`` seconds of silence; return at the
        stream's end or when a send fails. A reader whose cursor the buffer moved past (it was
        not reading: no back-pressure holds it for a reader that left) gets ``cursor_expired``:
        events are never skipped silently."""
        loop = asyncio.get_running_loop()
        reader = _Reader(after, loop.time())
        self._join(reader)
        tick = self._ticker(reader, keepalive)
        try:
            while not reader.failed:
                if reader.cursor < self.base - 1:
                    await send(self._expired(reader))
                    return
                if reader.cursor < self.last:
                    data = self._batch(reader)
                    async with reader.lock:
                        await send(data)
                    reader.sent = loop.time()
                    continue
                if self.done:
                    return
                reader.send = send  # caught up: from here on the producer sends
                self._direct += 1
                try:
                    while True:
                        reader.waiter = loop.create_future()
                        await reader.waiter
                        reader.waiter = None
                        if not reader.ping:
                            break  # the end, or a failed send
                        reader.ping = False
                        if loop.time() - reader.sent >= (keepalive or 0) - 0.01:
                            async with reader.lock:
                                await send(KEEPALIVE)
                            reader.sent = loop.time()
                finally:
                    reader.send = None
                    self._direct -= 1
        finally:
            if tick is not None:
                tick.cancel()
            self._leave(reader)

    def _ticker(self, reader: _Reader, keepalive: float | None) -> _Ticker | None:
        """One timer per keep-alive interval (not one per wait): it wakes the reader to ping."""
        if keepalive is None:
            return None
        loop = asyncio.get_running_loop()
        ticker = _Ticker()

        def tick() -> None:
            if loop.time() - reader.sent >= keepalive - 0.01:
                reader.ping = True
                reader.wake()
            ticker.handle = loop.call_later(keepalive, tick)

        ticker.handle = loop.call_later(keepalive, tick)
        return ticker

    def _join(self, reader: _Reader) -> None:
        self.readers.add(reader)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _leave(self, reader: _Reader) -> None:
        self.readers.discard(reader)
        self._read.set()
        if not self.readers:
            self._arm()

    def _arm(self) -> None:
        """No reader left: after the grace period, cancel the generation (or forget the stream)."""
        if self._timer is not None:
            self._timer.cancel()
        grace = self.hub.grace
        if grace <= 0:
            self._expire()
        else:
            self._timer = asyncio.get_running_loop().call_later(grace, self._expire)

    def _expire(self) -> None:
        self._timer = None
        if self.readers:
            return
        if not self.done and self.task is not None:
            self.hub.abandoned += 1
            self.task.cancel()
            return  # the producer's end arms the timer again, to forget the stream later
        self.hub.forget(self)

    def cancel(self) -> None:
        """End the generation now (an explicit cancel); the readers get the cancellation event."""
        if not self.done and self.task is not None:
            self.cancelled = True
            self.task.cancel()
