"""Reading a request's JSON body within the server's limits."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import Request

from ._errors import RequestError
from ._limits import ServerLimits
from ._requests import check_encodable

__all__ = ["read_json"]


async def read_json(request: Request, limits: ServerLimits) -> Any:
    """The request's JSON body: ``application/json``, within the size and time limits, every
    string encodable as UTF-8 (a lone surrogate escape like ``"\\ud800"`` is a 400 naming the field).
    """
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        # also keeps other web sites' pages out: a form or text/plain POST needs no CORS preflight
        raise RequestError(
            f"the request body must be sent as Content-Type: application/json, got {media_type or 'none'!r}",
            status=415,
        )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise RequestError(f"the request body exceeds {limits.max_body_bytes} bytes", status=413)
    body = bytearray()
    try:
        async with asyncio.timeout(limits.body_timeout):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limits.max_body_bytes:
                    raise RequestError(f"the request body exceeds {limits.max_body_bytes} bytes", status=413)
    except TimeoutError:
        raise RequestError(
            f"the request body was not received within {limits.body_timeout:g} s", status=408
        ) from None
    try:
        value = json.loads(bytes(body))
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise RequestError(f"the request body is not valid JSON: {exc}") from exc
    check_encodable(value)
    return value
