"""Server-sent events: the ``data:`` framing, and the response that sends a resumable stream's
events from a cursor until the client leaves (a disconnect ends only that response)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Mapping
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ._replay import SharedStream

__all__ = ["StreamResponse", "named_sse", "sse", "until_disconnect"]

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
"""One encoder for every event (``json.dumps`` with options builds a new one per call)."""


async def until_disconnect(receive: Receive, work: Awaitable[Any]) -> tuple[bool, Any]:
    """Run ``work`` while watching for the client going away; cancel it if it does.

    Returns ``(disconnected, result)``.
    """
    task = asyncio.ensure_future(work)

    async def watch() -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return

    watcher = asyncio.ensure_future(watch())
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
        watcher.cancel()
        with contextlib.suppress(BaseException):
            await watcher
    if task in done:
        return False, task.result()
    with contextlib.suppress(BaseException):
        await task
    return True, None


def sse(payload: Mapping[str, Any] | str) -> bytes:
    """A ``data:`` event (Chat Completions, Completions)."""
    data = payload if isinstance(payload, str) else _encode(payload)
    return f"data: {data}\n\n".encode()


def named_sse(payload: Mapping[str, Any]) -> bytes:
    """A named event: an ``event:`` line with the payload's ``type`` (the Responses and Messages
    APIs; their SDKs read it)."""
    return f"event: {payload['type']}\ndata: {_encode(payload)}\n\n".encode()


class StreamResponse(Response):
    """Server-sent events of a :class:`~._replay.SharedStream` from a cursor: the stream sends
    them itself (:meth:`~._replay.SharedStream.serve`); a disconnect ends only this response."""

    media_type = "text/event-stream"

    def __init__(
        self, stream: SharedStream, after: int, keepalive: float | None, headers: Mapping[str, str]
    ) -> None:
        self.status_code = 200
        self.background = None
        self.init_headers({"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **headers})
        self.stream = stream
        self.after = after
        self.keepalive = keepalive

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def body(data: bytes) -> None:
            await send({"type": "http.response.body", "body": data, "more_body": True})

        async def run() -> None:
            await send(
                {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
            )
            await self.stream.serve(self.after, body, self.keepalive)
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        with contextlib.suppress(OSError):
            await until_disconnect(receive, run())
