"""An OpenAI-compatible streaming server over a local model (``rxstream serve``).

:func:`create_app` builds a Starlette ASGI application; :func:`serve` loads a model and runs it
on uvicorn; :func:`run_in_thread` runs an app on a background thread (tests, notebooks).

Endpoints:

* ``GET /`` -- a small chat page (``rxstream/static/chat.html``) that streams answers live.
  Query parameters: ``q`` (a first question), ``autorun=1`` (send it on load), ``max_tokens``,
  ``temperature``.
* ``POST /v1/completions`` and ``POST /v1/chat/completions`` -- ``stream`` true (server-sent
  events, ending with ``data: [DONE]``) or false (one JSON body).
* ``GET /v1/models`` -- the one served model.
* ``GET /health`` -- ``{"status": "ok", ...}`` with generation counters.

Each request's text is made by the rxstream operators: the model's ids are detokenized, cut at the
request's ``stop`` strings (``stop(...)``, matched on the generated text as OpenAI does), then
rewritten by the rxstream extension field ``"rxstream": {"replace": {"old": "new", ...}}`` (also
accepted: a list of ``[old, new]`` pairs; applied after ``stop``, leftmost-longest, replacement
text never rescanned). With the official client pass it as
``extra_body={"rxstream": {"replace": {...}}}``.

``finish_reason`` is ``"stop"`` (end of sequence, or a stop string: then ``stop_reason`` names it,
as vLLM does) or ``"length"`` (the ``max_tokens`` budget). A failure during a stream is sent as an
``{"error": {...}}`` event (the official client raises ``APIError``).

Request limits (:class:`ServerLimits`, all enforced with HTTP 400 and an OpenAI-style error body
naming the parameter): body size, prompt size in characters and tokens, ``max_tokens``, prompt plus
``max_tokens`` within the model's context, number and length of stop strings, number and length of
replace rules, number of messages, types and ranges of sampling parameters; ``n`` must be 1;
``logprobs``/``echo``/``best_of``/``suffix``/``tools`` are not supported.

Concurrency: generations run on the model's worker threads, never on the event loop (tokenizing
and chat templates run in ``asyncio.to_thread``). At most ``ServerLimits.max_concurrency``
generations run at once (default 4); further requests wait in a queue (at most
``ServerLimits.max_queued``, default 256; beyond that the answer is 503). A client that
disconnects -- while waiting or while streaming -- has its subscription disposed, which cancels
the generation within one token.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import importlib.resources
import json
import socket
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import reactivex
from reactivex import abc
from reactivex import operators as ops
from reactivex.scheduler import ThreadPoolScheduler
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ._finish import Finish, FinishReason, FinishRecorder
from ._server_connections import raise_open_files_limit, uvicorn_config
from ._server_hosts import HostGuard, parse_allowed_hosts
from ._server_requests import (
    GenerationRequest,
    RequestError,
    ServerLimits,
    check_encodable,
    validate_request,
)
from .aio import to_async_iterable

__all__ = [
    "GenerationRequest",
    "RequestError",
    "ServerLimits",
    "ServerStats",
    "add_serve_arguments",
    "add_serve_parser",
    "build_text_stream",
    "create_app",
    "run_in_thread",
    "serve",
    "serve_from_args",
]


# ---------------------------------------------------------------------------------------------
# stats
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class ServerStats:
    """Counters of a running server (thread-safe; read them through :meth:`snapshot`).

    Attributes:
        active: generations subscribed and not yet finished.
        waiting: requests waiting for a generation slot.
        started: generations started.
        finished: how many generations ended for each :class:`~rxstream.FinishReason` (the first
            reason reported for the request: a stop string reports ``stop`` even though it then
            cancels the model, a disconnect reports ``cancelled``).
        generated_tokens: token ids generated, all requests together.
        peak_active: the most generations that ran at once.
    """

    active: int = 0
    waiting: int = 0
    started: int = 0
    finished: Counter[str] = field(default_factory=Counter)
    generated_tokens: int = 0
    peak_active: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _start(self) -> None:
        with self._lock:
            self.active += 1
            self.started += 1
            self.peak_active = max(self.peak_active, self.active)

    def _end(self, reason: FinishReason) -> None:
        with self._lock:
            self.active -= 1
            self.finished[reason.value] += 1

    def _tokens(self, n: int) -> None:
        with self._lock:
            self.generated_tokens += n

    def snapshot(self) -> dict[str, Any]:
        """The counters as a JSON-ready dict."""
        with self._lock:
            return {
                "active": self.active,
                "waiting": self.waiting,
                "started": self.started,
                "finished": dict(self.finished),
                "generated_tokens": self.generated_tokens,
                "peak_active": self.peak_active,
            }


# ---------------------------------------------------------------------------------------------
# the generation pipeline
# ---------------------------------------------------------------------------------------------


def build_text_stream(
    model: Any,
    prompt_ids: Sequence[int],
    request: GenerationRequest,
    *,
    on_finish: Callable[[Finish], None] | None = None,
    on_token: Callable[[int], None] | None = None,
    scheduler: abc.SchedulerBase | None = None,
) -> reactivex.Observable[str]:
    """The text of one request: ``generate -> detokenize -> stop -> replace``.

    ``on_finish`` receives the reports of the model and of ``stop`` (pass a
    :class:`~rxstream.FinishRecorder` to learn why the request ended); ``on_token`` sees each
    generated id (on the model's worker thread). ``scheduler`` runs the generation loop (default:
    the model's own pool).
    """
    from rxstream.operators import detokenize, replace, stop

    ids: reactivex.Observable[int] = model.generate(
        list(prompt_ids),
        max_new_tokens=request.max_tokens,
        temperature=request.temperature,
        top_k=request.top_k,
        top_p=request.top_p,
        repetition_penalty=request.repetition_penalty,
        seed=request.seed,
        on_finish=on_finish,
        scheduler=scheduler,
    )
    if on_token is not None:
        ids = ids.pipe(ops.do_action(on_next=on_token))
    text: reactivex.Observable[str] = ids.pipe(detokenize(model.tokenizer, prompt_ids=list(prompt_ids)))
    if request.stop:
        text = text.pipe(stop(list(request.stop), on_finish=on_finish))
    if request.replace:
        text = text.pipe(replace(list(request.replace)))
    return text


def _finish_fields(finish: Finish | None) -> tuple[str | None, str | int | None]:
    if finish is None:
        return "stop", None
    if finish.reason is FinishReason.STOP:
        return "stop", finish.stop
    return finish.openai_reason, None


@dataclass(slots=True)
class _State:
    model: Any
    model_name: str
    limits: ServerLimits
    stats: ServerStats
    context_length: int | None
    scheduler: ThreadPoolScheduler
    semaphore: asyncio.Semaphore | None = None

    def slots(self) -> asyncio.Semaphore:
        if self.semaphore is None:  # created lazily: it must belong to the serving loop
            self.semaphore = asyncio.Semaphore(self.limits.max_concurrency)
        return self.semaphore


_QUEUED_DELTAS = 64
"""Text deltas a generation may queue for its response before its worker thread waits."""


class _Generation:
    """One request's generation: subscribes on first iteration, always releases what it holds."""

    def __init__(self, state: _State, request: GenerationRequest, prompt_ids: Sequence[int]) -> None:
        self.state = state
        self.request = request
        self.prompt_ids = prompt_ids
        self.recorder = FinishRecorder()
        self.tokens = 0
        self.error: Exception | None = None
        self._ended = False
        self._lock = threading.Lock()

    def _on_token(self, _id: int) -> None:
        self.tokens += 1

    def _end(self) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
        finish = self.recorder.finish
        if self.error is not None:
            reason = FinishReason.ERROR
        else:
            reason = finish.reason if finish is not None else FinishReason.CANCELLED
        self.state.stats._end(reason)
        self.state.stats._tokens(self.tokens)

    async def texts(self) -> AsyncGenerator[str, None]:
        """The text deltas; waits for a generation slot first; disposal on exit of any kind."""
        stats = self.state.stats
        slots = self.state.slots()
        with stats._lock:
            stats.waiting += 1
        try:
            await slots.acquire()
        finally:
            with stats._lock:
                stats.waiting -= 1
        try:
            stats._start()
            ait: AsyncIterator[str] | None = None
            try:
                source = build_text_stream(
                    self.state.model,
                    self.prompt_ids,
                    self.request,
                    on_finish=self.recorder,
                    on_token=self._on_token,
                    scheduler=self.state.scheduler,
                )
                # back-pressure: a client that reads slowly pauses its generation instead of
                # letting text pile up in memory
                ait = to_async_iterable(source, maxsize=_QUEUED_DELTAS)
                async for delta in ait:
                    yield delta
            except Exception as exc:
                self.error = exc
                raise
            finally:
                if ait is not None:
                    await ait.aclose()  # type: ignore[attr-defined]
                self._end()
        finally:
            slots.release()


async def _until_disconnect(receive: Receive, work: Awaitable[Any]) -> tuple[bool, Any]:
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


def _sse(payload: Mapping[str, Any] | str) -> bytes:
    data = (
        payload
        if isinstance(payload, str)
        else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    )
    return f"data: {data}\n\n".encode()


class _EventStreamResponse(Response):
    """Server-sent events from an async iterator of bytes; a disconnect cancels the iterator."""

    media_type = "text/event-stream"

    def __init__(self, events: AsyncIterator[bytes]) -> None:
        # no body: like StreamingResponse, so that no Content-Length header is set
        self.status_code = 200
        self.background = None
        self.init_headers({"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self.events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        events = self.events

        async def pump() -> None:
            try:
                await send(
                    {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
                )
                async for chunk in events:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            finally:
                aclose = getattr(events, "aclose", None)
                if aclose is not None:
                    await aclose()

        with contextlib.suppress(OSError):
            await _until_disconnect(receive, pump())


def _chunk_base(kind: str, rid: str, created: int, model: str) -> dict[str, Any]:
    return {"id": rid, "object": kind, "created": created, "model": model}


async def _prompt_ids(state: _State, request: GenerationRequest) -> list[int]:
    model = state.model
    if request.chat:
        assert request.messages is not None
        messages = [dict(m) for m in request.messages]
        try:
            encoded = await asyncio.to_thread(model.encode_chat, messages, add_generation_prompt=True)
            ids: list[int] = list(encoded)
        except Exception as exc:
            raise RequestError(
                f"the chat template failed on these messages: {exc}", param="messages"
            ) from exc
    elif request.prompt_ids is not None:
        vocab = model.tokenizer.get_vocab_size(with_added_tokens=True)
        bad = [i for i in request.prompt_ids if not 0 <= i < vocab]
        if bad:
            raise RequestError(f"prompt token ids out of range [0, {vocab}): {bad[:5]}", param="prompt")
        ids = list(request.prompt_ids)
    else:
        assert request.prompt is not None
        try:
            ids = list(await asyncio.to_thread(model.encode, request.prompt))
        except Exception as exc:
            raise RequestError(
                f"tokenizing the prompt failed: {type(exc).__name__}: {exc}", status=500, kind="server_error"
            ) from exc
    if not ids:
        raise RequestError("the prompt is empty after tokenization", param="prompt")
    limits = state.limits
    prompt_param = "messages" if request.chat else "prompt"
    if len(ids) > limits.max_prompt_tokens:
        raise RequestError(
            f"the prompt has {len(ids)} tokens; at most {limits.max_prompt_tokens} are allowed",
            param=prompt_param,
        )
    context = state.context_length
    if context is not None and len(ids) >= context:
        raise RequestError(
            f"the prompt has {len(ids)} tokens; the model's context of {context} tokens leaves no "
            "room for an answer",
            param=prompt_param,
        )
    return ids


def _fit_budget(state: _State, request: GenerationRequest, prompt_tokens: int) -> GenerationRequest:
    """Check ``max_tokens`` against the context left by the prompt; shorten a default budget.

    Raises:
        RequestError: an explicit ``max_tokens`` does not fit.
    """
    context = state.context_length
    if context is None or prompt_tokens + request.max_tokens <= context:
        return request
    if not request.max_tokens_given:  # as OpenAI servers do: the default is what is left
        return dataclasses.replace(request, max_tokens=context - prompt_tokens)
    raise RequestError(
        f"the prompt ({prompt_tokens} tokens) plus max_tokens ({request.max_tokens}) exceeds "
        f"the model's context of {context} tokens",
        param="max_tokens",
    )


def _context_length(model: Any) -> int | None:
    for path in (("max_length",), ("config", "max_position_embeddings"), ("context_length",)):
        obj: Any = model
        for name in path:
            obj = getattr(obj, name, None)
        if isinstance(obj, int) and not isinstance(obj, bool) and obj > 0:
            return obj
    return None


async def _read_json(request: Request, limits: ServerLimits) -> Any:
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


def create_app(
    model: Any,
    *,
    model_name: str = "rxstream",
    limits: ServerLimits | None = None,
    allowed_hosts: Sequence[str] = (),
) -> Starlette:
    """The ASGI application serving ``model`` (an :class:`~rxstream.backends.OnnxModel` or alike).

    Requests whose ``Host`` header is neither an IP address, ``localhost``, nor one of
    ``allowed_hosts`` get a 400 (see :mod:`rxstream._server_hosts`: a guard against DNS rebinding).

    The model must provide ``tokenizer`` (a ``tokenizers.Tokenizer``), ``encode(text)``,
    ``encode_chat(messages, add_generation_prompt=True)`` and ``generate(prompt_ids, **sampling)``
    returning a cold ``Observable[int]`` that generates on the given ``scheduler`` (a pool of
    ``limits.max_concurrency`` threads owned by the app). ``app.state.stats`` is
    the :class:`ServerStats` of the app.
    """
    limits = limits if limits is not None else ServerLimits()
    stats = ServerStats()
    scheduler = ThreadPoolScheduler(max_workers=limits.max_concurrency)
    state = _State(model, model_name, limits, stats, _context_length(model), scheduler)

    async def generate_endpoint(request: Request, chat: bool) -> Response:
        try:
            body = await _read_json(request, limits)
            req = validate_request(body, chat=chat, limits=limits)
            prompt_ids = await _prompt_ids(state, req)
            req = _fit_budget(state, req, len(prompt_ids))
            if stats.waiting >= limits.max_queued and stats.active >= limits.max_concurrency:
                raise RequestError("the server is busy; try again later", status=503, kind="server_busy")
        except RequestError as err:
            return err.response()
        except ClientDisconnect:  # gone while sending the body: nobody to answer
            return Response(status_code=499)
        gen = _Generation(state, req, prompt_ids)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        if req.stream:
            return _EventStreamResponse(_events(gen, rid, created))
        disconnected, result = await _until_disconnect(request.receive, _collect(gen))
        if disconnected:
            return Response(status_code=499)
        error, text = result
        if error is not None:
            return RequestError(f"generation failed: {error}", status=500, kind="server_error").response()
        reason, stop_reason = _finish_fields(gen.recorder.finish)
        usage = _usage(len(prompt_ids), gen.tokens)
        choice: dict[str, Any]
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}}
            kind = "chat.completion"
        else:
            choice = {"index": 0, "text": text}
            kind = "text_completion"
        choice.update({"logprobs": None, "finish_reason": reason, "stop_reason": stop_reason})
        return JSONResponse(
            {**_chunk_base(kind, rid, created, model_name), "choices": [choice], "usage": usage}
        )

    async def _collect(gen: _Generation) -> tuple[Exception | None, str]:
        parts: list[str] = []
        try:
            async with contextlib.aclosing(gen.texts()) as texts:
                async for delta in texts:
                    parts.append(delta)
        except Exception as exc:
            return exc, ""
        return None, "".join(parts)

    async def _events(gen: _Generation, rid: str, created: int) -> AsyncIterator[bytes]:
        chat = gen.request.chat
        kind = "chat.completion.chunk" if chat else "text_completion"
        base = _chunk_base(kind, rid, created, model_name)

        def chunk(
            text: str | None, reason: str | None = None, stop_reason: Any = None, first: bool = False
        ) -> bytes:
            choice: dict[str, Any] = {"index": 0}
            if chat:
                delta: dict[str, Any] = {"role": "assistant"} if first else {}
                if text is not None:
                    delta["content"] = text
                choice["delta"] = delta
            else:
                choice["text"] = text or ""
            choice.update({"logprobs": None, "finish_reason": reason})
            if reason is not None:
                choice["stop_reason"] = stop_reason
            if gen.request.include_usage:  # OpenAI: "usage": null on all chunks but the last
                return _sse({**base, "choices": [choice], "usage": None})
            return _sse({**base, "choices": [choice]})

        if chat:
            yield chunk("", first=True)
        try:
            # closed explicitly (not left to the garbage collector) when this generator is closed
            async with contextlib.aclosing(gen.texts()) as texts:
                async for delta in texts:
                    yield chunk(delta)
        except Exception as exc:
            yield _sse(
                {
                    "error": {
                        "message": f"generation failed: {exc}",
                        "type": "server_error",
                        "param": None,
                        "code": None,
                    }
                }
            )
            return
        reason, stop_reason = _finish_fields(gen.recorder.finish)
        yield chunk(None if chat else "", reason, stop_reason)
        if gen.request.include_usage:
            yield _sse({**base, "choices": [], "usage": _usage(len(gen.prompt_ids), gen.tokens)})
        yield _sse("[DONE]")

    async def completions(request: Request) -> Response:
        return await generate_endpoint(request, chat=False)

    async def chat_completions(request: Request) -> Response:
        return await generate_endpoint(request, chat=True)

    async def models(_request: Request) -> Response:
        entry = {"id": model_name, "object": "model", "created": 0, "owned_by": "rxstream"}
        return JSONResponse({"object": "list", "data": [entry]})

    async def health(_request: Request) -> Response:
        return JSONResponse({"status": "ok", "model": model_name, **stats.snapshot()})

    page = importlib.resources.files("rxstream").joinpath("static/chat.html").read_text(encoding="utf-8")

    async def index(_request: Request) -> Response:
        return HTMLResponse(page)

    async def not_found(request: Request, _exc: Exception) -> Response:
        return RequestError(
            f"no route {request.method} {request.url.path}", status=404, kind="not_found"
        ).response()

    async def method_not_allowed(request: Request, _exc: Exception) -> Response:
        return RequestError(
            f"method {request.method} is not allowed on {request.url.path}",
            status=405,
            kind="invalid_request_error",
        ).response()

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:  # server shutdown: let the generation threads go
            scheduler.executor.shutdown(wait=False, cancel_futures=True)

    app = Starlette(
        routes=routes,
        exception_handlers={404: not_found, 405: method_not_allowed},
        lifespan=lifespan,
        middleware=[Middleware(HostGuard, allowed=parse_allowed_hosts(allowed_hosts))],
    )
    app.state.stats = stats
    app.state.limits = limits
    app.state.model = model
    return app


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


# ---------------------------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def run_in_thread(
    app: Any, *, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"
) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a background thread; yield its base URL (``http://host:port``).

    ``port=0`` picks a free port. The server is shut down (and the thread joined) on exit.
    """
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    actual_port = sock.getsockname()[1]
    limits = getattr(getattr(app, "state", None), "limits", None)
    config = uvicorn_config(
        app,
        limits=limits if isinstance(limits, ServerLimits) else ServerLimits(),
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="rxstream-uvicorn", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("run_in_thread: uvicorn did not start")
            time.sleep(0.01)
        yield f"http://{host}:{actual_port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _load_model(model: str, provider: str, int4: bool) -> tuple[Any, str]:
    from pathlib import Path

    from rxstream.backends import OnnxModel

    if provider not in ("auto", "cpu", "cuda"):
        raise ValueError(f"serve: provider must be auto, cpu or cuda, got {provider!r}")
    chosen = cast("Literal['auto', 'cpu', 'cuda']", provider)
    # Several generations share the cores here: ONNX Runtime threads that block instead of spin
    # give more total throughput in that case (spinning wins only for one stream on idle cores).
    loaded = OnnxModel.from_pretrained(
        model, provider=chosen, quantization="int4" if int4 else "fp32", spinning=False
    )
    return loaded, Path(model).name or "model"


def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    model: str = "smollm2",
    provider: str = "auto",
    int4: bool = False,
    model_name: str | None = None,
    limits: ServerLimits | None = None,
    allowed_hosts: Sequence[str] = (),
    log_level: str = "info",
) -> None:
    """Load ``model`` (a model directory or a known name) and serve it until interrupted.

    On Ctrl-C (SIGINT) or SIGTERM open streams get at most two seconds to end; then their
    generations are cancelled and the server exits (uvicorn then re-raises the signal: a
    ``KeyboardInterrupt`` for SIGINT).
    """
    import uvicorn

    limits = limits if limits is not None else ServerLimits()
    allowed = parse_allowed_hosts(allowed_hosts)  # a bad name fails before the model loads
    loaded, default_name = _load_model(model, provider, int4)
    app = create_app(loaded, model_name=model_name or default_name, limits=limits, allowed_hosts=allowed)
    raise_open_files_limit(limits.max_connections)
    config = uvicorn_config(
        app,
        limits=limits,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=2,
    )
    uvicorn.Server(config).run()


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``rxstream serve`` options to ``parser``."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=8000, help="port to listen on (default 8000; 0: any free)"
    )
    parser.add_argument(
        "--model", default="smollm2", metavar="DIR", help="model directory or known name (default smollm2)"
    )
    parser.add_argument("--int4", action="store_true", help="use the int4 build of the default model")
    parser.add_argument(
        "--provider", choices=("auto", "cpu", "cuda"), default="auto", help="ONNX Runtime provider"
    )
    parser.add_argument("--model-name", default=None, help="model id shown to clients")
    parser.add_argument(
        "--max-concurrency", type=int, default=4, help="generations running at once (default 4)"
    )
    parser.add_argument(
        "--max-tokens-limit", type=int, default=2048, help="largest max_tokens a request may ask for"
    )
    parser.add_argument(
        "--allowed-hosts",
        action="append",
        default=[],
        metavar="NAMES",
        help="host names (comma-separated; .example.com allows subdomains; * allows any) that "
        "requests may address besides IP addresses and localhost (a guard against DNS rebinding)",
    )
    defaults = ServerLimits()
    parser.add_argument(
        "--max-connections",
        type=int,
        default=defaults.max_connections,
        help=f"open connections at most; more get 503 (default {defaults.max_connections})",
    )
    for name, what in (
        ("header", "to send a request's headers"),
        ("body", "to send a request's body"),
        ("idle", "a keep-alive connection may wait for its next request"),
        ("send", "a client may read nothing while a response waits"),
    ):
        default = getattr(defaults, f"{name}_timeout")
        parser.add_argument(
            f"--{name}-timeout",
            type=float,
            default=default,
            metavar="SECONDS",
            help=f"seconds {what} (default {default:g})",
        )
    parser.add_argument("--log-level", default="info", help="uvicorn log level (default info)")


def serve_from_args(args: argparse.Namespace) -> int:
    """Run :func:`serve` with options parsed by :func:`add_serve_arguments`; return an exit status."""
    try:
        limits = ServerLimits(
            max_concurrency=args.max_concurrency,
            max_tokens=args.max_tokens_limit,
            max_connections=args.max_connections,
            header_timeout=args.header_timeout,
            body_timeout=args.body_timeout,
            idle_timeout=args.idle_timeout,
            send_timeout=args.send_timeout,
        )
    except ValueError as exc:
        print(f"rxstream serve: {exc}", file=sys.stderr)
        return 2
    serve(
        host=args.host,
        port=args.port,
        model=args.model,
        provider=args.provider,
        int4=args.int4,
        model_name=args.model_name,
        limits=limits,
        allowed_hosts=args.allowed_hosts,
        log_level=args.log_level,
    )
    return 0


def add_serve_parser(subparsers: Any) -> None:
    """Register ``rxstream serve`` on the ``rxstream`` command's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="serve the model over an OpenAI-compatible HTTP API with a chat page",
        description="OpenAI-compatible streaming server (/v1/completions, /v1/chat/completions, "
        "/v1/models, /health) with a chat page at /.",
    )
    add_serve_arguments(parser)
    parser.set_defaults(func=serve_from_args)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rxstream.server``: the same as ``rxstream serve``."""
    parser = argparse.ArgumentParser(prog="rxstream serve", description="OpenAI-compatible streaming server")
    add_serve_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return serve_from_args(args)
    except KeyboardInterrupt:
        print("rxstream serve: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
