"""One subscription's HTTP stream (:class:`StreamRequest`): the request on a worker thread,
events turned into items, and disposal that shuts the socket."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import httpx
from reactivex import abc

from rxstream import Finish, FinishCallback, FinishOnce, FinishReason

from ._errors import OpenAIBackendError, RemoteError, error_line, one_line
from ._events import sse_data
from ._outputs import Outputs, RemoteUsage

__all__ = ["Reader", "StreamRequest"]


class Reader(Protocol):
    """What reads one API's events (``ChatReader``, ``ResponsesReader``, ``MessagesReader``)."""

    END: str  # what the stream must reach, for the error when it ends before
    outputs: Outputs

    @property
    def ended(self) -> bool: ...  # the stream may end now

    @property
    def finish(self) -> Finish | None: ...

    def saw_done(self) -> None: ...  # a ``data: [DONE]`` event

    def read(self, data: str, event: Mapping[str, Any]) -> bool: ...  # True: the last event


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
        reader: Reader,
        observer: abc.ObserverBase[Any],
        on_finish: FinishCallback | None,
        on_usage: Callable[[RemoteUsage], None] | None = None,
    ) -> None:
        self.client = client
        self.url = url
        self.body = body
        self.reader = reader
        self.outputs = reader.outputs
        self.on_usage = on_usage
        self.observer = observer
        self.report = FinishOnce(on_finish)
        self._lock = threading.Lock()
        self._disposed = False
        self._sock: socket.socket | None = None

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
                    line = error_line(text) or one_line(text)
                    message = f"OpenAIBackend: POST {url} returned HTTP {response.status_code}: {line}"
                    raise self._fail(message, status=response.status_code)
                done = self._read_events(response)
                if self._disposed:
                    return
                if not done:
                    raise self._fail(f"OpenAIBackend: the stream from {url} ended before {self.reader.END}")
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
        finish = self.reader.finish
        if finish is None:  # pragma: no cover - a reader that ended has a finish
            finish = Finish(FinishReason.EOS)
        if self.outputs.usage is not None and self.on_usage is not None and not self._disposed:
            try:
                self.on_usage(self.outputs.usage)
            except Exception as exc:
                self._fail(f"OpenAIBackend: the usage callback failed: {type(exc).__name__}: {exc}")
                return
        if self.report(finish):
            self.observer.on_completed()

    def _read_events(self, response: httpx.Response) -> bool:
        """Emit the items of each event until the reader's end, ``[DONE]`` or the stream's end
        (returns True when the stream may end there)."""
        for data in sse_data(response.iter_bytes()):
            if self._disposed:
                return False
            if data.strip() == "[DONE]":
                self.reader.saw_done()
                return self.reader.ended
            stop = self._read(data)
            for item in self.outputs.take():  # outside the parsing: a subscriber's error is not the event's
                if self._disposed:
                    return False
                self.observer.on_next(item)
            if stop:
                return True
        return self.reader.ended

    def _read(self, data: str) -> bool:
        """Read one event with the reader; a malformed or error event is reported."""
        try:
            event = json.loads(data)
            if not isinstance(event, Mapping):
                raise ValueError("the event is not a JSON object")
            return self.reader.read(data, event)
        except RemoteError as exc:
            raise self._fail(f"OpenAIBackend: {self.url} sent an error event: {exc}", event=data) from None
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            message = f"OpenAIBackend: malformed event from {self.url}: {data[:500]!r} ({exc})"
            raise self._fail(message, event=data) from None
