"""The gateway model (:class:`GatewayModel`): a :class:`rxstream.GenerativeModel` whose ids come
from remote engines."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import httpx
import reactivex
from reactivex import abc
from reactivex.disposable import Disposable
from tokenizers import Tokenizer

from rxstream import Finish, FinishCallback, FinishReason, SamplingParams
from rxstream.backends.openai import RemoteUsage

from ._files import read_model_files
from ._replicas import Replica, ReplicaSet
from ._run import GatewayRun
from ._text import MODES, needs_ids, text_stream

__all__ = ["ENDPOINTS", "MAX_LOGPROBS", "GatewayModel"]

ENDPOINTS = ("completions", "generate")
"""Where an ids-mode gateway sends token ids."""

MAX_LOGPROBS = 20
"""The most alternatives per token ``generate(..., logprobs=k)`` asks for (vLLM's default limit)."""


class GatewayModel:
    """Generation on one or more remote engines that serve the same model (vLLM, SGLang,
    ``rxstream serve``, any server of OpenAI completions that takes a token-id prompt and returns
    the generated ids, ``return_token_ids``), with the tokenizer and chat template read from a
    local directory.

    The chat template is rendered and tokenized here; the engine gets token ids
    (``"prompt": [ids]``) and sends back the ids it generates, which :meth:`generate` emits: the
    text operators (``detokenize``, ``stop``, ``replace``, channels, tool calls) run on them as
    on a local model's. :class:`~rxstream.SamplingParams` map to the request (``max_new_tokens``
    -> ``max_tokens``, ``temperature``, ``top_p``, ``top_k``, ``repetition_penalty``, ``seed``,
    ``stop_token_ids``, ``ignore_eos``).

    Args:
        upstreams: the engines' URLs (``http://host:port``, or their ``.../v1`` base): replicas
            of one model.
        model_dir: a directory with the model's ``tokenizer.json`` (and ``tokenizer_config.json``
            with its chat template; ``config.json`` for the context length).
        api_key: sent as ``Authorization: Bearer``.
        model: each request's ``model`` field (None: none, which a server of one model answers).
        timeout: seconds for connecting and between two reads of a stream.
        health_interval: seconds between health checks (None: none in the background).
        context_length: prompt plus generated ids at most (None: ``config.json``'s
            ``max_position_embeddings``, if any).
        headers: extra HTTP headers; transport: an httpx transport.
        mode: ``"ids"`` (the default: the engine returns the generated ids) or ``"text"``, for
            engines that give text only (OpenAI's API, Ollama's OpenAI endpoint): :meth:`text`
            streams their text deltas for the operators (no detokenize), and what needs ids
            (:meth:`generate`, logprobs, ``stop_token_ids``) is a one-line ``ValueError``
            (``rxstream serve --upstream-mode text`` serves :meth:`text`). Chosen, not
            detected: the features must not change behind a user's back when an engine is
            swapped.
        endpoint: in ids mode, where the ids go: ``"completions"`` (the default: ``/v1/completions``
            with a token-id prompt and ``return_token_ids``) or ``"generate"`` (vLLM's tokens-only
            ``/inference/v1/generate``: ``token_ids`` and ``sampling_params`` in, ids out, with
            ``detokenize: false``, so the engine makes no text at all).

    Replicas: a request goes to the healthy replica with the least outstanding work, and is
    retried on another only until its first id has arrived (never after, so no character is
    duplicated or lost); see :class:`~._replicas.ReplicaSet` for ejection. Disposing a
    subscription closes its HTTP request at once (the engine cancels the generation). Failures
    reach ``on_error`` and ``on_finish`` (``Finish(ERROR)``) as a :class:`GatewayError` with a
    one-line message. :meth:`close` ends the health checks and the connection pools.
    """

    streams_on_loop: ClassVar[bool] = True
    """Given an asyncio scheduler (reactivex's ``AsyncIOScheduler``), :meth:`generate` and
    :meth:`text` run each request as a task on its event loop, with no thread per stream, and
    ``generate`` takes ``ready``: ``rxstream serve`` passes its own loop's scheduler, so the
    engine's ids, the text pipeline and the response all run on one thread."""

    def __init__(
        self,
        upstreams: str | Sequence[str],
        model_dir: str | Path,
        *,
        api_key: str | None = None,
        model: str | None = None,
        timeout: float = 60.0,
        health_interval: float | None = 5.0,
        context_length: int | None = None,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        mode: str = "ids",
        endpoint: str = "completions",
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"GatewayModel: mode must be one of {', '.join(MODES)}, got {mode!r}")
        if endpoint not in ENDPOINTS:
            raise ValueError(
                f"GatewayModel: endpoint must be one of {', '.join(ENDPOINTS)}, got {endpoint!r}"
            )
        if endpoint == "generate" and mode == "text":
            raise ValueError("GatewayModel: endpoint='generate' gives token ids: it needs mode='ids'")
        self.mode = mode
        self.endpoint = endpoint
        files = read_model_files(model_dir)
        if context_length is not None and (
            isinstance(context_length, bool) or not isinstance(context_length, int) or context_length < 1
        ):
            raise ValueError(f"GatewayModel: context_length must be a positive int, got {context_length!r}")
        self.directory = files.directory
        self.engine_model = model
        """The ``model`` field of each request (None: none)."""
        self._files = files
        self._context = context_length if context_length is not None else files.context_length
        self._replicas = ReplicaSet(
            [upstreams] if isinstance(upstreams, str) else list(upstreams),
            api_key=api_key,
            model=model,
            timeout=timeout,
            health_interval=health_interval,
            headers=headers,
            transport=transport,
        )

    # -- what the faces read ---------------------------------------------------------------------
    @property
    def tokenizer(self) -> Tokenizer:
        return self._files.tokenizer

    @property
    def eos_token_ids(self) -> frozenset[int]:
        return self._files.eos_token_ids

    @property
    def context_length(self) -> int | None:
        return self._context

    @property
    def provider(self) -> str:
        return "remote"

    @property
    def name(self) -> str:
        """How the banner names it: the engines it sends to."""
        return ", ".join(r.url for r in self._replicas.replicas)

    @property
    def replicas(self) -> tuple[Replica, ...]:
        """The engines, with their health and load."""
        return self._replicas.replicas

    def check_health(self) -> None:
        """Check every replica's health now (ejecting and readmitting)."""
        self._replicas.check()

    def replica_stats(self) -> list[dict[str, Any]]:
        """Each replica's URL, health and requests in flight."""
        return self._replicas.snapshot()

    # -- text ------------------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added)."""
        return list(self._files.tokenizer.encode(text, add_special_tokens=False).ids)

    @property
    def chat_template(self) -> str | None:
        template = self._files.chat_template
        return None if template is None else template.source

    def render_chat(
        self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True, **template_vars: Any
    ) -> str:
        """The prompt text of ``messages`` under the chat template (``template_vars`` passed to it)."""
        template = self._files.chat_template
        if template is None:
            raise ValueError(
                f"GatewayModel: {self.directory} has no chat template (tokenizer_config.json chat_template)"
            )
        return template.render(messages, add_generation_prompt=add_generation_prompt, **template_vars)

    def encode_chat(
        self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True, **template_vars: Any
    ) -> list[int]:
        """Token ids of ``messages`` under the chat template."""
        return self.encode(self.render_chat(messages, add_generation_prompt, **template_vars))

    # -- generation ------------------------------------------------------------------------------
    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams | None = None,
        *,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        logprobs: int | None = None,
        ready: Callable[[], bool] | None = None,
        **kwargs: Any,
    ) -> reactivex.Observable[Any]:
        """A cold observable of the ids an engine generates for ``prompt_ids``: each subscription
        sends its own request (on ``scheduler``, else a thread of its own; an asyncio scheduler
        runs it as a task on its loop, see :attr:`streams_on_loop`); keyword arguments are
        :class:`~rxstream.SamplingParams` fields. ``ready`` (with an asyncio scheduler): reading
        the engine's stream pauses while it returns False (a slow reader holds the engine back
        through TCP, instead of piling text up here).

        ``logprobs=k`` (0 to 20) asks the engine for log-probabilities (``logprobs: k`` with
        ``return_tokens_as_token_ids``) and emits, as a local model does, one
        :class:`~rxstream.Piece` per id with no text: the id, its log-probability and the ``k``
        most likely ids (``top_logprobs``, best first)."""
        if self.mode == "text":
            raise needs_ids("logprobs" if logprobs is not None else "generate")
        sampling = SamplingParams.from_kwargs(params, kwargs, "GatewayModel.generate")
        if logprobs is not None and (
            isinstance(logprobs, bool) or not isinstance(logprobs, int) or not 0 <= logprobs <= MAX_LOGPROBS
        ):
            raise ValueError(
                f"GatewayModel.generate: logprobs must be None or an int from 0 to {MAX_LOGPROBS}, "
                f"got {logprobs!r}"
            )
        ids = list(prompt_ids)
        if not ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ValueError(
                f"GatewayModel.generate: prompt_ids must be a non-empty list of ints, got {ids[:10]!r}"
            )

        def subscribe(observer: abc.ObserverBase[Any], _sched: abc.SchedulerBase | None = None) -> Disposable:
            if sampling.max_new_tokens == 0:
                if on_finish is not None:
                    on_finish(Finish(FinishReason.LENGTH))
                observer.on_completed()
                return Disposable()
            run = GatewayRun(
                self._replicas, ids, sampling, observer, on_finish, scheduler, logprobs, ready, self.endpoint
            )
            run.start()
            return run.disposable()

        return reactivex.create(subscribe)

    def text(
        self,
        prompt: str | Sequence[Mapping[str, Any]],
        params: SamplingParams | None = None,
        *,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        logprobs: int | None = None,
        request: Mapping[str, Any] | None = None,
        usage: Callable[[RemoteUsage], None] | None = None,
        **kwargs: Any,
    ) -> reactivex.Observable[str]:
        """Text mode: a cold observable of the text deltas an engine streams for ``prompt`` (a
        str: ``/v1/completions``; messages: ``/v1/chat/completions``, the engine's own chat
        template), for ``stop``, ``replace``, ``route`` and ``tool_calls`` to run on as on a local
        model's text. ``usage`` gets the engine's :class:`~rxstream.backends.openai.RemoteUsage`
        at the end. ``request``: more fields of the request body (``tools``...); keyword
        arguments are :class:`~rxstream.SamplingParams` fields (``stop_token_ids`` and
        ``logprobs`` need ids: a ``ValueError``)."""
        if logprobs is not None:
            raise needs_ids("logprobs")
        sampling = SamplingParams.from_kwargs(params, kwargs, "GatewayModel.text")
        return text_stream(
            self._replicas,
            prompt,
            sampling,
            on_finish=on_finish,
            scheduler=scheduler,
            extra=request or {},
            usage=usage,
        )

    def close(self) -> None:
        """End the health checks and close the connection pools."""
        self._replicas.close()

    def __enter__(self) -> GatewayModel:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
