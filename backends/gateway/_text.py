"""Text mode (``GatewayModel(..., mode="text")``): engines that give text only (OpenAI's API,
Ollama's OpenAI endpoint, any chat server). The engine's text deltas are emitted as they come
(:func:`text_stream`); nothing is detokenized here, and the text operators (``stop``,
``replace``, their regex forms, ``route`` and ``tool_calls``) run on those deltas as on a local
model's text. What needs the generated ids is refused with one line (:func:`needs_ids`):
``generate``, log-probabilities, ``stop_token_ids``. ``rxstream serve --upstream URL
--upstream-mode text`` serves it (``rxstream.server._text_mode``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import reactivex
from reactivex import abc
from reactivex.disposable import Disposable

from rxstream import Finish, FinishCallback, FinishOnce, FinishReason, SamplingParams
from rxstream.backends.openai import RemoteUsage

from ._replicas import ReplicaSet

__all__ = ["MODES", "needs_ids", "text_stream"]

MODES = ("ids", "text")

NEEDS_IDS = {
    "generate": "generate() emits token ids (use text())",
    "logprobs": "log-probabilities are per token id",
    "stop_token_ids": "stop_token_ids stops on token ids",
}
"""The features that need the engine's ids, and why."""


def needs_ids(feature: str) -> ValueError:
    """The one-line error for ``feature`` asked of a text-mode gateway."""
    return ValueError(
        f"GatewayModel(mode='text'): {NEEDS_IDS[feature]}; the engine gives text only "
        "(mode='ids' needs an engine that returns token ids: vLLM, SGLang, rxstream serve)"
    )


def _body(params: SamplingParams) -> dict[str, Any]:
    if params.stop_token_ids:
        raise needs_ids("stop_token_ids")
    body: dict[str, Any] = {
        "max_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "stream_options": {"include_usage": True},
    }
    if params.seed is not None:
        body["seed"] = params.seed
    return body


def text_stream(
    replicas: ReplicaSet,
    prompt: str | Sequence[Mapping[str, Any]],
    params: SamplingParams,
    *,
    on_finish: FinishCallback | None,
    scheduler: abc.SchedulerBase | None,
    extra: Mapping[str, Any],
    usage: Callable[[RemoteUsage], None] | None = None,
) -> reactivex.Observable[str]:
    """A cold observable of the text an engine streams for ``prompt``: a str goes to
    ``/v1/completions``, messages to ``/v1/chat/completions`` (the engine applies its own chat
    template). Each subscription goes to the replica with the least outstanding work. ``usage``
    gets the engine's :class:`~rxstream.backends.openai.RemoteUsage` at the end (asked with
    ``stream_options.include_usage``)."""
    body = {**_body(params), **extra}
    work = params.max_new_tokens

    def subscribe(observer: abc.ObserverBase[str], _sched: abc.SchedulerBase | None = None) -> Disposable:
        replica = replicas.acquire((), work)
        assert replica is not None  # a set has at least one replica, and none was tried

        def end(finish: Finish) -> None:
            replicas.release(replica, work)
            if on_finish is not None:
                on_finish(finish)

        once = FinishOnce(end)

        def finish(report: Finish) -> None:
            once(report)

        backend = replica.backend
        source: reactivex.Observable[str] = (
            backend.completions(prompt, on_finish=finish, scheduler=scheduler, usage=usage, **body)
            if isinstance(prompt, str)
            else backend.chat(prompt, on_finish=finish, scheduler=scheduler, usage=usage, **body)
        )
        subscription = source.subscribe(observer)

        def dispose() -> None:
            subscription.dispose()
            finish(Finish(FinishReason.CANCELLED))

        return Disposable(dispose)

    return reactivex.create(subscribe)
