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
import re
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

__all__ = ["Cursor", "Ending", "ReplayError", "ReplayHub", "SharedStream", "parse_cursor"]

KEEPALIVE = b": keep-alive\n\n"

_PINGS = (KEEPALIVE, b"event: ping\n")
"""Chunks that are not events of the stream (keep-alive comments, the Messages API's ping)."""

Ending = Callable[[str, str, int], bytes]
"""The last event a reader gets when its stream ends early, in its protocol's shape:
``ending(kind, message, number)`` (``kind``: ``"cancelled"`` or ``"cursor_expired"``; ``number``:
the event's number)."""

_CURSOR = re.compile(r"([A-Za-z0-9_-]{1,100})(?::(\d{1,12}))?")


class ReplayError(Exception):
    """A resume the hub cannot answer: ``status`` (404 unknown stream, 410 cursor older than the
    buffer, 400 malformed) and a message that says why."""

    def __init__(self, message: str, status: int, kind: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Cursor:
    """A position in a stream: the events after ``after`` (0: from the start)."""

    stream: str
    after: int


def parse_cursor(value: str) -> Cursor:
    """``<stream>`` (from the start) or ``<stream>:<n>`` (after event ``n``), as a ``Last-Event-ID``
    header or an event's ``id:`` field gives it.

    Raises:
        ReplayError: (400) anything else.
    """
    match = _CURSOR.fullmatch(value.strip())
    if match is None:
        raise ReplayError(
            f"Last-Event-ID must be '<stream id>' or '<stream id>:<event number>', got {value[:120]!r}",
            400,
            "invalid_request_error",
        )
    return Cursor(match.group(1), int(match.group(2) or 0))


class _Reader:
    """One client following a stream: its cursor, the future it waits on for more (woken by the
    producer, or by its keep-alive ticker), when it last sent something."""

    __slots__ = ("cursor", "ping", "sent", "waiter")

    def __init__(self, cursor: int, now: float) -> None:
        self.cursor = cursor
        self.waiter: asyncio.Future[None] | None = None
        self.ping = False
        self.sent = now

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


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
                await self._room()
                self._append(chunk)
        except asyncio.CancelledError:
            if not self.done:
                why = "by a request" if self.cancelled else f"{self.hub.grace:g} s after its last client left"
                self._append(self.ending("cancelled", f"the stream was cancelled {why}", self.last + 1))
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
            self.done = True
            self._wake()
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

    def _wake(self) -> None:
        for reader in self.readers:
            reader.wake()

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
    async def follow(self, after: int, keepalive: float | None) -> AsyncIterator[bytes]:
        """The events after number ``after``, as they come (``id:`` lines added); a keep-alive
        comment after ``keepalive`` seconds of silence."""
        loop = asyncio.get_running_loop()
        reader = _Reader(after, loop.time())
        self._join(reader)
        tick: asyncio.TimerHandle | None = None

        def ticker() -> None:  # one timer per interval, not one per wait
            nonlocal tick
            if loop.time() - reader.sent >= keepalive - 0.01:  # type: ignore[operator]
                reader.ping = True
                reader.wake()
            tick = loop.call_later(keepalive, ticker)  # type: ignore[arg-type]

        if keepalive is not None:
            tick = loop.call_later(keepalive, ticker)
        try:
            while True:
                if reader.cursor < self.base - 1:
                    # the buffer moved past this reader (it was not reading: no back-pressure
                    # holds it for a reader that left); never skip events silently
                    message = (
                        f"this client fell behind stream {self.sid!r}: its replay buffer "
                        f"({self.hub.stream_bytes} bytes) no longer holds the events after {reader.cursor}"
                    )
                    yield self.ending("cursor_expired", message, reader.cursor + 1)
                    return
                last = self.last
                if reader.cursor < last:
                    start = reader.cursor - self.base + 1
                    parts = []
                    for n, i in enumerate(range(start, len(self.events)), reader.cursor + 1):
                        parts.append(b"%s%d\n%s" % (self._prefix, n, self.events[i]))
                    reader.cursor = last
                    self._read.set()
                    yield b"".join(parts)
                    reader.sent = loop.time()
                    continue
                if self.done:
                    return
                reader.waiter = loop.create_future()
                await reader.waiter
                reader.waiter = None
                if reader.ping:
                    reader.ping = False
                    yield KEEPALIVE
                    reader.sent = loop.time()
        finally:
            if tick is not None:
                tick.cancel()
            self._leave(reader)

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


class ReplayHub:
    """The resumable streams of one server (see the module docstring).

    Args:
        grace: seconds a stream lives on with no reader (0: cancel at once, as without resuming).
        stream_bytes: the replay buffer of one stream, in bytes.
        total_bytes: all buffers together.
    """

    def __init__(self, grace: float, stream_bytes: int, total_bytes: int) -> None:
        self.grace = grace
        self.stream_bytes = stream_bytes
        self.total_bytes = total_bytes
        self.streams: dict[str, SharedStream] = {}
        self.total = 0
        self.resumes = 0
        self.abandoned = 0
        self.refused = 0

    def open(self, sid: str, path: str, events: AsyncIterator[bytes], ending: Ending) -> SharedStream:
        """Start buffering ``events`` as the stream ``sid`` of ``path``."""
        stream = SharedStream(self, sid, path, ending)
        self.streams[sid] = stream
        stream.start(events)
        return stream

    def find(self, cursor: Cursor, path: str | None) -> SharedStream:
        """The stream a cursor names, checked: it exists, belongs to ``path`` (unless None) and
        its buffer still holds the events after the cursor.

        Raises:
            ReplayError: (404) an unknown or forgotten stream, or one of another path; (410) a
                cursor older than the buffer or past the stream's last event.
        """
        stream = self.streams.get(cursor.stream)
        if stream is None or (path is not None and stream.path != path):
            self.refused += 1
            raise ReplayError(
                f"no stream {cursor.stream!r} to resume here: it never existed, or it ended more "
                f"than {self.grace:g} s ago with no client following it",
                404,
                "not_found",
            )
        if cursor.after < stream.base - 1 or cursor.after > stream.last:
            self.refused += 1
            held = f"events {stream.base}..{stream.last}" if stream.events else "no events"
            raise ReplayError(
                f"stream {cursor.stream!r} cannot resume after event {cursor.after}: its replay "
                f"buffer holds {held}",
                410,
                "cursor_expired",
            )
        return stream

    def forget(self, stream: SharedStream) -> None:
        if self.streams.get(stream.sid) is stream:
            del self.streams[stream.sid]
            self.total -= stream.size
            stream.events.clear()
            stream.size = 0

    def reclaim(self) -> None:
        """Over the total budget: forget finished streams nobody follows (oldest first), then
        drop events no reader needs, from the largest buffers first."""
        for stream in list(self.streams.values()):
            if self.total <= self.total_bytes:
                return
            if stream.done and not stream.readers:
                self.forget(stream)
        for stream in sorted(self.streams.values(), key=lambda s: s.size, reverse=True):
            if self.total <= self.total_bytes:
                return
            stream._trim(max(0, stream.size - (self.total - self.total_bytes)))

    def stats(self) -> dict[str, int]:
        """The figures ``/metrics`` reports: streams kept, readers, buffered bytes, resumes,
        refused resumes, generations abandoned after the grace period."""
        return {
            "streams": len(self.streams),
            "readers": sum(len(s.readers) for s in self.streams.values()),
            "buffered_bytes": self.total,
            "resumes": self.resumes,
            "refused": self.refused,
            "abandoned": self.abandoned,
        }

    def close(self) -> None:
        """Server shutdown: cancel every generation still running."""
        for stream in list(self.streams.values()):
            stream.cancel()
