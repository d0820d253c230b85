"""The resumable streams of one server (:class:`ReplayHub`, SEMANTICS §13): the streams by id, the
buffers' total budget, the cursors a resume gives (:func:`parse_cursor`) and the refusals
(:class:`ReplayError`). One stream's events and readers: :mod:`._replay`."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

from ._replay import Ending, SharedStream

__all__ = ["Cursor", "ReplayError", "ReplayHub", "parse_cursor"]

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
                cursor older than the buffer; (400) a cursor past the stream's last event.
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
        if cursor.after > stream.last:
            self.refused += 1
            raise ReplayError(
                f"stream {cursor.stream!r} has no event {cursor.after}: it has sent {stream.last} so far",
                400,
                "invalid_request_error",
            )
        if cursor.after < stream.base - 1:
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
