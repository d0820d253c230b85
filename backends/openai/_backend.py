"""The backend object (:class:`OpenAIBackend`): a connection pool and the two endpoints."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

import httpx
import reactivex
from reactivex import abc
from reactivex.disposable import Disposable

from rxstream._finish import FinishCallback
from rxstream._piece import Piece
from rxstream.detok import TokenBytes

from ._stream import StreamRequest

__all__ = ["OpenAIBackend"]


class OpenAIBackend:
    """Streams completions from an OpenAI-compatible server (``base_url`` ends in ``/v1``).

    Args:
        base_url: e.g. ``"http://127.0.0.1:8000/v1"``.
        api_key: sent as ``Authorization: Bearer <api_key>`` when given.
        model: the ``model`` field of each request (a request parameter ``model=`` overrides it);
            None (the default) sends none, which servers of one model (``rxstream serve``, vLLM,
            llama.cpp) answer with that model; OpenAI itself needs one.
        timeout: seconds for connecting and between two reads of the stream.
        headers: extra HTTP headers.
        transport: an httpx transport (for tests or custom networking).
        tokenizer: the served model's tokenizer (anything
            :func:`~rxstream.operators.detokenize` accepts), optional. With ``pieces=True`` it
            turns the tokens a server names only by their text or bytes (OpenAI, vLLM without
            ``return_tokens_as_token_ids``) into ids.

    The backend holds one ``httpx.Client`` (a connection pool); close it with :meth:`close` or
    use the backend as a context manager.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        model: str | None = None,
        timeout: float = 60.0,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        tokenizer: Any = None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"OpenAIBackend: base_url must be an http(s) URL, got {base_url!r}")
        if model is not None and (not isinstance(model, str) or not model):
            raise ValueError(f"OpenAIBackend: model must be a non-empty str, got {model!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ValueError(f"OpenAIBackend: timeout must be a positive number, got {timeout!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        all_headers = {"Accept": "text/event-stream"}
        if api_key is not None:
            all_headers["Authorization"] = f"Bearer {api_key}"
        all_headers.update(headers or {})
        self._client = httpx.Client(headers=all_headers, timeout=httpx.Timeout(timeout), transport=transport)
        self._vocab = None if tokenizer is None else TokenBytes(tokenizer)

    def _model_field(self) -> dict[str, str]:
        return {} if self.model is None else {"model": self.model}

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> OpenAIBackend:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @overload
    def completions(
        self,
        prompt: str | Sequence[int],
        *,
        pieces: Literal[False] = False,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        **params: Any,
    ) -> reactivex.Observable[str]: ...

    @overload
    def completions(
        self,
        prompt: str | Sequence[int],
        *,
        pieces: Literal[True],
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        **params: Any,
    ) -> reactivex.Observable[Piece]: ...

    def completions(
        self,
        prompt: str | Sequence[int],
        *,
        pieces: bool = False,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        **params: Any,
    ) -> reactivex.Observable[str] | reactivex.Observable[Piece]:
        """Stream ``POST /completions`` for ``prompt`` (text or token ids).

        ``params`` are added to the request body (``max_tokens``, ``temperature``, ``stop``,
        ``seed``, server extensions such as ``rxstream={"replace": {...}}``). Items are text
        deltas, or :class:`~rxstream.Piece` items with ``pieces=True``.
        """
        if not isinstance(prompt, str) and not (
            isinstance(prompt, Sequence) and all(isinstance(i, int) for i in prompt)
        ):
            raise TypeError(f"OpenAIBackend.completions: prompt must be a str or token ids, got {prompt!r}")
        body = {
            **self._model_field(),
            **params,
            "prompt": prompt if isinstance(prompt, str) else list(prompt),
        }
        return self._stream("/completions", body, "completions", pieces, on_finish, scheduler)

    @overload
    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        pieces: Literal[False] = False,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        **params: Any,
    ) -> reactivex.Observable[str]: ...

    @overload
    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        pieces: Literal[True],
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        **params: Any,
    ) -> reactivex.Observable[Piece]: ...

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        pieces: bool = False,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        **params: Any,
    ) -> reactivex.Observable[str] | reactivex.Observable[Piece]:
        """Stream ``POST /chat/completions`` for ``messages`` (``[{"role": ..., "content": ...}]``).

        ``params`` as for :meth:`completions`; items are the assistant's content deltas.
        """
        if isinstance(messages, str | bytes) or not all(isinstance(m, Mapping) for m in messages):
            raise TypeError(f"OpenAIBackend.chat: messages must be a sequence of mappings, got {messages!r}")
        body = {**self._model_field(), **params, "messages": [dict(m) for m in messages]}
        return self._stream("/chat/completions", body, "chat", pieces, on_finish, scheduler)

    def _stream(
        self,
        path: str,
        body: dict[str, Any],
        kind: Literal["completions", "chat"],
        pieces: bool,
        on_finish: FinishCallback | None,
        scheduler: abc.SchedulerBase | None,
    ) -> reactivex.Observable[Any]:
        url = self.base_url + path
        body = {**body, "stream": True}
        client = self._client

        def subscribe(observer: abc.ObserverBase[Any], _sched: abc.SchedulerBase | None = None) -> Disposable:
            request = StreamRequest(client, url, body, kind, pieces, observer, on_finish, self._vocab)
            if scheduler is not None:
                scheduler.schedule(lambda _s, _st: request.run())
            else:
                threading.Thread(target=request.run, name="rxstream-openai", daemon=True).start()
            return Disposable(request.dispose)

        return reactivex.create(subscribe)
