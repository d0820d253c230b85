"""One subscription's HTTP stream (:class:`StreamRequest`): the request on a worker thread,
events turned into items, and disposal that shuts the socket."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Mapping
from typing import Any, Literal

import httpx
from reactivex import abc

from rxstream import Finish, FinishCallback, FinishOnce, FinishReason
from rxstream._piece import Piece
from rxstream.detok import TokenBytes

from ._errors import OpenAIBackendError
from ._events import choice_tokens, map_finish, sse_events

__all__ = ["StreamRequest"]


class _Failed(Exception):
    """Ends reading the stream after a failure was reported."""


class StreamRequest:
    """One streamed request for one subscriber.

    :meth:`run` (on a worker thread) posts ``body`` to ``url`` and emits the items of the
    server-sent events to ``observer``; :meth:`dispose` (from any thread) ends it at once by
    shutting down the socket, also while connecting or waiting for the response headers.
    """

    def __init__(
        self,
        client: httpx.Client,
        url: str,
        body: dict[str, Any],
        kind: Literal["completions", "chat"],
        pieces: bool,
        observer: abc.ObserverBase[Any],
        on_finish: FinishCallback | None,
        vocab: TokenBytes | None = None,
    ) -> None:
        self.vocab = vocab
        self.client = client
        self.url = url
        self.body = body
        self.kind = kind
        self.pieces = pieces
        self.observer = observer
        self.report = FinishOnce(on_finish)
        self._lock = threading.Lock()
        self._disposed = False
        self._sock: socket.socket | None = None
        self._finish_reason: str | None = None
        self._stop_reason: object = None

    # -- disposal ----------------------------------------------------------------------------
    def dispose(self) -> None:
        with self._lock:
            self._disposed = True
            sock = self._sock
        if self.report(Finish(FinishReason.CANCELLED)) and sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _set_socket(self, sock: socket.socket | None) -> bool:
        """Remember the connection's socket; shut it at once if disposed meanwhile. True: disposed."""
        with self._lock:
            if sock is not None:
                self._sock = sock
            disposed = self._disposed
        if disposed and sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        return disposed

    def _trace(self, name: str, info: Mapping[str, Any]) -> None:
        """httpcore's trace hook: learn the socket as soon as it is connected."""
        if name not in ("connection.connect_tcp.complete", "connection.connect_unix_socket.complete"):
            return
        stream = info.get("return_value")
        sock = None
        with contextlib.suppress(Exception):
            sock = stream.get_extra_info("socket") if stream is not None else None
        self._set_socket(sock)

    # -- failures ----------------------------------------------------------------------------
    def _fail(self, message: str, *, status: int | None = None, event: str | None = None) -> _Failed:
        err = OpenAIBackendError(message, url=self.url, status=status, event=event)
        if not self._disposed and self.report(Finish(FinishReason.ERROR, error=err)):
            self.observer.on_error(err)
        return _Failed()

    # -- the stream --------------------------------------------------------------------------
    def run(self) -> None:
        """Make the request and emit its items; report how it ended (on the calling thread)."""
        url = self.url
        try:
            with self.client.stream(
                "POST", url, json=self.body, extensions={"trace": self._trace}
            ) as response:
                stream = response.extensions.get("network_stream")
                sock = None
                if stream is not None:
                    with contextlib.suppress(Exception):
                        sock = stream.get_extra_info("socket")
                if self._set_socket(sock):
                    return
                if response.status_code >= 400:
                    text = response.read().decode("utf-8", "replace")
                    message = f"OpenAIBackend: POST {url} returned HTTP {response.status_code}: {text[:1000]}"
                    raise self._fail(message, status=response.status_code)
                done = self._read_events(response)
                if self._disposed:
                    return
                if not done and self._finish_reason is None:
                    raise self._fail(
                        f"OpenAIBackend: the stream from {url} ended before a finish_reason or [DONE]"
                    )
        except _Failed:
            return
        except httpx.HTTPError as exc:
            if not self._disposed:
                self._fail(f"OpenAIBackend: POST {url} failed: {type(exc).__name__}: {exc}")
            return
        except Exception as exc:
            if not self._disposed:
                self._fail(f"OpenAIBackend: POST {url}: unexpected {type(exc).__name__}: {exc}")
            return
        if self.report(map_finish(self._finish_reason, self._stop_reason)):
            self.observer.on_completed()

    def _read_events(self, response: httpx.Response) -> bool:
        """Emit the items of each event until ``[DONE]`` (returns True) or the stream's end."""
        for data in sse_events(response.iter_lines()):
            if self._disposed:
                return False
            if data.strip() == "[DONE]":
                return True
            items = self._items(data)
            for item in items:  # outside the parsing: a subscriber's error is not the event's
                if self._disposed:
                    return False
                self.observer.on_next(item)
        return False

    def _items(self, data: str) -> list[str | Piece]:
        """The items one event carries; records its finish reason."""
        items: list[str | Piece] = []
        try:
            event = json.loads(data)
            if not isinstance(event, Mapping):
                raise ValueError("the event is not a JSON object")
            if "error" in event:
                raise self._fail(f"OpenAIBackend: {self.url} sent an error event: {data[:1000]}", event=data)
            choices = event.get("choices")
            if not isinstance(choices, list):
                raise ValueError("no 'choices' list")
            for choice in choices:
                if not isinstance(choice, Mapping):
                    raise ValueError("a choice is not an object")
                if choice.get("index", 0) != 0:
                    continue
                item = self._item_of(choice)
                if item is not None:
                    items.append(item)
                if choice.get("finish_reason") is not None:
                    self._finish_reason = str(choice["finish_reason"])
                    self._stop_reason = choice.get("stop_reason")
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            message = f"OpenAIBackend: malformed event from {self.url}: {data[:500]!r} ({exc})"
            raise self._fail(message, event=data) from None
        return items

    def _item_of(self, choice: Mapping[str, Any]) -> str | Piece | None:
        """The item one choice carries (None: nothing to emit); ValueError if malformed."""
        if self.kind == "chat":
            delta = choice.get("delta") or {}
            if not isinstance(delta, Mapping):
                raise ValueError("'delta' is not an object")
            text = delta.get("content") or ""
        else:
            text = choice.get("text") or ""
        if not isinstance(text, str):
            raise ValueError(f"text is {type(text).__name__}, not a string")
        if self.pieces:
            t = choice_tokens(choice, self.vocab)
            if not text and not t.size:
                return None
            return Piece(text, t.ids, t.logprobs, t.top_logprobs, t.tokens)
        return text or None
