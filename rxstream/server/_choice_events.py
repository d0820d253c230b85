"""The items of several choices of one request, interleaved as they come (with keep-alive
ticks while all are silent); closing the merge cancels every choice."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Sequence
from typing import Any, Literal

from ._generation import Generation

__all__ = ["merged"]

_Event = tuple[Literal["item", "end", "error", "keepalive"], int, Any]


async def merged(gens: Sequence[Generation], keepalive: float | None) -> AsyncGenerator[_Event, None]:
    """The items of every choice as they come, interleaved: ``("item", i, str | Piece)``, then
    ``("end", i, None)`` or ``("error", i, exc)`` per choice; ``("keepalive", -1, None)`` after
    ``keepalive`` seconds without one. Closing it (or a failure here) cancels every choice, which
    disposes its generation."""
    queue: asyncio.Queue[_Event] = asyncio.Queue(maxsize=2 * len(gens))

    async def pump(i: int, gen: Generation) -> None:
        try:
            # closed explicitly (not left to the garbage collector) when the task ends or is cancelled
            async with contextlib.aclosing(gen.items()) as items:
                async for item in items:
                    await queue.put(("item", i, item))
        except Exception as exc:
            await queue.put(("error", i, exc))
            return
        await queue.put(("end", i, None))

    tasks = [asyncio.ensure_future(pump(i, g)) for i, g in enumerate(gens)]
    getter: asyncio.Future[_Event] | None = None
    try:
        running = len(gens)
        while running:
            if getter is None and not queue.empty():
                event = queue.get_nowait()
            elif keepalive is None:
                event = await queue.get()
            else:
                # not asyncio.wait_for: on Python 3.11 it can swallow a cancellation that comes
                # as the item arrives (the response would then never stop)
                if getter is None:
                    getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait((getter,), timeout=keepalive)
                if not done:
                    yield ("keepalive", -1, None)
                    continue
                event, getter = getter.result(), None
            if event[0] != "item":
                running -= 1
            yield event
    finally:
        if getter is not None:
            getter.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
