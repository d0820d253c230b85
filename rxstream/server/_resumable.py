"""The endpoints' side of resumable streams (SEMANTICS §13): a streamed response goes through the
server's :class:`~._replay.ReplayHub`; a request with ``Last-Event-ID`` (a header, or a
``last_event_id`` query parameter for clients that cannot set headers) follows a stream from its
cursor; ``POST /v1/streams/{id}/cancel`` ends one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ._errors import RequestError
from ._replay import Ending
from ._replay_hub import ReplayError, ReplayHub, parse_cursor
from ._sse import StreamResponse, named_sse, sse
from ._state import ServerState

__all__ = [
    "STREAM_HEADER",
    "anthropic_ending",
    "cancel_handler",
    "follow_handler",
    "last_event_id",
    "openai_ending",
    "responses_ending",
    "resume",
    "streamed",
]

STREAM_HEADER = "rxstream-stream-id"
"""The response header that names a streamed response's stream (also the ``id:`` of its events)."""


def openai_ending(kind: str, message: str, _number: int) -> bytes:
    """Chat Completions and Completions: an ``{"error": ...}`` event, then ``[DONE]``."""
    error = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    return sse(error) + sse("[DONE]")


def responses_ending(kind: str, message: str, number: int) -> bytes:
    """The Responses API's ``error`` event."""
    return named_sse(
        {"type": "error", "code": kind, "message": message, "param": None, "sequence_number": number}
    )


def anthropic_ending(kind: str, message: str, _number: int) -> bytes:
    """The Messages API's ``error`` event."""
    return named_sse({"type": "error", "error": {"type": kind, "message": message}})


def last_event_id(request: Request) -> str | None:
    """The cursor a request resumes from: its ``Last-Event-ID`` header, else its ``last_event_id``
    query parameter, else None (a new request)."""
    return request.headers.get("last-event-id") or request.query_params.get("last_event_id")


def _hub(state: ServerState) -> ReplayHub:
    hub = state.replay
    if hub is None:  # pragma: no cover - every app made by create_app has one
        raise RequestError("this server keeps no streams to resume", status=404, kind="not_found")
    return hub


def streamed(
    state: ServerState, request: Request, sid: str, events: AsyncIterator[bytes], ending: Ending
) -> Response:
    """The response of a new streamed request: its events go through the hub as stream ``sid``."""
    stream = _hub(state).open(sid, request.url.path, events, ending)
    return StreamResponse(stream, 0, state.limits.keepalive_interval, headers={STREAM_HEADER: sid})


def resume(
    state: ServerState, request: Request, cursor: str, error: Callable[[RequestError], Response]
) -> Response:
    """The response of a request that resumes (or follows) a stream of the same path from
    ``cursor``; ``error`` renders a refusal in the endpoint's protocol."""
    hub = _hub(state)
    try:
        parsed = parse_cursor(cursor)
        stream = hub.find(parsed, request.url.path)
    except ReplayError as exc:
        return error(RequestError(str(exc), status=exc.status, kind=exc.kind, param="Last-Event-ID"))
    hub.resumes += 1
    return StreamResponse(
        stream, parsed.after, state.limits.keepalive_interval, headers={STREAM_HEADER: stream.sid}
    )


def cancel_handler(state: ServerState) -> Callable[[Request], Awaitable[Response]]:
    """``POST /v1/streams/{id}/cancel``: end a stream's generation now; its followers get the
    protocol's cancellation event. The answer's ``status`` is ``cancelled``, or ``completed``
    when the generation had already ended by itself."""

    async def cancel(request: Request) -> Response:
        sid = request.path_params["sid"]
        try:
            stream = _hub(state).find(parse_cursor(sid), None)
        except ReplayError as exc:
            return RequestError(str(exc), status=exc.status, kind=exc.kind).response()
        stream.cancel()
        status = "cancelled" if stream.cancelled else "completed"
        return JSONResponse({"id": stream.sid, "object": "stream", "status": status})

    return cancel


def follow_handler(
    state: ServerState, error: Callable[[RequestError], Response]
) -> Callable[[Request], Awaitable[Response]]:
    """The ``GET`` of a streaming endpoint: follow a stream of that path from a cursor (a
    ``Last-Event-ID`` header or ``last_event_id`` query parameter, which a GET must give)."""

    async def follow(request: Request) -> Response:
        cursor = last_event_id(request)
        if cursor is None:
            return error(
                RequestError(
                    f"GET {request.url.path} follows a stream: give the Last-Event-ID header (or a "
                    "last_event_id query parameter) naming it; a new request is a POST",
                    param="Last-Event-ID",
                )
            )
        return resume(state, request, cursor, error)

    return follow
