"""The remote backend's requests as tasks on an event loop (an asyncio scheduler): the plain-HTTP
path (``_wire``) and the httpx path, against real sockets; the same items, finishes and errors
as the thread path, disposal that closes the connection, keep-alive, back-pressure, timeouts."""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import reactivex
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops
from reactivex.scheduler.eventloop import AsyncIOThreadSafeScheduler

from rxstream import FinishReason, FinishRecorder
from rxstream.backends.openai import OpenAIBackend, OpenAIBackendError
from rxstream.backends.openai._wire import WireConnection, WirePool, wire_target

from .test_openai_backend import Script, chat_event, completion_event, run, server, silent_server

__all__ = ["server"]  # the scripted server fixture, shared with the thread path's tests


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running on a thread of its own (as a server's does)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def tasks_on(loop: asyncio.AbstractEventLoop) -> int:
    async def count() -> int:
        return len(asyncio.all_tasks()) - 1

    return asyncio.run_coroutine_threadsafe(count(), loop).result(5)


@pytest.mark.parametrize("wire", [True, False], ids=["wire", "httpx"])
def test_the_loop_path_emits_what_the_thread_path_does(
    server: tuple[str, Script], loop: asyncio.AbstractEventLoop, wire: bool
) -> None:
    url, script = server
    script.events = [completion_event("Hel"), completion_event("lo", "length"), "[DONE]"]
    backend = OpenAIBackend(url)
    backend._wire_ok = wire  # False: the httpx path, a real connection through its async client
    sched = AsyncIOThreadSafeScheduler(loop)
    rec_thread, rec_loop = FinishRecorder(), FinishRecorder()
    on_thread = run(OpenAIBackend(url).completions("x", max_tokens=2, on_finish=rec_thread))
    on_loop = run(backend.completions("x", max_tokens=2, on_finish=rec_loop, scheduler=sched))
    assert on_loop == on_thread == (["Hel", "lo"], None)
    assert rec_loop.finish == rec_thread.finish and rec_loop.finish is not None
    assert rec_loop.finish.reason is FinishReason.LENGTH
    assert script.requests[-1][1]["prompt"] == "x" and script.requests[-1][1]["stream"] is True
    script.events = [chat_event("a", role=True), chat_event("b", "stop", stop_reason="END")]
    rec, rec_thread = FinishRecorder(), FinishRecorder()
    messages = [{"role": "user", "content": "q"}]
    on_thread = run(OpenAIBackend(url).chat(messages, on_finish=rec_thread))
    assert run(backend.chat(messages, on_finish=rec, scheduler=sched)) == on_thread == (["a", "b"], None)
    assert rec.finish == rec_thread.finish and rec.finish is not None
    backend.close()


@pytest.mark.parametrize("wire", [True, False], ids=["wire", "httpx"])
def test_errors_on_the_loop_are_the_thread_paths_errors(
    server: tuple[str, Script], loop: asyncio.AbstractEventLoop, wire: bool
) -> None:
    url, script = server
    backend = OpenAIBackend(url)
    backend._wire_ok = wire
    sched = AsyncIOThreadSafeScheduler(loop)
    script.status = 400
    _items, err = run(backend.completions("x", scheduler=sched))
    assert isinstance(err, OpenAIBackendError) and err.status == 400 and "bad things" in str(err)
    script.status = 200
    script.events = [completion_event("a")]  # no finish, no [DONE]: cut short
    items, err = run(backend.completions("x", scheduler=sched))
    assert items == ["a"] and isinstance(err, OpenAIBackendError) and "ended before" in str(err)
    script.events = ["{not json"]
    _items, err = run(backend.completions("x", scheduler=sched))
    assert isinstance(err, OpenAIBackendError) and err.event == "{not json"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = OpenAIBackend(f"http://127.0.0.1:{port}/v1", timeout=2)
    gone._wire_ok = wire
    rec = FinishRecorder()
    _items, err = run(gone.completions("x", on_finish=rec, scheduler=sched))
    assert isinstance(err, OpenAIBackendError) and err.status is None and err.event is None
    assert f"127.0.0.1:{port}/v1/completions" in str(err) and "ConnectError" in str(err)
    assert rec.finish is not None and rec.finish.reason is FinishReason.ERROR
    backend.close()
    gone.close()


@pytest.mark.parametrize("wire", [True, False], ids=["wire", "httpx"])
def test_dispose_on_the_loop_closes_the_connection(
    server: tuple[str, Script], loop: asyncio.AbstractEventLoop, wire: bool
) -> None:
    url, script = server
    script.forever = True
    script.delay = 0.01
    backend = OpenAIBackend(url)
    backend._wire_ok = wire
    rec = FinishRecorder()
    items: list[str] = []
    got_three = threading.Event()

    def on_next(x: str) -> None:
        items.append(x)
        if len(items) >= 3:
            got_three.set()

    before = tasks_on(loop)
    sub = backend.completions("x", on_finish=rec, scheduler=AsyncIOThreadSafeScheduler(loop)).subscribe(
        on_next
    )
    assert got_three.wait(5)
    sub.dispose()  # from this thread, not the loop's
    assert script.client_gone.wait(3), "the server kept writing to an open connection"
    count = len(items)
    time.sleep(0.05)
    assert len(items) == count and rec.finish is not None and rec.finish.reason is FinishReason.CANCELLED
    deadline = time.monotonic() + 2
    while tasks_on(loop) > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tasks_on(loop) == before, "the request's task outlived its disposal"
    backend.close()


def test_dispose_before_the_headers_on_the_loop(loop: asyncio.AbstractEventLoop) -> None:
    srv, accepted = silent_server()
    try:
        rec = FinishRecorder()
        errors: list[Exception] = []
        backend = OpenAIBackend(f"http://127.0.0.1:{srv.getsockname()[1]}/v1", timeout=30)
        sched = AsyncIOThreadSafeScheduler(loop)
        sub = backend.completions("x", on_finish=rec, scheduler=sched).subscribe(on_error=errors.append)
        deadline = time.monotonic() + 5
        while not accepted and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.05)
        sub.dispose()
        accepted[0].settimeout(2)
        while accepted[0].recv(65536):  # the request, then end of stream: the client closed
            pass
        assert errors == [] and rec.finish is not None and rec.finish.reason is FinishReason.CANCELLED
        backend.close()
    finally:
        srv.close()
        for conn in accepted:
            conn.close()


class _KeepAliveEngine:
    """A raw HTTP/1.1 engine on a real socket: chunked SSE answers on keep-alive connections;
    ``drop_second``: the second request on a connection is read and the connection closed
    unanswered (an idle connection the engine closed as the request came)."""

    def __init__(self, events: list[str], *, drop_second: bool = False, silent_after_headers: bool = False):
        self.events = events
        self.drop_second = drop_second
        self.silent = silent_after_headers
        self.connections = 0
        self.requests = 0
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.url = f"http://127.0.0.1:{self.srv.getsockname()[1]}/v1"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            served = 0
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = int(
                    next(
                        h.split(b":")[1]
                        for h in head.split(b"\r\n")
                        if h.lower().startswith(b"content-length")
                    )
                )
                while len(buf) < length:
                    buf += conn.recv(65536)
                buf = buf[length:]
                served += 1
                self.requests += 1
                if self.drop_second and served == 2:
                    return
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
                conn.sendall(b"transfer-encoding: chunked\r\n\r\n")
                if self.silent:
                    time.sleep(5)
                    return
                for event in self.events:
                    data = f"data: {event}\n\n".encode()
                    conn.sendall(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                conn.sendall(b"0\r\n\r\n")

    def close(self) -> None:
        self.srv.close()


def idle_soon(backend: OpenAIBackend, loop: asyncio.AbstractEventLoop) -> None:
    """Wait until the loop's pool holds the connection again (its body's closing chunk may come
    just after the stream's last event: the next request would open another meanwhile)."""
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        pool = backend._wire_pools.get(loop)
        if pool is not None and any(pool._idle.values()):
            return
        time.sleep(0.002)
    raise AssertionError("the connection did not come back to the pool")


def test_keep_alive_connections_are_reused_and_a_stale_one_is_retried(
    loop: asyncio.AbstractEventLoop,
) -> None:
    events = [completion_event("a"), completion_event("b", "stop"), "[DONE]"]
    engine = _KeepAliveEngine(events)
    backend = OpenAIBackend(engine.url)
    sched = AsyncIOThreadSafeScheduler(loop)
    for _ in range(3):
        assert run(backend.completions("x", scheduler=sched)) == (["a", "b"], None)
        idle_soon(backend, loop)
    assert engine.connections == 1 and engine.requests == 3
    engine.close()
    dropping = _KeepAliveEngine(events, drop_second=True)
    backend = OpenAIBackend(dropping.url)
    for _ in range(3):
        assert run(backend.completions("x", scheduler=sched)) == (["a", "b"], None)
        idle_soon(backend, loop)
    # the second request on each connection is dropped unanswered, and sent again on a new one
    assert dropping.requests == 5 and dropping.connections == 3
    dropping.close()


def test_an_engine_silent_past_the_timeout_is_a_read_timeout(loop: asyncio.AbstractEventLoop) -> None:
    engine = _KeepAliveEngine([], silent_after_headers=True)
    backend = OpenAIBackend(engine.url, timeout=0.3)
    t0 = time.monotonic()
    _items, err = run(backend.completions("x", scheduler=AsyncIOThreadSafeScheduler(loop)))
    assert isinstance(err, OpenAIBackendError) and "ReadTimeout" in str(err)
    assert 0.25 < time.monotonic() - t0 < 2.5
    engine.close()


def test_a_slow_reader_pauses_the_stream_until_ready(loop: asyncio.AbstractEventLoop) -> None:
    events = [completion_event(str(i)) for i in range(50)] + [completion_event("", "stop")]
    engine = _KeepAliveEngine(events)
    backend = OpenAIBackend(engine.url)
    items: list[str] = []
    gate = threading.Event()
    done = threading.Event()

    def ready() -> bool:
        return gate.is_set() or len(items) < 5

    obs = backend.completions("x", scheduler=AsyncIOThreadSafeScheduler(loop), ready=ready)
    obs.subscribe(items.append, lambda e: done.set(), done.set)
    time.sleep(0.3)
    paused_at = len(items)
    assert paused_at < 50 and not done.is_set(), "reading went on while the reader was not ready"
    gate.set()
    assert done.wait(5) and items == [str(i) for i in range(50)]
    engine.close()


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.paused = False
        self.closed = False

    def write(self, data: Any) -> None:
        pass

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def _response(body: bytes, framing: str, chunk_sizes: list[int]) -> bytes:
    if framing == "length":
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    if framing == "close":
        return b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body
    out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    i = 0
    sizes = iter(chunk_sizes)
    while i < len(body):
        n = max(1, next(sizes, 7))
        out += b"%x;ext=1\r\n" % len(body[i : i + n]) + body[i : i + n] + b"\r\n"
        i += n
    return out + b"0\r\nTrailer: x\r\n\r\n"


@settings(max_examples=200, deadline=None)
@given(
    body=st.binary(max_size=300),
    framing=st.sampled_from(["chunked", "length", "close"]),
    chunk_sizes=st.lists(st.integers(1, 40), max_size=30),
    cuts=st.lists(st.integers(0, 2000), max_size=12),
)
def test_the_body_is_the_same_however_the_bytes_are_split(
    body: bytes, framing: str, chunk_sizes: list[int], cuts: list[int]
) -> None:
    """Property: the response's framing undone gives the body's bytes, in order, whatever the
    reads' boundaries (inside a size line, a CRLF, the headers), for each framing."""
    raw = _response(body, framing, chunk_sizes)
    points = sorted({min(c, len(raw)) for c in cuts} | {0, len(raw)})
    loop = asyncio.new_event_loop()
    try:
        pool = WirePool(loop, {}, timeout=30, pause=0.005)
        conn = WireConnection(pool, ("h", 1))
        conn.connection_made(_Transport())
        head = conn.send(b"")
        got: list[bytes] = []
        end = None
        for a, b in itertools.pairwise(points):
            conn.data_received(raw[a:b])
            if end is None and head.done():
                end = conn.read(lambda piece: got.append(piece) is not None)
        if end is None:
            end = conn.read(lambda piece: got.append(piece) is not None)
        if framing == "close":
            conn.connection_lost(None)
        assert head.result()[0] == 200
        assert end.done() and end.result() is False
        assert b"".join(got) == body
        assert conn._keep is (framing != "close")
    finally:
        loop.close()


def test_wire_takes_plain_http_only() -> None:
    assert wire_target("http://10.0.0.1:8000/v1/completions") == ("10.0.0.1", 8000, "/v1/completions")
    assert wire_target("http://engine/v1/completions?x=1") == ("engine", 80, "/v1/completions?x=1")
    assert wire_target("https://engine/v1/completions") is None
    assert (
        OpenAIBackend("http://e/v1", transport=httpx.MockTransport(lambda r: httpx.Response(200)))._wire_ok
        is False
    )


def test_many_streams_on_one_loop_hold_no_threads(
    server: tuple[str, Script], loop: asyncio.AbstractEventLoop
) -> None:
    url, script = server
    script.events = [completion_event(c) for c in "abcdef"] + [completion_event("", "stop")]
    script.delay = 0.01
    backend = OpenAIBackend(url)
    sched = AsyncIOThreadSafeScheduler(loop)
    threads = threading.active_count()
    observables = [backend.completions("x", scheduler=sched) for _ in range(32)]
    merged = reactivex.merge(*(o.pipe(ops.to_list()) for o in observables))
    items, err = run(merged, timeout=20)
    assert err is None and len(items) == 32 and all("".join(i) == "abcdef" for i in items)
    # the scripted server runs a thread per connection; the client side adds none
    assert not any(t.name == "rxstream-openai" for t in threading.enumerate())
    assert threading.active_count() <= threads + 32
    assert len(script.requests) >= 32
    backend.close()
