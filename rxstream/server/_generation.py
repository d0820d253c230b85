"""One request's generation: the text pipeline over the model, a slot, and clean release."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Any

import reactivex
from reactivex import abc
from reactivex import operators as ops
from reactivex.scheduler.eventloop import AsyncIOThreadSafeScheduler

from rxstream.operators import Meter

from .._finish import Finish, FinishOnce, FinishReason, FinishRecorder
from .._generative_model import GenerativeModel
from .._piece import Piece
from ..aio import to_async_iterable
from ..chat import ChatPlan, TokenUsage
from ..face import model_defaults
from ..structured import Grammar
from ._lanes import Lane
from ._requests import GenerationRequest
from ._shutdown import cut_at_shutdown
from ._state import ServerState
from ._text_mode import TextCount, build_remote_text, text_mode
from ._token_ids import TokenIds

__all__ = [
    "Generation",
    "batches",
    "build_chat_stream",
    "build_text_stream",
    "model_defaults",
    "streams_on_loop",
]


def _generated_ids(
    model: GenerativeModel,
    prompt_ids: Sequence[int],
    request: GenerationRequest,
    *,
    on_finish: Callable[[Finish], None] | None,
    on_token: Callable[[Any], None] | None,
    scheduler: abc.SchedulerBase | None,
    until: reactivex.Observable[Any] | None,
    choice: int = 0,
    ready: Callable[[], bool] | None = None,
    lane: Lane | None = None,
    grammar: Grammar | None = None,
) -> reactivex.Observable[Any]:
    """The model's ids for one request (see :func:`build_text_stream` for the arguments); pieces
    with log-probabilities when the request asks for them; constrained by ``grammar``."""
    extra: dict[str, Any] = {} if request.logprobs is None else {"logprobs": request.logprobs}
    if grammar is not None:
        extra["grammar"] = grammar
    if ready is not None:
        extra["ready"] = ready
    ids: reactivex.Observable[Any] = model.generate(
        list(prompt_ids),
        params=request.sampling_params(model_defaults(model), choice),
        on_finish=lane.relay(on_finish) if lane is not None else on_finish,
        scheduler=scheduler,
        **extra,
    )
    if until is not None:
        ids = cut_at_shutdown(ids, until, on_finish)
    if lane is not None:  # what follows runs in the lane, off the model's thread
        ids = ids.pipe(lane)
    if on_token is not None:  # as the pipeline receives them: what a lane drops never counts
        ids = ids.pipe(ops.do_action(on_next=on_token))
    return ids


def build_text_stream(
    model: GenerativeModel,
    prompt_ids: Sequence[int],
    request: GenerationRequest,
    *,
    on_finish: Callable[[Finish], None] | None = None,
    on_token: Callable[[Any], None] | None = None,
    scheduler: abc.SchedulerBase | None = None,
    until: reactivex.Observable[Any] | None = None,
    choice: int = 0,
    ready: Callable[[], bool] | None = None,
    lane: Lane | None = None,
    meter: Meter | None = None,
    grammar: Grammar | None = None,
) -> reactivex.Observable[Any]:
    """The text of one request: the model's ids through :func:`~rxstream.operators.text_pipeline`
    (``detokenize -> stop -> replace``, the order ``rxstream chat`` uses too).

    Items are text deltas (``str``); when the request asks for log-probabilities, the model is
    asked for them (``generate(..., logprobs=k)``) and the items are aligned
    :class:`~rxstream.Piece` values carrying the tokens whose text they complete, with their
    log-probabilities (SEMANTICS §5: tokens whose text a stop cuts, even in part, are in no piece).

    ``on_finish`` receives the reports of the model and of the pipeline (pass a
    :class:`~rxstream.FinishRecorder` to learn why the request ended: the first report is the
    cause); ``on_token`` sees each item the pipeline receives (an id, or a piece with logprobs;
    on the thread the pipeline runs on). ``scheduler`` runs the generation loop (default: the model's own
    pool). ``until`` ends the generation early when it emits (server shutdown): the ids stop there
    and fail with :class:`~._errors.ServerShutdown`, so the response ends with the API's error
    event (503, ``server_shutdown``) at once. ``choice``: the index of this
    generation among the request's ``n`` (it samples with ``seed + choice``). ``ready`` (only for a
    model that batches, see :func:`batches`) pauses the generation while it returns False.
    ``lane``: the pipeline runs in this :class:`~._lanes.Lane` instead of on the model's thread
    (a batch's worker thread must not wait for one request's text work). ``meter``: the pipeline
    runs inside :func:`rxstream.operators.measure` with it (how long each operator held text).
    ``grammar``: decoding is constrained by it (a chat's ``response_format``).
    """
    from rxstream.operators import text_pipeline

    ids = _generated_ids(
        model,
        prompt_ids,
        request,
        on_finish=on_finish,
        on_token=on_token,
        scheduler=scheduler,
        until=until,
        choice=choice,
        ready=ready,
        lane=lane,
        grammar=grammar,
    )
    pipeline = text_pipeline(
        model.tokenizer,
        prompt_ids=list(prompt_ids),
        stop=request.stop,
        replace=request.replace,
        aligned=request.logprobs is not None,
        on_finish=on_finish,
    )
    if meter is not None:
        from rxstream.operators import measure

        pipeline = measure(meter, pipeline, names=["text_pipeline"])
    text: reactivex.Observable[Any] = ids.pipe(pipeline)
    return text


def build_chat_stream(
    model: GenerativeModel,
    prompt_ids: Sequence[int],
    request: GenerationRequest,
    plan: ChatPlan,
    *,
    on_finish: Callable[[Finish], None] | None = None,
    on_token: Callable[[Any], None] | None = None,
    scheduler: abc.SchedulerBase | None = None,
    until: reactivex.Observable[Any] | None = None,
    choice: int = 0,
    ready: Callable[[], bool] | None = None,
    lane: Lane | None = None,
    usage: Callable[[TokenUsage], None] | None = None,
    meter: Meter | None = None,
) -> reactivex.Observable[Any]:
    """A chat request's items routed by ``plan`` (:func:`rxstream.operators.chat_pipeline`): answer
    and reasoning :class:`~rxstream.chat.TextDelta` items and tool-call events; the request's ``stop``
    and ``replace`` apply to the answer only. Arguments as for :func:`build_text_stream` (with
    ``plan.logprobs`` the deltas carry their tokens and log-probabilities); ``usage`` gets the
    generation's :class:`~rxstream.chat.TokenUsage` at its end."""
    ids = _generated_ids(
        model,
        prompt_ids,
        request,
        on_finish=on_finish,
        on_token=on_token,
        scheduler=scheduler,
        until=until,
        choice=choice,
        ready=ready,
        lane=lane,
        grammar=plan.grammar,
    )
    from rxstream.operators import chat_pipeline, measure, whole_tool_calls

    pipeline = chat_pipeline(
        model.tokenizer,
        plan,
        prompt_ids=prompt_ids,
        stop=request.stop,
        replace=request.replace,
        on_finish=on_finish,
        usage=usage,
    )
    if meter is not None:
        pipeline = measure(meter, pipeline, names=["chat_pipeline"])
    if plan.parse_tools and not plan.calls_checked:  # a client never gets part of an invalid call
        return ids.pipe(pipeline, whole_tool_calls())
    return ids.pipe(pipeline)


_QUEUED_DELTAS = 64
"""Text deltas a generation may queue for its response before its worker thread waits."""

_QUEUED_CHARS = 4096
"""Characters a batched generation may queue for its response before it pauses (its row skips
decode steps; the batch's other rows go on)."""

_QUEUED_IDS = 32
"""Ids a batched generation's lane may hold before its row pauses (its text work is behind)."""


def batches(model: GenerativeModel) -> bool:
    """Whether ``model`` runs concurrent generations in one batch (an
    :class:`~rxstream.backends.OnnxModel` with ``batching``): then they share its scheduler instead
    of the server's threads, and a slow reader pauses its own row instead of blocking a thread.

    The model's class must define ``batching`` (and its ``generate`` take ``ready``); a wrapper
    that only forwards attributes to an inner model (``__getattr__``) keeps the server's threads,
    since its own ``generate`` may not run on the inner model's batch.
    """
    return hasattr(type(model), "batching") and getattr(model, "batching", None) is not None


def streams_on_loop(model: GenerativeModel) -> bool:
    """Whether ``model`` runs each generation as a task on an asyncio scheduler's loop (its class
    says ``streams_on_loop = True``, as :class:`~rxstream.backends.GatewayModel` does: a request
    to a remote engine is network waiting, not compute): the server then gives it its own loop,
    so that no stream holds a thread, and a ``ready`` callback for back-pressure."""
    return getattr(type(model), "streams_on_loop", False) is True


def _size(item: Any) -> int:
    """How much of the backlog one queued item is: its characters (``str`` items are merged by the
    queue, and lengths add up), at least 1 for other items (channel deltas, tool-call events)."""
    if isinstance(item, str):
        return len(item)
    text = getattr(item, "text", None)
    return max(1, len(text)) if isinstance(text, str) else 1


class _Backlog:
    """How much a generation has emitted that its response has not taken yet (two counters, each
    written by one side: the batch's thread and the event loop)."""

    __slots__ = ("consumed", "lane", "limit", "produced")

    def __init__(self, limit: int, lane: Lane | None = None) -> None:
        self.lane = lane
        self.limit = limit
        self.produced = 0
        self.consumed = 0

    def on_item(self, item: Any) -> None:
        self.produced += _size(item)

    def ready(self) -> bool:
        lane = self.lane
        if lane is not None and lane.pending >= _QUEUED_IDS:
            return False
        return self.produced - self.consumed < self.limit


class Generation:
    """One request's generation: subscribes on first iteration, always releases what it holds."""

    def __init__(
        self,
        state: ServerState,
        request: GenerationRequest,
        prompt_ids: Sequence[int],
        plan: ChatPlan | None = None,
        choice: int = 0,
        arrival: float | None = None,
    ) -> None:
        self.state = state
        self.arrival = time.perf_counter() if arrival is None else arrival
        """When the request arrived (``time.perf_counter``): what the metrics time from."""
        self.request = request
        self.prompt_ids = prompt_ids
        self.plan = plan if plan is not None else ChatPlan(None)
        self.choice = choice
        """The index of this generation among the request's ``n`` choices."""
        self.recorder = FinishRecorder()
        self.tokens = 0
        """The ids the pipeline received so far (what ``completion_tokens`` counts)."""
        self.usage: TokenUsage | None = None
        """A routed generation's buckets, set at its end (see :attr:`token_usage`)."""
        self.error: Exception | None = None
        self.token_ids = TokenIds() if request.return_token_ids else None
        self.text_count: TextCount | None = None
        """A text-mode generation's token count (the engine's, or the local tokenizer's)."""
        """The ids no chunk has carried yet, when the request asks for them (``return_token_ids``)."""
        self._count_end = FinishOnce(self._ended)
        self.meter = Meter() if state.metrics is not None else None
        """Times the pipeline's operators (what ``/metrics`` reports of held-back text)."""

    def _ended(self, finish: Finish) -> None:
        self.state.stats.generation_ended(finish.reason, self.tokens)
        metrics = self.state.metrics
        if metrics is not None:
            seconds = time.perf_counter() - self.arrival
            metrics.ended(finish.reason, len(self.prompt_ids), self.tokens, seconds)
            if self.meter is not None and self.text_count is None:
                metrics.held(self.meter.report())

    def _on_token(self, item: Any) -> None:
        self.tokens += len(item.ids) if isinstance(item, Piece) else 1
        if self.token_ids is not None:
            self.token_ids.add(item)

    def _end(self) -> None:
        """Count the generation's end in the server's stats (once)."""
        finish = self.recorder.finish
        if self.error is not None:
            reason = FinishReason.ERROR
        else:
            reason = finish.reason if finish is not None else FinishReason.CANCELLED
        self._count_end(Finish(reason))

    def _on_usage(self, usage: TokenUsage) -> None:
        self.usage = usage

    @property
    def token_usage(self) -> TokenUsage:
        """Where the generation's tokens went: a routed chat's buckets once it ended (a plain
        generation's are all answer text), else the tokens so far as answer text."""
        if self.usage is not None:
            return self.usage
        return TokenUsage(content=self.tokens)

    @property
    def routed(self) -> bool:
        """Whether the output is routed into channels (items are :class:`~rxstream.chat.TextDelta`
        and tool-call events, not ``str``)."""
        return self.plan.spec is not None

    def _source(
        self, scheduler: abc.SchedulerBase | None, backlog: _Backlog | None, lane: Lane | None
    ) -> reactivex.Observable[Any]:
        """The generation's items: the model's ids through the text or chat pipeline, or a
        text-mode engine's text through the request's rules."""
        model = self.state.model
        if text_mode(model):  # the engine's text: no ids, no route
            self.text_count = TextCount(model.encode)
            return build_remote_text(
                model,
                self.request,
                self.text_count,
                on_finish=self.recorder,
                scheduler=scheduler,
                until=self.state.shutdown,
                choice=self.choice,
            )
        common: dict[str, Any] = {
            "on_finish": self.recorder,
            "on_token": self._on_token,
            "scheduler": scheduler,
            "until": self.state.shutdown,
            "choice": self.choice,
            "ready": backlog.ready if backlog is not None else None,
            "lane": lane,
            "meter": self.meter,
        }
        if self.routed:
            return build_chat_stream(
                model, self.prompt_ids, self.request, self.plan, usage=self._on_usage, **common
            )
        grammar = self.plan.grammar if self.plan is not None else None
        return build_text_stream(model, self.prompt_ids, self.request, grammar=grammar, **common)

    async def items(self) -> AsyncGenerator[Any, None]:
        """The text deltas (``str``; aligned :class:`~rxstream.Piece` values when the request asks
        for log-probabilities), or with a routed plan the channel items; waits for a generation
        slot first; disposal on exit of any kind."""
        stats = self.state.stats
        slots = self.state.slots()
        stats.queued(+1)
        try:
            await slots.acquire()
        finally:
            stats.queued(-1)
        try:
            stats.generation_started()
            ait: AsyncIterator[Any] | None = None
            batched = self.state.batching
            # a batched model's thread decodes every row: the text work runs in a lane of the pool
            lane = self.state.lanes.lane() if batched else None
            # on the loop: the engine's ids, the text work and the response share this thread
            on_loop = not batched and streams_on_loop(self.state.model)
            backlog = _Backlog(_QUEUED_CHARS, lane) if batched or on_loop else None
            scheduler: abc.SchedulerBase | None = None
            if on_loop:
                scheduler = AsyncIOThreadSafeScheduler(asyncio.get_running_loop())
            elif not batched:
                scheduler = self.state.scheduler
            try:
                source = self._source(scheduler, backlog, lane)
                # pieces are not joined: each token's text_offset is decided within its own piece
                coalesce = self.request.logprobs is None
                if backlog is not None:
                    # the batch's thread (or the loop) must never wait for one reader: the queue
                    # takes what comes, and a reader that falls behind pauses its own row (or stream)
                    source = source.pipe(ops.do_action(on_next=backlog.on_item))
                    ait = to_async_iterable(source, coalesce=coalesce)
                else:
                    # back-pressure: a client that reads slowly pauses its generation instead of
                    # letting text pile up in memory
                    ait = to_async_iterable(source, maxsize=_QUEUED_DELTAS, coalesce=coalesce)
                metrics = self.state.metrics
                last = 0.0
                async for delta in ait:
                    if backlog is not None:
                        backlog.consumed += _size(delta)
                    if metrics is not None:
                        now = time.perf_counter()
                        if last:
                            metrics.gap.observe(now - last)
                        else:
                            metrics.ttft.observe(now - self.arrival)
                        last = now
                    yield delta
            except Exception as exc:
                self.error = exc
                raise
            finally:
                if ait is not None:
                    await ait.aclose()  # type: ignore[attr-defined]
                if self.text_count is not None:
                    self.tokens = self.text_count.tokens
                self._end()
        finally:
            slots.release()
