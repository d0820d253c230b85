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

    loop = asyncio.get_running_loop()
    last = [loop.time()]  # when the last event went out

    async def tick(every: float) -> None:
        # one timer per silence, not one per item: the items come through the queue untimed
        while True:
            wait = last[0] + every - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            last[0] = loop.time()
            await queue.put(("keepalive", -1, None))

    tasks = [asyncio.ensure_future(pump(i, g)) for i, g in enumerate(gens)]
    if keepalive is not None:
        tasks.append(asyncio.ensure_future(tick(keepalive)))
    try:
        running = len(gens)
        while running:
            event = queue.get_nowait() if not queue.empty() else await queue.get()
            if event[0] == "keepalive":
                yield event
                continue
            if event[0] != "item":
                running -= 1
            if keepalive is not None:
                last[0] = loop.time()
            yield event
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
