"""``POST /v1/responses``: OpenAI's Responses API over the chat path (one generation through
``chat_pipeline``, its items through the ``responses_events`` operator), streamed as server-sent
events or answered with the final response object; the last responses kept for
``previous_response_id``."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from reactivex.subject import Subject
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from .._piece import Piece
from ..chat import TextDelta
from ._body import read_json
from ._choice_events import merged
from ._errors import RequestError, generation_error
from ._generation import Generation
from ._prompt import fit_budget, prompt_ids
from ._requests import validate_request
from ._response_shapes import KEEPALIVE
from ._responses_api_request import ResponsesRequest, chat_body, output_messages
from ._resumable import last_event_id, responses_ending, resume, streamed
from ._sse import named_sse, until_disconnect
from ._state import ServerState

__all__ = ["ResponsesApi"]

_KEPT = 64
"""Responses kept in memory for ``previous_response_id`` (the oldest goes first)."""

_PARAMS = {
    "max_completion_tokens": "max_output_tokens",
    "max_tokens": "max_output_tokens",
    "messages": "input",
}
"""Chat request fields whose errors name the Responses field they came from."""


def _as_chat_item(item: Any) -> Any:
    """A plain (unrouted) generation's text as the answer's :class:`TextDelta`."""
    if isinstance(item, str):
        return TextDelta("content", item)
    if isinstance(item, Piece):
        return TextDelta("content", item.text)
    return item


class _Run:
    """One response's events, made by ``responses_events`` from the generation's items."""

    def __init__(self, gen: Generation, rid: str, created: int, model: str, echo: dict[str, Any]) -> None:
        from rxstream.operators import responses_events

        self.gen = gen
        self.error: Exception | None = None
        self.final: dict[str, Any] | None = None
        self.subject: Subject[Any] = Subject()
        self.out: list[dict[str, Any]] = []
        events = responses_events(
            rid,
            created_at=created,
            model=model,
            fields=echo,
            finish=gen.recorder,
            usage=lambda: gen.token_usage,
            input_tokens=len(gen.prompt_ids),
        )
        self.subject.pipe(events).subscribe(self._event)

    def _event(self, event: dict[str, Any]) -> None:
        self.out.append(event)
        if event["type"] in ("response.completed", "response.incomplete", "response.failed"):
            self.final = event["response"]

    async def events(self, keepalive: float | None) -> AsyncGenerator[dict[str, Any] | None, None]:
        """The events as they come (None: a keep-alive tick); closing it cancels the generation."""
        async with contextlib.aclosing(merged([self.gen], keepalive)) as items:
            for event in from_list(self.out):
                yield event
            async for kind, _i, value in items:
                if kind == "keepalive":
                    yield None
                    continue
                if kind == "item":
                    self.subject.on_next(_as_chat_item(value))
                elif kind == "end":
                    self.subject.on_completed()
                else:
                    self.error = value
                    self.subject.on_error(value)
                for event in from_list(self.out):
                    yield event


def from_list(out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Take what ``out`` holds."""
    taken = out[:]
    out.clear()
    return taken


class ResponsesApi:
    """The endpoint over one app's :class:`~._state.ServerState`, and the responses it keeps."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self._kept: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def _previous(self, body: Any) -> list[dict[str, Any]] | None:
        rid = body.get("previous_response_id") if isinstance(body, dict) else None
        if rid is None:
            return None
        with self._lock:
            messages = self._kept.get(rid) if isinstance(rid, str) else None
        if messages is None:
            raise RequestError(
                f"Previous response with id '{rid}' not found."[:300],
                param="previous_response_id",
                status=404,
                code="previous_response_not_found",
            )
        return messages

    def _keep(self, rid: str, asked: ResponsesRequest, final: dict[str, Any]) -> None:
        if not asked.store or final["status"] == "failed":
            return
        with self._lock:
            self._kept[rid] = [*asked.messages, *output_messages(final["output"])]
            while len(self._kept) > _KEPT:
                self._kept.popitem(last=False)

    async def create(self, request: Request) -> Response:
        state = self.state
        cursor = last_event_id(request)
        if cursor is not None:  # a client coming back (or another following): no new generation
            return resume(state, request, cursor, RequestError.response)
        limits, stats = state.limits, state.stats
        try:
            body = await read_json(request, limits)
            chat, asked = chat_body(body, self._previous(body))
            try:
                req = await asyncio.to_thread(validate_request, chat, chat=True, limits=limits)
            except RequestError as err:
                if err.param in _PARAMS:
                    err.message = err.message.replace(f"'{err.param}'", f"'{_PARAMS[err.param]}'")
                    err.param = _PARAMS[err.param]
                raise
            name = chat.get("model")
            if name is not None and name != state.model_name:
                raise RequestError(
                    f"The model '{name}' does not exist: this server serves '{state.model_name}'",
                    param="model",
                    status=404,
                    code="model_not_found",
                )
            ids, plan = await prompt_ids(state, req)
            req = fit_budget(state, req, len(ids))
            if stats.waiting >= limits.max_queued and stats.active >= limits.max_concurrency:
                raise RequestError("the server is busy; try again later", status=503, kind="server_busy")
        except RequestError as err:
            return err.response()
        except ClientDisconnect:
            return Response(status_code=499)
        rid = "resp_" + uuid.uuid4().hex
        run = _Run(Generation(state, req, ids, plan), rid, int(time.time()), state.model_name, asked.echo)
        if req.stream:
            events = self._stream(run, rid, asked, limits.keepalive_interval)
            return streamed(state, request, rid, events, responses_ending)
        disconnected, _ = await until_disconnect(request.receive, self._drain(run))
        if disconnected:
            return Response(status_code=499)
        if run.error is not None or run.final is None:
            return generation_error(run.error or RuntimeError("no response")).response()
        self._keep(rid, asked, run.final)
        return JSONResponse(run.final)

    async def _drain(self, run: _Run) -> None:
        async with contextlib.aclosing(run.events(None)) as events:
            async for _ in events:
                pass

    async def _stream(
        self, run: _Run, rid: str, asked: ResponsesRequest, keepalive: float | None
    ) -> AsyncIterator[bytes]:
        async with contextlib.aclosing(run.events(keepalive)) as events:
            async for event in events:
                if event is None:
                    yield KEEPALIVE
                    continue
                yield named_sse(event)
        if run.final is not None:
            self._keep(rid, asked, run.final)
