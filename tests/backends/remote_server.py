"""A wire-format double of a remote chat server for the ``OpenAIBackend`` tests: Starlette and
uvicorn on a real socket, answering ``POST /v1/chat/completions``, ``/v1/responses`` and
``/v1/messages`` with recorded SSE bytes cut into the chunks a test chooses, and noticing when
the client goes away."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from rxstream.server import run_in_thread

RECORDED = Path(__file__).parent / "data" / "remote"


def recorded(name: str) -> bytes:
    return (RECORDED / f"{name}.sse").read_bytes()


class Double:
    """What the server answers next, and what it saw."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.status = 200
        self.error_body: dict[str, Any] = {}
        self.forever: bytes | None = None  # an event written again and again until the client leaves
        self.requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.disconnected = threading.Event()


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at the given offsets (anywhere: inside a line, a UTF-8 character)."""
    points = [0, *sorted(set(c for c in cuts if 0 < c < len(data))), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(points)]


@contextmanager
def remote_server() -> Iterator[tuple[str, Double]]:
    double = Double()

    async def answer(request: Request) -> Response:
        body = json.loads(await request.body())
        double.requests.append((request.url.path, body, dict(request.headers)))
        if double.status != 200:
            return Response(json.dumps(double.error_body), double.status, media_type="application/json")

        async def stream() -> AsyncIterator[bytes]:
            try:
                for chunk in double.chunks:
                    yield chunk
                    await asyncio.sleep(0)
                while double.forever is not None:
                    yield double.forever
                    await asyncio.sleep(0.005)
            finally:
                double.disconnected.set()

        return StreamingResponse(stream(), media_type="text/event-stream")

    paths = ("/v1/chat/completions", "/v1/responses", "/v1/messages")
    app = Starlette(routes=[Route(p, answer, methods=["POST"]) for p in paths])
    with run_in_thread(app) as url:
        yield f"{url}/v1", double
