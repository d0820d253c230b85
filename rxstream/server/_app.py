"""The ASGI application: routes over the handlers, the Host guard, the worker pool's lifespan."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

from reactivex.scheduler import ThreadPoolScheduler
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route

from .._generative_model import GenerativeModel
from ..chat import check_reasoning_format, resolve_reasoning_format
from ._errors import RequestError
from ._generation import batches
from ._handlers import Handlers
from ._hosts import HostGuard, parse_allowed_hosts
from ._limits import ServerLimits
from ._messages_api import MessagesApi, anthropic_error
from ._metrics import ServerMetrics
from ._replay_hub import ReplayHub
from ._responses_api import ResponsesApi
from ._resumable import cancel_handler, follow_handler
from ._state import ServerState, context_length
from ._stats import ServerStats
from ._text_mode import text_mode

__all__ = ["create_app"]


_MEMBERS = ("tokenizer", "encode", "encode_chat", "generate")
"""What the server uses of a model (see :class:`~rxstream.GenerativeModel`; ``context_length``,
``eos_token_ids``, ``provider`` and ``default_sampling`` are used when present)."""


def create_app(
    model: GenerativeModel,
    *,
    model_name: str = "rxstream",
    limits: ServerLimits | None = None,
    allowed_hosts: Sequence[str] = (),
    batching: bool | None = None,
    reasoning_format: str = "auto",
) -> Starlette:
    """The ASGI application serving ``model``: an :class:`~rxstream.backends.OnnxModel`, or any
    :class:`~rxstream.GenerativeModel` (a user's own backend, a replayed recording).

    Requests whose ``Host`` header is neither an IP address, ``localhost``, nor one of
    ``allowed_hosts`` get a 400 (a guard against DNS rebinding).

    The model must provide ``tokenizer`` (a ``tokenizers.Tokenizer``), ``encode(text)``,
    ``encode_chat(messages, add_generation_prompt=True)`` and ``generate(prompt_ids, **sampling)``
    returning a cold ``Observable[int]`` that generates on the given ``scheduler`` (a pool of
    ``limits.max_concurrency`` threads owned by the app). ``app.state.stats`` is
    the :class:`~rxstream.server.ServerStats` of the app.

    ``batching``: None (default) runs the generations in the model's own batch when it has one
    (an :class:`~rxstream.backends.OnnxModel` with ``batching``: continuous batching, one decode
    step for every request) and on the app's pool otherwise; False always uses the pool (one
    generation loop per request); True requires the model's batch (``ValueError`` without one).
    At most ``limits.max_concurrency`` generations run at once either way.

    ``reasoning_format`` says how chat output is split into reasoning, answer and tool calls:
    ``"auto"`` (the family the model's ``chat_template`` points to:
    :func:`rxstream.families.detect_family`; else none), ``"none"`` (no reasoning channel), or a
    family's name (:func:`rxstream.families.family_names`). ``app.state.reasoning_format`` is the
    resolved family's name (or None).

    Raises:
        TypeError: the model lacks a member the server uses.
        ValueError: an unknown ``reasoning_format``.
    """
    missing = [name for name in _MEMBERS if not hasattr(model, name)]
    if missing:
        raise TypeError(
            f"create_app: the model lacks {', '.join(missing)} (see rxstream.GenerativeModel for what "
            "a served model provides)"
        )
    asked = check_reasoning_format(reasoning_format, owner="reasoning_format")
    if text_mode(model):  # the engine's own chat endpoint splits its output, or does not
        if asked not in ("auto", "none"):
            raise ValueError(
                f"create_app: reasoning_format={asked!r} routes the model's own text, which an "
                "engine in text mode does not give (serve it in ids mode)"
            )
        fmt = None
    else:
        fmt = resolve_reasoning_format(asked, model, owner="reasoning_format")
    limits = limits if limits is not None else ServerLimits()
    if batching is not None and not isinstance(batching, bool):
        raise TypeError(f"create_app: batching must be None or a bool, got {batching!r}")
    can_batch = batches(model)
    if batching and not can_batch:
        raise ValueError("create_app: batching=True, but the model does not batch generations")
    scheduler = ThreadPoolScheduler(max_workers=limits.max_concurrency)
    state = ServerState(model, model_name, limits, ServerStats(), context_length(model), scheduler)
    state.batching = can_batch if batching is None else batching
    state.reasoning_format = fmt
    state.metrics = ServerMetrics(model_name, state.live)
    state.replay = ReplayHub(limits.resume_grace, limits.resume_buffer_bytes, limits.resume_total_bytes)
    handlers = Handlers(state)
    routes = _routes(state, handlers)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        state.loop = asyncio.get_running_loop()
        try:
            yield
        finally:  # server shutdown: let the generation threads go
            scheduler.executor.shutdown(wait=False, cancel_futures=True)

    app = Starlette(
        routes=routes,
        exception_handlers={404: handlers.not_found, 405: handlers.method_not_allowed},
        lifespan=lifespan,
        middleware=[Middleware(HostGuard, allowed=parse_allowed_hosts(allowed_hosts))],
    )
    app.state.stats = state.stats
    app.state.metrics = state.metrics
    app.state.replay = state.replay
    app.state.begin_shutdown = state.begin_shutdown
    app.state.limits = limits
    app.state.model = model
    app.state.batching = state.batching
    app.state.reasoning_format = fmt
    return app


def _routes(state: ServerState, handlers: Handlers) -> list[Route]:
    """The endpoints: the page, health and metrics, the four APIs (a POST starts a generation, a
    GET with ``Last-Event-ID`` follows one), and cancelling a stream."""
    openai_follow = follow_handler(state, RequestError.response)
    responses, messages = ResponsesApi(state), MessagesApi(state)
    return [
        Route("/", handlers.index, methods=["GET"]),
        Route("/favicon.ico", handlers.favicon, methods=["GET"]),
        Route("/favicon.svg", handlers.favicon, methods=["GET"]),
        Route("/health", handlers.health, methods=["GET"]),
        Route("/metrics", handlers.metrics, methods=["GET"]),
        Route("/v1/models", handlers.models, methods=["GET"]),
        Route("/v1/completions", handlers.completions, methods=["POST"]),
        Route("/v1/chat/completions", handlers.chat_completions, methods=["POST"]),
        Route("/v1/responses", responses.create, methods=["POST"]),
        Route("/v1/messages", messages.create, methods=["POST"]),
        Route("/v1/completions", openai_follow, methods=["GET"]),
        Route("/v1/chat/completions", openai_follow, methods=["GET"]),
        Route("/v1/responses", openai_follow, methods=["GET"]),
        Route("/v1/messages", follow_handler(state, anthropic_error), methods=["GET"]),
        Route("/v1/streams/{sid}/cancel", cancel_handler(state), methods=["POST"]),
    ]
