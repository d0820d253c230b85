"""One subscription's HTTP stream (:class:`StreamRequest`): the request on a worker thread,
events turned into items, and disposal that shuts the socket."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, NoReturn, Protocol

import httpx
from reactivex import abc

from rxstream import Finish, FinishCallback, FinishOnce, FinishReason

from ._cancel import cancel_url, post_cancel, post_cancel_async, post_cancel_wire
from ._errors import OpenAIBackendError, RemoteError, error_line, one_line
from ._events import SseDecoder, sse_data
from ._outputs import Outputs, RemoteUsage
from ._wire import WireConnection, WireError, WirePool

__all__ = ["PAUSE", "Reader", "StreamRequest"]

PAUSE = 0.005
"""Seconds between two looks at ``ready`` while a slow reader holds a stream."""


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


_TASKS: set[asyncio.Task[None]] = set()
"""The requests running as tasks (the loop holds only weak references to tasks)."""


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _cancel(task: asyncio.Task[None]) -> None:
    """Cancel a request's task from any thread."""
    loop = task.get_loop()
    if _running_loop() is loop:
        task.cancel()
    else:
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(task.cancel)


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
        streams: str | None = None,
    ) -> None:
        self.client = client
        self.url = url
        self.streams = streams  # an rxstream server's ``.../streams/`` (to cancel a stream left early)
        self.cancel_url: str | None = None
        self.body = body
        self.reader = reader
        self.outputs = reader.outputs
        self.on_usage = on_usage
        self.observer = observer
        self.report = FinishOnce(on_finish)
        self._lock = threading.Lock()
        self._disposed = False
        self._sock: socket.socket | None = None
        self._task: asyncio.Task[None] | None = None

    # -- disposal ----------------------------------------------------------------------------
    def dispose(self) -> None:
        with self._lock:
            self._disposed = True
            sock = self._sock
            task = self._task
        cancelled = self.report(Finish(FinishReason.CANCELLED))
        if task is not None:
            _cancel(task)
        elif cancelled and sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            if self.cancel_url is not None:  # the server keeps a stream for its client to resume
                post_cancel(self.client, self.cancel_url)

    def start_on(self, loop: asyncio.AbstractEventLoop, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``run()`` (:meth:`arun` or :meth:`arun_wire`, bound) as a task on ``loop``, from
        any thread; :meth:`dispose` cancels it."""

        def start() -> None:
            if self._disposed:
                return
            task = loop.create_task(run())
            _TASKS.add(task)
            task.add_done_callback(_TASKS.discard)
            with self._lock:
                self._task = task
                disposed = self._disposed
            if disposed:
                task.cancel()

        if _running_loop() is loop:
            start()
        else:
            with contextlib.suppress(RuntimeError):  # a closed loop: nothing can run there any more
                loop.call_soon_threadsafe(start)

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
        try:
            with self.client.stream(
                "POST", self.url, json=self.body, extensions={"trace": self._trace}
            ) as response:
                stream = response.extensions.get("network_stream")
                sock = None
                if stream is not None:
                    with contextlib.suppress(Exception):
                        sock = stream.get_extra_info("socket")
                self.cancel_url = cancel_url(self.streams, response.headers)
                if self._set_socket(sock):
                    if self.cancel_url is not None:
                        post_cancel(self.client, self.cancel_url)
                    return
                if response.status_code >= 400:
                    self._refused(response.status_code, response.read())
                done = self._read_events(response)
        except _Failed:
            return
        except Exception as exc:
            self._broke(exc)
            return
        self._end(done)

    async def arun(self, client: httpx.AsyncClient, ready: Callable[[], bool] | None = None) -> None:
        """:meth:`run` as a coroutine on an event loop (``client`` is that loop's): a task per
        request instead of a thread. ``ready``: reading pauses while it returns False (the
        engine then waits on TCP's flow control). Cancelling the task closes the connection."""
        if self._disposed:
            return
        try:
            async with client.stream("POST", self.url, json=self.body) as response:
                self.cancel_url = cancel_url(self.streams, response.headers)
                if self._disposed:
                    raise asyncio.CancelledError
                if response.status_code >= 400:
                    self._refused(response.status_code, await response.aread())
                decoder = SseDecoder()
                done: bool | None = None
                async for chunk in response.aiter_bytes():
                    for data in decoder.feed(chunk):
                        done = self._take(data)
                        if done is not None:
                            break
                    if done is not None:
                        break
                    while ready is not None and not ready() and not self._disposed:
                        await asyncio.sleep(PAUSE)
                else:
                    for data in decoder.end():
                        done = self._take(data)
                        if done is not None:
                            break
        except _Failed:
            return
        except asyncio.CancelledError:  # disposed: the task is the request's own, nobody awaits it
            if self.cancel_url is not None:
                post_cancel_async(client, self.cancel_url)
            return
        except Exception as exc:
            self._broke(exc)
            return
        self._end(self.reader.ended if done is None else done)

    async def arun_wire(
        self, pool: WirePool, target: tuple[str, int, str], ready: Callable[[], bool] | None = None
    ) -> None:
        """:meth:`arun` over a plain-HTTP connection of ``pool`` (``target``: host, port, path):
        each chunk of the response read in the connection's ``data_received``, its events
        emitted there and then."""
        if self._disposed:
            return
        host, port, path = target
        request = pool.request(host, port, path, json.dumps(self.body).encode())
        conn: WireConnection | None = None
        done: bool | None = None
        clean = False
        try:
            for attempt in (0, 1):
                conn = await pool.connect(host, port)
                with self._lock:
                    disposed = self._disposed
                if disposed:
                    return
                try:
                    status, headers = await conn.send(request)
                    self.cancel_url = cancel_url(self.streams, headers)
                    break
                except WireError:
                    if attempt or not conn.reused or conn.received:
                        raise
                    conn.abort()  # an idle connection the engine had closed: once more on a new one
            assert conn is not None
            if status >= 400:
                self._refused(status, await conn.read_all())
            decoder = SseDecoder()
            failure: list[BaseException] = []

            def on_data(chunk: bytes) -> bool:
                nonlocal done
                try:
                    for data in decoder.feed(chunk):
                        done = self._take(data)
                        if done is not None:
                            return True
                except Exception as exc:  # raised where the reader awaits, not in the protocol
                    failure.append(exc)
                    return True
                return False

            stopped = await conn.read(on_data, ready)
            if failure:
                raise failure[0]
            if not stopped:
                for data in decoder.end():
                    done = self._take(data)
                    if done is not None:
                        break
            clean = done is not None or self.reader.ended
        except _Failed:
            return
        except asyncio.CancelledError:  # disposed: the task is the request's own, nobody awaits it
            if self.cancel_url is not None:
                post_cancel_wire(pool, self.cancel_url)
            return
        except WireError as exc:
            if not self._disposed:
                self._fail(f"OpenAIBackend: POST {self.url} failed: {exc}")
            return
        except Exception as exc:
            self._broke(exc)
            return
        finally:
            if conn is not None:
                # kept for the next request only after a whole stream: disposal and failures close
                # it at once (the engine sees the disconnect and stops generating)
                if clean and not self._disposed:
                    conn.release()
                else:
                    conn.abort()
        self._end(self.reader.ended if done is None else done)

    def _refused(self, status: int, raw: bytes) -> NoReturn:
        text = raw.decode("utf-8", "replace")
        line = error_line(text) or one_line(text)
        raise self._fail(f"OpenAIBackend: POST {self.url} returned HTTP {status}: {line}", status=status)

    def _broke(self, exc: Exception) -> None:
        """Report a failure of the connection (or an unexpected one) unless disposed."""
        if self._disposed:
            return
        if isinstance(exc, httpx.HTTPError):
            self._fail(f"OpenAIBackend: POST {self.url} failed: {type(exc).__name__}: {exc}")
        else:
            self._fail(f"OpenAIBackend: POST {self.url}: unexpected {type(exc).__name__}: {exc}")

    def _end(self, done: bool) -> None:
        """Report how the stream ended (``done``: it reached its end, not just the end of bytes)."""
        if self._disposed:
            return
        if not done:
            self._fail(f"OpenAIBackend: the stream from {self.url} ended before {self.reader.END}")
            return
        finish = self.reader.finish
        if finish is None:  # pragma: no cover - a reader that ended has a finish
            finish = Finish(FinishReason.EOS)
        if self.outputs.usage is not None and self.on_usage is not None:
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
            done = self._take(data)
            if done is not None:
                return done
        return self.reader.ended

    def _take(self, data: str) -> bool | None:
        """Emit one event's items. None: read on; else the stream ends here (True: it may)."""
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
        return True if stop else None

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
