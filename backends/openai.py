"""A backend that streams text from any OpenAI-compatible HTTP endpoint.

:class:`OpenAIBackend` posts to ``{base_url}/completions`` or ``{base_url}/chat/completions``
with ``"stream": true`` and turns the server-sent events into an ``Observable[str]`` of text
deltas (or of :class:`~rxstream.Piece` items carrying token ids and log-probabilities when the
server returns them), so the same text operators (``stop``, ``replace``, ...) apply to a serving
fleet (vLLM, TGI, llama.cpp server, ``rxstream serve``) as to a local model.

* Each subscription makes one HTTP request on its own worker thread (or on a given scheduler).
* Disposing the subscription closes the HTTP stream at once (the socket is shut down, so a read
  that is waiting for the next event returns), which makes the server cancel the generation. This
  holds from the moment the connection is made, also while waiting for the response headers; only
  a request sent on a reused keep-alive connection cannot be interrupted before its headers arrive
  (its worker then ends when they do, or after ``timeout``).
* Network errors, HTTP error statuses, error events and malformed events go to ``on_error`` as
  :class:`OpenAIBackendError`, whose message names the URL and the offending event text.
* ``on_finish`` receives the server's ``finish_reason`` as a :class:`~rxstream.Finish`: ``"length"``
  -> ``LENGTH``; ``"stop"`` with a ``stop_reason`` (vLLM and ``rxstream serve`` send the matched stop
  string or token id) -> ``STOP``; ``"stop"`` without one, any other reason, or a stream that ends
  without a reason -> ``EOS``. Disposal reports ``CANCELLED``; failures ``ERROR``.

Token ids and log-probabilities (``pieces=True``): ids are read from a choice's ``token_ids``
(vLLM's ``return_token_ids``) or from logprob tokens spelled ``"token_id:N"`` (vLLM's
``return_tokens_as_token_ids``); log-probabilities from ``logprobs.token_logprobs`` (completions)
or ``logprobs.content[].logprob`` (chat). Ask the server for them with the request parameters it
understands (e.g. ``logprobs=1``); they are passed through unchanged. Log-probabilities that
cannot be paired one-to-one with ids are dropped (``Piece.logprobs`` is then None).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, overload

import httpx
import reactivex
from reactivex import abc
from reactivex.disposable import Disposable

from rxstream._finish import Finish, FinishCallback, FinishOnce, FinishReason
from rxstream._piece import Piece

__all__ = ["OpenAIBackend", "OpenAIBackendError"]


class OpenAIBackendError(RuntimeError):
    """A request to an OpenAI-compatible endpoint failed.

    Attributes:
        url: the URL that was requested.
        status: the HTTP status, when the server answered with an error status.
        event: the text of the offending server-sent event, when one was at fault.
    """

    def __init__(
        self, message: str, *, url: str, status: int | None = None, event: str | None = None
    ) -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.event = event


def _sse_events(lines: Iterator[str]) -> Iterator[str]:
    """Yield the ``data`` of each server-sent event (multi-line data joined with newlines)."""
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
    if data:
        yield "\n".join(data)


def _map_finish(reason: str | None, stop_reason: object) -> Finish:
    """The :class:`Finish` for an OpenAI ``finish_reason`` (and vLLM-style ``stop_reason``)."""
    if reason == "length":
        return Finish(FinishReason.LENGTH)
    if reason == "stop" and isinstance(stop_reason, str | int) and not isinstance(stop_reason, bool):
        return Finish(FinishReason.STOP, stop=stop_reason)
    return Finish(FinishReason.EOS)


def _ids_and_logprobs(choice: Mapping[str, Any]) -> tuple[tuple[int, ...], tuple[float, ...] | None]:
    """Token ids and log-probabilities carried by one streamed choice, as far as they pair up."""
    raw_ids = choice.get("token_ids")
    ids: list[int] | None = None
    if isinstance(raw_ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in raw_ids):
        ids = list(raw_ids)
    tokens: list[object] = []
    values: list[object] = []
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, Mapping):
        if isinstance(logprobs.get("content"), list):  # chat format
            for entry in logprobs["content"]:
                if isinstance(entry, Mapping):
                    tokens.append(entry.get("token"))
                    values.append(entry.get("logprob"))
        elif isinstance(logprobs.get("token_logprobs"), list):  # completions format
            values = list(logprobs["token_logprobs"])
            raw_tokens = logprobs.get("tokens")
            tokens = list(raw_tokens) if isinstance(raw_tokens, list) else [None] * len(values)
    if ids is None and tokens:
        parsed: list[int] = []
        for tok in tokens:
            if isinstance(tok, str) and tok.startswith("token_id:") and tok[9:].lstrip("-").isdigit():
                parsed.append(int(tok[9:]))
            else:
                break
        else:
            ids = parsed
    if ids is None:
        return (), None
    if values and len(values) == len(ids) and all(isinstance(v, int | float) for v in values):
        return tuple(ids), tuple(float(v) for v in values)  # type: ignore[arg-type]
    return tuple(ids), None


class OpenAIBackend:
    """Streams completions from an OpenAI-compatible server (``base_url`` ends in ``/v1``).

    Args:
        base_url: e.g. ``"http://127.0.0.1:8000/v1"``.
        api_key: sent as ``Authorization: Bearer <api_key>`` when given.
        model: the ``model`` field of each request (a request parameter ``model=`` overrides it).
        timeout: seconds for connecting and between two reads of the stream.
        headers: extra HTTP headers.
        transport: an httpx transport (for tests or custom networking).

    The backend holds one ``httpx.Client`` (a connection pool); close it with :meth:`close` or
    use the backend as a context manager.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        model: str = "default",
        timeout: float = 60.0,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"OpenAIBackend: base_url must be an http(s) URL, got {base_url!r}")
        if not isinstance(model, str) or not model:
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
        body = {"model": self.model, **params, "prompt": prompt if isinstance(prompt, str) else list(prompt)}
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
        body = {"model": self.model, **params, "messages": [dict(m) for m in messages]}
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
            lock = threading.Lock()
            state: dict[str, Any] = {"disposed": False, "sock": None}
            report = FinishOnce(on_finish)

            def fail(message: str, *, status: int | None = None, event: str | None = None) -> None:
                err = OpenAIBackendError(message, url=url, status=status, event=event)
                if not state["disposed"] and report(Finish(FinishReason.ERROR, error=err)):
                    observer.on_error(err)

            def item_of(choice: Mapping[str, Any]) -> str | Piece | None:
                """The item one choice carries (None: nothing to emit); ValueError if malformed."""
                if kind == "chat":
                    delta = choice.get("delta") or {}
                    if not isinstance(delta, Mapping):
                        raise ValueError("'delta' is not an object")
                    text = delta.get("content") or ""
                else:
                    text = choice.get("text") or ""
                if not isinstance(text, str):
                    raise ValueError(f"text is {type(text).__name__}, not a string")
                if pieces:
                    ids, logprobs = _ids_and_logprobs(choice)
                    return Piece(text, ids, logprobs) if text or ids else None
                return text or None

            def trace(name: str, info: Mapping[str, Any]) -> None:
                """httpcore's trace hook: learn the socket as soon as it is connected."""
                if name not in ("connection.connect_tcp.complete", "connection.connect_unix_socket.complete"):
                    return
                stream = info.get("return_value")
                sock = None
                with contextlib.suppress(Exception):
                    sock = stream.get_extra_info("socket") if stream is not None else None
                with lock:
                    state["sock"] = sock
                    disposed = state["disposed"]
                if disposed and sock is not None:  # disposed while connecting
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)

            def work() -> None:
                finish_reason: str | None = None
                stop_reason: object = None
                try:
                    with client.stream("POST", url, json=body, extensions={"trace": trace}) as response:
                        with lock:
                            if state["disposed"]:
                                return
                            stream = response.extensions.get("network_stream")
                            if stream is not None:
                                with contextlib.suppress(Exception):
                                    state["sock"] = stream.get_extra_info("socket") or state["sock"]
                        status = response.status_code
                        if status >= 400:
                            text = response.read().decode("utf-8", "replace")
                            message = f"OpenAIBackend: POST {url} returned HTTP {status}: {text[:1000]}"
                            fail(message, status=status)
                            return
                        done = False
                        for data in _sse_events(response.iter_lines()):
                            if state["disposed"]:
                                return
                            if data.strip() == "[DONE]":
                                done = True
                                break
                            items: list[str | Piece] = []
                            try:
                                event = json.loads(data)
                                if not isinstance(event, Mapping):
                                    raise ValueError("the event is not a JSON object")
                                if "error" in event:
                                    fail(
                                        f"OpenAIBackend: {url} sent an error event: {data[:1000]}", event=data
                                    )
                                    return
                                choices = event.get("choices")
                                if not isinstance(choices, list):
                                    raise ValueError("no 'choices' list")
                                for choice in choices:
                                    if not isinstance(choice, Mapping):
                                        raise ValueError("a choice is not an object")
                                    if choice.get("index", 0) != 0:
                                        continue
                                    item = item_of(choice)
                                    if item is not None:
                                        items.append(item)
                                    if choice.get("finish_reason") is not None:
                                        finish_reason = str(choice["finish_reason"])
                                        stop_reason = choice.get("stop_reason")
                            except ValueError as exc:  # json.JSONDecodeError is a ValueError
                                fail(
                                    f"OpenAIBackend: malformed event from {url}: {data[:500]!r} ({exc})",
                                    event=data,
                                )
                                return
                            for item in items:  # outside the try: a subscriber's error is not the event's
                                if state["disposed"]:
                                    return
                                observer.on_next(item)
                        if state["disposed"]:
                            return
                        if not done and finish_reason is None:
                            fail(
                                f"OpenAIBackend: the stream from {url} ended before a finish_reason or [DONE]"
                            )
                            return
                except httpx.HTTPError as exc:
                    if not state["disposed"]:
                        fail(f"OpenAIBackend: POST {url} failed: {type(exc).__name__}: {exc}")
                    return
                except Exception as exc:
                    if not state["disposed"]:
                        fail(f"OpenAIBackend: POST {url}: unexpected {type(exc).__name__}: {exc}")
                    return
                if report(_map_finish(finish_reason, stop_reason)):
                    observer.on_completed()

            def dispose() -> None:
                with lock:
                    state["disposed"] = True
                    sock = state["sock"]
                if report(Finish(FinishReason.CANCELLED)) and sock is not None:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)

            if scheduler is not None:
                scheduler.schedule(lambda _s, _st: work())
            else:
                threading.Thread(target=work, name="rxstream-openai", daemon=True).start()
            return Disposable(dispose)

        return reactivex.create(subscribe)
