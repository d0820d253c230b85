"""``POST /v1/messages``: the Anthropic Messages API over the chat path (the same prompt, routing,
rules, lanes and cancellation as ``/v1/chat/completions``), streamed as Anthropic's named
server-sent events or answered with the final message; errors in Anthropic's shape."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from rxstream.operators import MessageEvents

from .._piece import Piece
from ..chat import TextDelta
from ._body import read_json
from ._choice_events import merged
from ._errors import RequestError, generation_error
from ._generation import Generation
from ._messages_api_request import parse_messages_request
from ._prompt import fit_budget, prompt_ids
from ._resumable import anthropic_ending, last_event_id, resume, streamed
from ._sse import named_sse, until_disconnect
from ._state import ServerState

__all__ = ["MessagesApi", "anthropic_error", "error_body"]

_ERROR_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
}
"""Anthropic's error type for an HTTP status (any other 4xx: ``invalid_request_error``)."""


def error_body(err: RequestError) -> dict[str, Any]:
    """``{"type": "error", "error": {"type", "message"}}``, Anthropic's error object."""
    kind = _ERROR_TYPES.get(err.status, "invalid_request_error" if err.status < 500 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": err.message}}


def anthropic_error(err: RequestError) -> Response:
    """An error response in the Messages API's shape."""
    return JSONResponse(error_body(err), status_code=err.status)


_error = anthropic_error


_event = named_sse
"""A named server-sent event (the SDK reads the ``event:`` line)."""


def _item(value: Any) -> Any:
    """A generation's item as a chat item: a plain generation's text is answer text."""
    if isinstance(value, str):
        return TextDelta("content", value)
    if isinstance(value, Piece):
        return TextDelta("content", value.text)
    return value


async def _stream(gen: Generation, engine: MessageEvents, keepalive: float | None) -> AsyncIterator[bytes]:
    """The message as events: ``message_start`` at once, ``ping`` after ``keepalive`` seconds of
    silence, an ``error`` event when the generation fails. Closing it cancels the generation."""
    for event in engine.start():
        yield _event(event)
    try:
        async with contextlib.aclosing(merged([gen], keepalive)) as events:
            async for kind, _i, value in events:
                if kind == "keepalive":
                    yield _event({"type": "ping"})
                elif kind == "item":
                    for event in engine.add(_item(value)):
                        yield _event(event)
                elif kind == "end":
                    for event in engine.finish(gen.recorder.finish, gen.token_usage):
                        yield _event(event)
                else:
                    raise value
    except Exception as exc:
        yield _event(error_body(generation_error(exc)))


async def _collect(gen: Generation, engine: MessageEvents) -> dict[str, Any] | Exception:
    """The final message, or the exception that ended the generation."""
    try:
        async with contextlib.aclosing(merged([gen], None)) as events:
            async for kind, _i, value in events:
                if kind == "error":
                    return value  # type: ignore[no-any-return]
                if kind == "item":
                    engine.add(_item(value))
    except Exception as exc:
        return exc
    engine.finish(gen.recorder.finish, gen.token_usage)
    return engine.message()


class MessagesApi:
    """The ``/v1/messages`` endpoint of one app (:meth:`create`)."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    async def create(self, request: Request) -> Response:
        """A Messages request: the final message, or with ``stream: true`` its events. The SDK's
        ``x-api-key`` and ``anthropic-version`` headers are accepted (this server checks no key)."""
        state = self.state
        cursor = last_event_id(request)
        if cursor is not None:  # a client coming back (or another following): no new generation
            return resume(state, request, cursor, _error)
        limits, stats = state.limits, state.stats
        try:
            body = await read_json(request, limits)
            parsed = await asyncio.to_thread(parse_messages_request, body, limits)
            if body["model"] != state.model_name:
                raise RequestError(
                    f"model: '{body['model']}' does not exist: this server serves '{state.model_name}'",
                    param="model",
                    status=404,
                )
            ids, plan = await prompt_ids(state, parsed.request)
            req = fit_budget(state, parsed.request, len(ids))
            if stats.waiting >= limits.max_queued and stats.active >= limits.max_concurrency:
                raise RequestError("the server is busy; try again later", status=503)
        except RequestError as err:
            return _error(err)
        except ClientDisconnect:  # gone while sending the body: nobody to answer
            return Response(status_code=499)
        gen = Generation(state, req, ids, plan)
        message_id = "msg_" + uuid.uuid4().hex[:24]
        engine = MessageEvents(message_id, state.model_name, input_tokens=len(ids), thinking=parsed.thinking)
        if req.stream:
            return streamed(
                state, request, message_id, _stream(gen, engine, limits.keepalive_interval), anthropic_ending
            )
        disconnected, result = await until_disconnect(request.receive, _collect(gen, engine))
        if disconnected:
            return Response(status_code=499)
        if isinstance(result, Exception):
            return _error(generation_error(result))
        return JSONResponse(result)
