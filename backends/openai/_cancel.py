"""Telling an rxstream server that a stream nobody reads any more can stop now.

An ``rxstream serve`` keeps a stream's generation going for a grace period after its client
left, so that the client may resume it (SEMANTICS §13); it names the stream in the
``rxstream-stream-id`` response header. A subscriber that disposes a stream of such a server
does not come back: the backend posts ``{base_url}/streams/{id}/cancel``, so the generation ends
at once. Other servers send no such header, and nothing is posted.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections.abc import Coroutine, Mapping
from typing import Any

import httpx

from ._wire import WirePool, wire_target

__all__ = ["CANCEL_TIMEOUT", "cancel_url", "post_cancel", "post_cancel_async", "post_cancel_wire"]

STREAM_HEADER = "rxstream-stream-id"

CANCEL_TIMEOUT = 2.0
"""Seconds a cancel request may take (it is sent in the background; a lost one only means the
server's grace period runs out)."""

_SID = re.compile(r"[A-Za-z0-9_-]{1,100}")

_TASKS: set[asyncio.Task[None]] = set()


def cancel_url(streams: str | None, headers: Mapping[str, str]) -> str | None:
    """Where to cancel the stream a response names (``streams``: the server's ``.../streams/``
    base), or None when the server named no stream."""
    sid = headers.get(STREAM_HEADER)
    if streams is None or sid is None or _SID.fullmatch(sid) is None:
        return None
    return f"{streams}{sid}/cancel"


def post_cancel(client: httpx.Client, url: str) -> None:
    """Post the cancel on a short-lived thread (disposal may come on any thread, and must not wait)."""

    def post() -> None:
        with contextlib.suppress(Exception):
            client.post(url, timeout=CANCEL_TIMEOUT)

    threading.Thread(target=post, name="rxstream-openai-cancel", daemon=True).start()


def _spawn(coro: Coroutine[Any, Any, None]) -> None:
    task = asyncio.get_running_loop().create_task(coro)
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)


def post_cancel_async(client: httpx.AsyncClient, url: str) -> None:
    """Post the cancel as a task of the running loop (with that loop's client)."""

    async def post() -> None:
        with contextlib.suppress(Exception):
            await client.post(url, timeout=CANCEL_TIMEOUT)

    _spawn(post())


def post_cancel_wire(pool: WirePool, url: str) -> None:
    """Post the cancel as a task of the running loop, over a plain-HTTP connection of ``pool``."""
    target = wire_target(url)
    if target is None:  # pragma: no cover - the stream came over the same kind of URL
        return
    host, port, path = target

    async def post() -> None:
        for _attempt in (0, 1):  # an idle connection the server had closed: once more on a new one
            conn = None
            try:
                async with asyncio.timeout(CANCEL_TIMEOUT):
                    conn = await pool.connect(host, port)
                    await conn.send(pool.request(host, port, path, b"{}"))
                    await conn.read_all()
                    conn.release()
                    return
            except Exception:
                if conn is not None:
                    conn.abort()
                    if conn.reused and not conn.received:
                        continue
                return

    _spawn(post())
