"""One subscription of :meth:`GatewayModel.generate` (:class:`GatewayRun`): the request to the
replica with the least outstanding work, retried on another only before its first id, and the
engine's ids passed on as they come."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

from reactivex import abc
from reactivex.disposable import Disposable

from rxstream import Finish, FinishCallback, FinishOnce, FinishReason, SamplingParams
from rxstream._piece import Piece
from rxstream.backends.openai import OpenAIBackendError

from ._replicas import Replica, ReplicaSet

__all__ = ["GatewayError", "GatewayRun", "generate_params", "request_body", "sampling_fields"]


class GatewayError(RuntimeError):
    """A gateway request failed: the engine answered with an error, its stream broke, or no engine
    could take it. The message is one line naming the engine.

    Attributes:
        url: the engine's root URL (None when no engine could be tried).
        status: the engine's HTTP status, when it answered with one.
    """

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


def sampling_fields(params: SamplingParams) -> dict[str, Any]:
    """The sampling of ``params`` by vLLM's names (``rxstream serve`` takes the same). Fields at
    their "off" value are left out, so an engine without them (``top_k``, ``stop_token_ids``)
    still answers."""
    body: dict[str, Any] = {
        "max_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
    }
    if params.top_k:
        body["top_k"] = params.top_k
    if params.repetition_penalty != 1.0:
        body["repetition_penalty"] = params.repetition_penalty
    if params.seed is not None:
        body["seed"] = params.seed
    if params.stop_token_ids:
        body["stop_token_ids"] = list(params.stop_token_ids)
    if params.ignore_eos:
        body["ignore_eos"] = True
    return body


def request_body(
    params: SamplingParams, logprobs: int | None = None, *, ids_in_logprobs: bool = False
) -> dict[str, Any]:
    """The completions request fields for ``params`` (:func:`sampling_fields`).

    The generated ids are asked for in one of two ways: ``return_token_ids`` (each chunk's
    ``token_ids``), or, with ``logprobs`` (``k`` alternatives) or for an engine that ignores
    ``return_token_ids`` (``ids_in_logprobs``: ``logprobs: 1``), ``return_tokens_as_token_ids``:
    each token of a chunk's ``logprobs`` is spelled ``token_id:N``. The usage comes last
    (``stream_options.include_usage``).
    """
    body = {**sampling_fields(params), "stream_options": {"include_usage": True}}
    if logprobs is not None or ids_in_logprobs:
        body["logprobs"] = logprobs if logprobs is not None else 1
        body["return_tokens_as_token_ids"] = True
    else:
        body["return_token_ids"] = True
    return body


def generate_params(params: SamplingParams, logprobs: int | None = None) -> dict[str, Any]:
    """The ``sampling_params`` of vLLM's tokens-only endpoint for ``params``: the same fields,
    ``logprobs: k`` when asked, and ``detokenize: false`` (the engine makes no text: the
    gateway does)."""
    body = {**sampling_fields(params), "detokenize": False}
    if logprobs is not None:
        body["logprobs"] = logprobs
    return body


def token_pieces(piece: Piece, k: int) -> list[Piece]:
    """One :class:`~rxstream.Piece` per token of an engine's ``piece``, as a local model's
    ``generate(..., logprobs=k)`` emits them: no text, the id, its log-probability and the ``k``
    most likely ids, best first (an engine may add the sampled token as a ``k + 1``-th)."""
    if piece.logprobs is None:
        raise ValueError("no log-probabilities for its tokens")
    tops = piece.top_logprobs or tuple(() for _ in piece.ids)
    out = []
    for token, logprob, top in zip(piece.ids, piece.logprobs, tops, strict=True):
        best = sorted((alt for alt in top if isinstance(alt[0], int)), key=lambda alt: -alt[1])[:k]
        out.append(Piece("", (token,), (logprob,), (tuple(best),)))
    return out


def _detail(err: BaseException) -> str:
    """The engine's own words for a failure: an error body's ``message``, else the error's text."""
    if isinstance(err, OpenAIBackendError) and err.status is not None:
        text = str(err).partition(f"HTTP {err.status}: ")[2]
        try:
            message = json.loads(text)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = text
        return f"HTTP {err.status}: {' '.join(str(message).split())}"[:500]
    text = str(err).removeprefix("OpenAIBackend: ")
    return " ".join(text.split())[:500]


def _retriable(err: BaseException) -> bool:
    """Whether another replica may do better: the engine was unreachable, broke its stream or
    answered 5xx (a request the engine refused, 4xx, or failed in an error event is not)."""
    if not isinstance(err, OpenAIBackendError):
        return False
    if err.status is not None:
        return err.status >= 500
    return err.event is None


class _Try:
    """One request to one replica (a run has several only while none has sent an id)."""

    __slots__ = ("finish", "released", "replica", "subscription")

    def __init__(self, replica: Replica) -> None:
        self.replica = replica
        self.finish: Finish | None = None
        self.subscription: abc.DisposableBase | None = None
        self.released = False


class GatewayRun:
    """One subscriber's generation through the replicas; :meth:`start` sends the first try,
    :meth:`dispose` (any thread) closes the try in flight at once."""

    def __init__(
        self,
        replicas: ReplicaSet,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        observer: abc.ObserverBase[Any],
        on_finish: FinishCallback | None,
        scheduler: abc.SchedulerBase | None,
        logprobs: int | None = None,
        ready: Callable[[], bool] | None = None,
        endpoint: str = "completions",
    ) -> None:
        self.replicas = replicas
        self.ready = ready
        self.endpoint = endpoint
        self.prompt_ids = list(prompt_ids)
        self.params = params
        self.logprobs = logprobs
        self.work = len(self.prompt_ids) + params.max_new_tokens
        self.observer = observer
        self.scheduler = scheduler
        self.report = FinishOnce(on_finish)
        self._lock = threading.Lock()
        self._disposed = False
        self._streaming = False
        """Whether an id has been passed on (from then on, no retry)."""
        self._tried: list[Replica] = []
        self._failures: list[str] = []
        self._current: _Try | None = None

    def start(self) -> None:
        """Send the request to the best replica not tried yet (or fail when none is left)."""
        replica = self.replicas.acquire(self._tried, self.work)
        if replica is None:
            tried = "; ".join(self._failures) or "no upstream"
            self._fail(GatewayError(f"gateway: no engine could take the request ({tried})"))
            return
        self._tried.append(replica)
        self._send(replica)

    def _send(self, replica: Replica) -> None:
        """Send the request to ``replica`` (already counted in flight on it)."""
        attempt = _Try(replica)
        with self._lock:
            if self._disposed:
                self._release(attempt)
                return
            self._current = attempt

        def on_finish(finish: Finish) -> None:
            attempt.finish = finish

        source: Any
        if self.endpoint == "generate":
            source = replica.backend.generate_tokens(
                self.prompt_ids,
                generate_params(self.params, self.logprobs),
                on_finish=on_finish,
                scheduler=self.scheduler,
                ready=self.ready,
            )
        else:
            body = request_body(self.params, self.logprobs, ids_in_logprobs=replica.ids_in_logprobs)
            source = replica.backend.completions(
                self.prompt_ids,
                pieces=True,
                on_finish=on_finish,
                scheduler=self.scheduler,
                ready=self.ready,
                **body,
            )
        subscription = source.subscribe(
            on_next=lambda piece: self._on_piece(attempt, piece),
            on_error=lambda err: self._on_error(attempt, err),
            on_completed=lambda: self._on_completed(attempt),
        )
        with self._lock:
            attempt.subscription = subscription
            disposed = self._disposed
        if disposed:
            subscription.dispose()

    def _release(self, attempt: _Try) -> None:
        with self._lock:
            if attempt.released:
                return
            attempt.released = True
        self.replicas.release(attempt.replica, self.work)

    def _on_piece(self, attempt: _Try, piece: Piece) -> None:
        if self._disposed:
            return
        if not piece.ids:
            # a chunk may carry text whose ids an earlier chunk carried (rxstream serve sends each
            # id as soon as it has it); text before any id means the engine sends none
            if self._streaming or not (piece.text or piece.tokens):
                return
            self._no_ids(attempt)
            return
        if self.logprobs is not None:
            try:
                items: Sequence[int | Piece] = token_pieces(piece, self.logprobs)
            except ValueError as exc:
                self._abandon(attempt)
                url = attempt.replica.url
                self._fail(GatewayError(f"gateway: the engine at {url} sent {exc}", url=url))
                return
        else:
            items = piece.ids
        self._streaming = True
        for item in items:
            if self._disposed:
                return
            self.observer.on_next(item)

    def _no_ids(self, attempt: _Try) -> None:
        """The engine streamed text without ids: ask it again for ids in its logprobs tokens
        (``token_id:N``, an engine from before ``return_token_ids``), or fail when it was."""
        replica = attempt.replica
        self._abandon(attempt)
        if not replica.ids_in_logprobs and self.logprobs is None:
            replica.ids_in_logprobs = True
            self.replicas.hold(replica, self.work)
            self._send(replica)
            return
        self._fail(
            GatewayError(
                f"gateway: the engine at {replica.url} streams text without token ids (it needs "
                "completions' return_token_ids or return_tokens_as_token_ids, as vLLM and "
                "rxstream serve take them)",
                url=replica.url,
            )
        )

    def _on_error(self, attempt: _Try, err: Exception) -> None:
        self._release(attempt)
        if self._disposed:
            return
        replica = attempt.replica
        detail = _detail(err)
        if _retriable(err):
            if isinstance(err, OpenAIBackendError) and err.status is None:
                self.replicas.eject(replica, detail)
            if not self._streaming:
                self._failures.append(f"{replica.url}: {detail}")
                self.start()
                return
        status = err.status if isinstance(err, OpenAIBackendError) else None
        when = " mid-stream" if self._streaming else ""
        self._fail(
            GatewayError(
                f"gateway: the engine at {replica.url} failed{when}: {detail}", url=replica.url, status=status
            )
        )

    def _on_completed(self, attempt: _Try) -> None:
        self._release(attempt)
        if self._disposed:
            return
        if self.report(attempt.finish or Finish(FinishReason.EOS)):
            self.observer.on_completed()

    def _abandon(self, attempt: _Try) -> None:
        """Close a try that is not to be read further."""
        with self._lock:
            self._current = None
            subscription = attempt.subscription
        if subscription is not None:
            subscription.dispose()
        self._release(attempt)

    def _fail(self, err: GatewayError) -> None:
        if self.report(Finish(FinishReason.ERROR, error=err)):
            self.observer.on_error(err)

    def dispose(self) -> None:
        with self._lock:
            self._disposed = True
            attempt = self._current
        self.report(Finish(FinishReason.CANCELLED))
        if attempt is not None:
            self._abandon(attempt)

    def disposable(self) -> Disposable:
        return Disposable(self.dispose)
