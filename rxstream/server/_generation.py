"""One request's generation: the text pipeline over the model, a slot, and clean release."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Any

import reactivex
from reactivex import abc
from reactivex import operators as ops

from .._finish import Finish, FinishOnce, FinishReason, FinishRecorder
from .._generative_model import GenerativeModel
from .._sampling_params import SamplingParams
from ..aio import to_async_iterable
from ._requests import GenerationRequest
from ._state import ServerState

__all__ = ["Generation", "batches", "build_text_stream", "model_defaults"]


def model_defaults(model: GenerativeModel) -> SamplingParams:
    """How ``model`` samples when a request does not say: its ``default_sampling`` (an
    :class:`~rxstream.backends.OnnxModel` reads it from ``generation_config.json``), else greedy."""
    defaults = getattr(model, "default_sampling", None)
    return defaults if isinstance(defaults, SamplingParams) else SamplingParams()


def build_text_stream(
    model: GenerativeModel,
    prompt_ids: Sequence[int],
    request: GenerationRequest,
    *,
    on_finish: Callable[[Finish], None] | None = None,
    on_token: Callable[[int], None] | None = None,
    scheduler: abc.SchedulerBase | None = None,
    until: reactivex.Observable[Any] | None = None,
    ready: Callable[[], bool] | None = None,
) -> reactivex.Observable[str]:
    """The text of one request: the model's ids through :func:`~rxstream.operators.text_pipeline`
    (``detokenize -> stop -> replace``, the order ``rxstream chat`` uses too).

    ``on_finish`` receives the reports of the model and of the pipeline (pass a
    :class:`~rxstream.FinishRecorder` to learn why the request ended: the first report is the
    cause); ``on_token`` sees each generated id (on the model's worker thread). ``scheduler`` runs
    the generation loop (default: the model's own pool). ``until`` ends the generation early when
    it emits (server shutdown): the ids stop there and the text completes normally, so the
    response ends cleanly. ``ready`` (for models that batch, see :func:`batches`) pauses the
    generation while it returns False.
    """
    from rxstream.operators import text_pipeline

    extra: dict[str, Any] = {} if ready is None else {"ready": ready}
    ids: reactivex.Observable[int] = model.generate(
        list(prompt_ids),
        params=request.sampling_params(model_defaults(model)),
        on_finish=on_finish,
        scheduler=scheduler,
        **extra,
    )
    if until is not None:

        def cancelled(_: Any) -> None:  # reported first: the pipeline then sees its ids end
            if on_finish is not None:
                on_finish(Finish(FinishReason.CANCELLED))

        ids = ids.pipe(ops.take_until(until.pipe(ops.do_action(on_next=cancelled))))
    if on_token is not None:
        ids = ids.pipe(ops.do_action(on_next=on_token))
    pipeline = text_pipeline(
        model.tokenizer,
        prompt_ids=list(prompt_ids),
        stop=request.stop,
        replace=request.replace,
        on_finish=on_finish,
    )
    text: reactivex.Observable[str] = ids.pipe(pipeline)
    return text


_QUEUED_DELTAS = 64
"""Text deltas a generation may queue for its response before its worker thread waits."""

_QUEUED_CHARS = 4096
"""Characters a batched generation may queue for its response before it pauses (its row skips
decode steps; the batch's other rows go on)."""


def batches(model: GenerativeModel) -> bool:
    """Whether ``model`` runs concurrent generations in one batch (an
    :class:`~rxstream.backends.OnnxModel` with ``batching``): then they share its scheduler instead
    of the server's threads, and a slow reader pauses its own row instead of blocking a thread.

    The model's class must define ``batching`` (and its ``generate`` take ``ready``); a wrapper
    that only forwards attributes to an inner model (``__getattr__``) keeps the server's threads,
    since its own ``generate`` may not run on the inner model's batch.
    """
    return hasattr(type(model), "batching") and getattr(model, "batching", None) is not None


class _Backlog:
    """Characters a generation has emitted and its response has not taken yet (thread-safe enough:
    two counters, each written by one side)."""

    __slots__ = ("consumed", "limit", "produced")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.produced = 0
        self.consumed = 0

    def on_text(self, text: str) -> None:
        self.produced += len(text)

    def ready(self) -> bool:
        return self.produced - self.consumed < self.limit


class Generation:
    """One request's generation: subscribes on first iteration, always releases what it holds."""

    def __init__(self, state: ServerState, request: GenerationRequest, prompt_ids: Sequence[int]) -> None:
        self.state = state
        self.request = request
        self.prompt_ids = prompt_ids
        self.recorder = FinishRecorder()
        self.tokens = 0
        self.error: Exception | None = None
        self._count_end = FinishOnce(lambda f: state.stats.generation_ended(f.reason, self.tokens))

    def _on_token(self, _id: int) -> None:
        self.tokens += 1

    def _end(self) -> None:
        """Count the generation's end in the server's stats (once)."""
        finish = self.recorder.finish
        if self.error is not None:
            reason = FinishReason.ERROR
        else:
            reason = finish.reason if finish is not None else FinishReason.CANCELLED
        self._count_end(Finish(reason))

    async def texts(self) -> AsyncGenerator[str, None]:
        """The text deltas; waits for a generation slot first; disposal on exit of any kind."""
        stats = self.state.stats
        slots = self.state.slots()
        stats.queued(+1)
        try:
            await slots.acquire()
        finally:
            stats.queued(-1)
        try:
            stats.generation_started()
            ait: AsyncIterator[str] | None = None
            batched = self.state.batching
            backlog = _Backlog(_QUEUED_CHARS) if batched else None
            try:
                source = build_text_stream(
                    self.state.model,
                    self.prompt_ids,
                    self.request,
                    on_finish=self.recorder,
                    on_token=self._on_token,
                    scheduler=None if batched else self.state.scheduler,
                    until=self.state.shutdown,
                    ready=backlog.ready if backlog is not None else None,
                )
                if backlog is not None:
                    # the batch's thread must never wait for one reader: the queue takes what
                    # comes, and a reader that falls behind pauses its own row
                    source = source.pipe(ops.do_action(on_next=backlog.on_text))
                    ait = to_async_iterable(source)
                else:
                    # back-pressure: a client that reads slowly pauses its generation instead of
                    # letting text pile up in memory
                    ait = to_async_iterable(source, maxsize=_QUEUED_DELTAS)
                async for delta in ait:
                    if backlog is not None:
                        backlog.consumed += len(delta)
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
