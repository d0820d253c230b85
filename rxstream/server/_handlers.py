"""The server's request handlers, as methods over one :class:`~._state.ServerState`."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.resources
import time
import uuid

from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from .._generative_model import supports_logprobs
from ..face import model_defaults
from ._body import read_json
from ._errors import RequestError, generation_error
from ._generation import Generation
from ._logprobs import TokenNames
from ._metrics import CONTENT_TYPE
from ._prompt import fit_budget, prompt_ids
from ._request_sampling import reported_defaults
from ._requests import GenerationRequest, validate_request
from ._responses import collect, completion_body, stream_events
from ._resumable import last_event_id, openai_ending, resume, streamed
from ._sse import until_disconnect
from ._state import ServerState
from ._token_ids import TokenIdNames

__all__ = ["Handlers"]


_LIGHT_BYTES = 16384
"""A request body at most this long, with no rules to compile, is checked on the event loop."""


def _light(request: Request, body: object) -> bool:
    """Whether checking ``body`` takes microseconds: a small body (by its Content-Length) with no
    stop strings or rxstream rules to compile."""
    length = _body_bytes(request)
    return (
        length is not None
        and length <= _LIGHT_BYTES
        and isinstance(body, dict)
        and "stop" not in body
        and "rxstream" not in body
    )


def _body_bytes(request: Request) -> int | None:
    """The request body's length (its Content-Length), where given."""
    length = request.headers.get("content-length", "")
    return int(length) if length.isdigit() else None


class Handlers:
    """The endpoints of one app (see :func:`~rxstream.server.create_app` for what each does)."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        static = importlib.resources.files("rxstream.server").joinpath("static")
        self.page = static.joinpath("chat.html").read_text(encoding="utf-8")
        self.icon = static.joinpath("favicon.svg").read_bytes()
        self.logprobs = supports_logprobs(state.model)
        self._names: TokenNames | None = None

    async def _token_names(self, req: GenerationRequest) -> TokenNames | None:
        """The token names for log-probabilities (built on first use, off the event loop: it reads
        the whole vocabulary), or None when not asked."""
        if req.logprobs is None:
            return None
        if not self.logprobs:
            raise RequestError(
                "log-probabilities are not available: the served model's generate() takes no "
                "'logprobs' (see rxstream.GenerativeModel)",
                param="logprobs",
            )
        if self._names is None:
            self._names = await asyncio.to_thread(TokenNames, self.state.model.tokenizer)
        return TokenIdNames(self._names) if req.tokens_as_ids else self._names

    async def completions(self, request: Request) -> Response:
        return await self._generate(request, chat=False)

    async def chat_completions(self, request: Request) -> Response:
        return await self._generate(request, chat=True)

    async def _generate(self, request: Request, chat: bool) -> Response:
        arrival = time.perf_counter()
        state = self.state
        cursor = last_event_id(request)
        if cursor is not None:  # a client coming back (or another following): no new generation
            return resume(state, request, cursor, RequestError.response)
        limits, stats = state.limits, state.stats
        try:
            body = await read_json(request, limits)
            if _light(request, body):  # no rules, a small body: a thread hop costs more
                req = validate_request(body, chat=chat, limits=limits)
            else:
                # off the event loop: compiling a request's rules takes milliseconds (bounded by
                # the limits), which every other stream's events would otherwise wait for
                req = await asyncio.to_thread(validate_request, body, chat=chat, limits=limits)
            self._check_model(body)
            names = await self._token_names(req)
            ids, plan = await prompt_ids(state, req, _body_bytes(request))
            if names is not None and plan is not None and plan.spec is not None:
                # the routed text carries its tokens: the answer's and the reasoning's get entries
                plan = dataclasses.replace(plan, logprobs=True)
            req = fit_budget(state, req, len(ids))
            if stats.waiting >= limits.max_queued and stats.active >= limits.max_concurrency:
                raise RequestError("the server is busy; try again later", status=503, kind="server_busy")
        except RequestError as err:
            return err.response()
        except ClientDisconnect:  # gone while sending the body: nobody to answer
            return Response(status_code=499)
        gens = [Generation(state, req, ids, plan, choice=i, arrival=arrival) for i in range(req.n)]
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        if req.stream:
            events = stream_events(
                gens, rid, created, state.model_name, names=names, keepalive=limits.keepalive_interval
            )
            return streamed(state, request, rid, events, openai_ending)
        disconnected, result = await until_disconnect(request.receive, collect(gens, names))
        if disconnected:
            return Response(status_code=499)
        error, results = result
        if error is not None:
            return generation_error(error).response()
        return JSONResponse(completion_body(results, rid, created, state.model_name, names))

    def _check_model(self, body: dict[str, object]) -> None:
        """A request may name the served model, or no model; any other name is OpenAI's 404."""
        name = body.get("model")
        if name is not None and name != self.state.model_name:
            raise RequestError(
                f"The model '{name}' does not exist: this server serves '{self.state.model_name}'",
                param="model",
                status=404,
                code="model_not_found",
            )

    def _defaults(self) -> dict[str, object]:
        """The sampling a request gets for the fields it leaves out (the model's defaults)."""
        limits = self.state.limits
        return reported_defaults(
            model_defaults(self.state.model), min(limits.default_max_tokens, limits.max_tokens)
        )

    async def models(self, _request: Request) -> Response:
        entry = {
            "id": self.state.model_name,
            "object": "model",
            "created": 0,
            "owned_by": "rxstream",
            "max_model_len": self.state.context_length,
            "sampling_defaults": self._defaults(),
        }
        return JSONResponse({"object": "list", "data": [entry]})

    async def health(self, _request: Request) -> Response:
        body = {"status": "ok", "model": self.state.model_name, "sampling_defaults": self._defaults()}
        batch = {"batching": self.state.batching, "batch": self.state.batch_stats()}
        replicas = getattr(self.state.model, "replica_stats", None)  # a gateway's upstream engines
        upstream = {"upstream": replicas()} if callable(replicas) else {}
        return JSONResponse({**body, **self.state.stats.snapshot(), **batch, **upstream})

    async def metrics(self, _request: Request) -> Response:
        metrics = self.state.metrics
        if metrics is None:  # pragma: no cover - every app made by create_app measures
            return RequestError("this server keeps no metrics", status=404, kind="not_found").response()
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    async def index(self, _request: Request) -> Response:
        return HTMLResponse(self.page)

    async def favicon(self, _request: Request) -> Response:
        return Response(self.icon, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})

    async def not_found(self, request: Request, _exc: Exception) -> Response:
        return RequestError(
            f"no route {request.method} {request.url.path}", status=404, kind="not_found"
        ).response()

    async def method_not_allowed(self, request: Request, _exc: Exception) -> Response:
        return RequestError(
            f"method {request.method} is not allowed on {request.url.path}",
            status=405,
            kind="invalid_request_error",
        ).response()
