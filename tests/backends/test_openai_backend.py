"""Tests for rxstream.backends.openai against a scripted SSE server on a real socket."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
import reactivex

from rxstream import FinishReason, FinishRecorder, Piece
from rxstream.backends.openai import OpenAIBackend, OpenAIBackendError


class Script:
    """What the fake server answers: a status, raw SSE event payloads, and a delay between them."""

    def __init__(self) -> None:
        self.status = 200
        self.events: list[str] = []
        self.delay = 0.0
        self.forever = False
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.client_gone = threading.Event()
        self.headers: list[dict[str, str]] = []


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: object) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            script.requests.append((self.path, json.loads(self.rfile.read(length))))
            script.headers.append(dict(self.headers))
            if script.status != 200:
                body = b'{"error": {"message": "bad things", "type": "invalid_request_error"}}'
                self.send_response(script.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                i = 0
                while True:
                    if i < len(script.events):
                        payload = script.events[i]
                    elif script.forever:
                        payload = json.dumps({"choices": [{"index": 0, "text": "x", "finish_reason": None}]})
                    else:
                        break
                    self.wfile.write(f"data: {payload}\n\n".encode())
                    self.wfile.flush()
                    i += 1
                    if script.delay:
                        time.sleep(script.delay)
            except OSError:
                script.client_gone.set()
            self.close_connection = True

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", script
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def completion_event(text: str, finish: str | None = None, **extra: Any) -> str:
    return json.dumps(
        {
            "object": "text_completion",
            "choices": [{"index": 0, "text": text, "finish_reason": finish, **extra}],
        }
    )


def chat_event(content: str | None, finish: str | None = None, role: bool = False, **extra: Any) -> str:
    delta: dict[str, Any] = {"role": "assistant"} if role else {}
    if content is not None:
        delta["content"] = content
    return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish, **extra}]})


def run(obs: reactivex.Observable[Any], timeout: float = 5.0) -> tuple[list[Any], Exception | None]:
    items: list[Any] = []
    errors: list[Exception] = []
    done = threading.Event()

    def on_error(e: Exception) -> None:
        errors.append(e)
        done.set()

    obs.subscribe(items.append, on_error, done.set)
    assert done.wait(timeout), "the stream did not terminate"
    return items, errors[0] if errors else None


def test_completions_stream_text_and_length(server: tuple[str, Script]) -> None:
    url, script = server
    script.events = [
        completion_event("Hel"),
        completion_event("lo"),
        completion_event("", "length"),
        "[DONE]",
    ]
    rec = FinishRecorder()
    with OpenAIBackend(url, api_key="sk-test", model="m1") as backend:
        items, err = run(backend.completions("Say", max_tokens=3, on_finish=rec, temperature=0))
    assert err is None
    assert items == ["Hel", "lo"]
    assert rec.finish is not None and rec.finish.reason is FinishReason.LENGTH
    path, body = script.requests[0]
    assert path == "/v1/completions"
    assert body == {"model": "m1", "prompt": "Say", "max_tokens": 3, "temperature": 0, "stream": True}
    assert script.headers[0]["Authorization"] == "Bearer sk-test"


def test_chat_stream_and_stop_reason(server: tuple[str, Script]) -> None:
    url, script = server
    script.events = [
        chat_event("", role=True),
        chat_event("Hi"),
        chat_event(" there"),
        chat_event(None, "stop", stop_reason="\n"),
        "[DONE]",
    ]
    rec = FinishRecorder()
    backend = OpenAIBackend(url)
    items, err = run(backend.chat([{"role": "user", "content": "hey"}], on_finish=rec, stop=["\n"]))
    backend.close()
    assert err is None and items == ["Hi", " there"]
    assert rec.finish is not None and rec.finish.reason is FinishReason.STOP and rec.finish.stop == "\n"
    assert script.requests[0][0] == "/v1/chat/completions"
    assert script.requests[0][1]["messages"] == [{"role": "user", "content": "hey"}]


def test_plain_stop_is_eos_and_done_optional_after_finish(server: tuple[str, Script]) -> None:
    url, script = server
    script.events = [chat_event("a"), chat_event("", "stop")]  # no [DONE]
    rec = FinishRecorder()
    items, err = run(OpenAIBackend(url).chat([{"role": "user", "content": "x"}], on_finish=rec))
    assert err is None and items == ["a"]
    assert rec.finish is not None and rec.finish.reason is FinishReason.EOS


def test_completion_pieces_from_token_id_logprobs(server: tuple[str, Script]) -> None:
    url, script = server
    lp = {"tokens": ["token_id:15", "token_id:16"], "token_logprobs": [-0.25, -1.5]}
    script.events = [
        completion_event("ab", logprobs=lp),
        completion_event("c", token_ids=[17]),
        completion_event("", "length"),
        "[DONE]",
    ]
    items, err = run(OpenAIBackend(url).completions([1, 2, 3], pieces=True, logprobs=1))
    assert err is None
    assert items == [Piece("ab", (15, 16), (-0.25, -1.5)), Piece("c", (17,), None)]
    assert script.requests[0][1]["prompt"] == [1, 2, 3]


def test_chat_pieces_with_token_ids_and_content_logprobs(server: tuple[str, Script]) -> None:
    url, script = server
    lp = {"content": [{"token": "x", "logprob": -0.5}]}
    script.events = [chat_event("x", token_ids=[7], logprobs=lp), chat_event("", "stop"), "[DONE]"]
    items, err = run(OpenAIBackend(url).chat([{"role": "user", "content": "q"}], pieces=True, logprobs=True))
    assert err is None and items == [Piece("x", (7,), (-0.5,))]


def test_http_error_status(server: tuple[str, Script]) -> None:
    url, script = server
    script.status = 400
    rec = FinishRecorder()
    items, err = run(OpenAIBackend(url).completions("x", on_finish=rec))
    assert items == []
    assert isinstance(err, OpenAIBackendError) and err.status == 400
    assert f"{url}/completions" in str(err) and "bad things" in str(err)
    assert rec.finish is not None and rec.finish.reason is FinishReason.ERROR and rec.finish.error is err


def test_malformed_event_names_event(server: tuple[str, Script]) -> None:
    url, script = server
    script.events = [completion_event("ok"), "{not json", "[DONE]"]
    items, err = run(OpenAIBackend(url).completions("x"))
    assert items == ["ok"]
    assert isinstance(err, OpenAIBackendError) and err.event == "{not json"
    assert "malformed event" in str(err) and "{not json" in str(err) and url in str(err)


def test_event_without_choices_is_malformed(server: tuple[str, Script]) -> None:
    url, script = server
    script.events = [json.dumps({"foo": 1})]
    _items, err = run(OpenAIBackend(url).completions("x"))
    assert isinstance(err, OpenAIBackendError) and "choices" in str(err)


def test_error_event(server: tuple[str, Script]) -> None:
    url, script = server
    script.events = [completion_event("a"), json.dumps({"error": {"message": "model crashed"}})]
    items, err = run(OpenAIBackend(url).completions("x"))
    assert items == ["a"] and isinstance(err, OpenAIBackendError) and "model crashed" in str(err)


def test_stream_cut_short_is_an_error(server: tuple[str, Script]) -> None:
    url, script = server
    script.events = [completion_event("a")]
    _items, err = run(OpenAIBackend(url).completions("x"))
    assert isinstance(err, OpenAIBackendError) and "ended before" in str(err)


def test_connection_refused_names_url() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    rec = FinishRecorder()
    _items, err = run(OpenAIBackend(url, timeout=2).completions("x", on_finish=rec))
    assert isinstance(err, OpenAIBackendError) and f"{url}/completions" in str(err)
    assert rec.finish is not None and rec.finish.reason is FinishReason.ERROR


def test_dispose_closes_the_http_stream(server: tuple[str, Script]) -> None:
    url, script = server
    script.forever = True
    script.delay = 0.01
    rec = FinishRecorder()
    items: list[str] = []
    got_three = threading.Event()

    def on_next(x: str) -> None:
        items.append(x)
        if len(items) >= 3:
            got_three.set()

    sub = OpenAIBackend(url).completions("x", on_finish=rec).subscribe(on_next)
    assert got_three.wait(5)
    sub.dispose()
    t0 = time.monotonic()
    deadline = t0 + 3
    while any(t.name == "rxstream-openai" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert not any(t.name == "rxstream-openai" for t in threading.enumerate()), "worker thread leaked"
    assert time.monotonic() - t0 < 1.0
    assert script.client_gone.wait(3), "the server kept writing to an open connection"
    count = len(items)
    time.sleep(0.05)
    assert len(items) == count
    assert rec.finish is not None and rec.finish.reason is FinishReason.CANCELLED


def test_construction_errors() -> None:
    with pytest.raises(ValueError, match="base_url"):
        OpenAIBackend("localhost:8000")
    with pytest.raises(ValueError, match="timeout"):
        OpenAIBackend("http://x/v1", timeout=0)
    backend = OpenAIBackend("http://x/v1")
    with pytest.raises(TypeError, match="messages"):
        backend.chat("hello")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="prompt"):
        backend.completions(3.5)  # type: ignore[call-overload]


def silent_server() -> tuple[socket.socket, list[socket.socket]]:
    """A socket that accepts connections and never answers (records the accepted connections)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            accepted.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    return srv, accepted


def openai_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "rxstream-openai"]


def test_dispose_before_the_response_headers_closes_the_connection() -> None:
    srv, accepted = silent_server()
    try:
        rec = FinishRecorder()
        errors: list[Exception] = []
        backend = OpenAIBackend(f"http://127.0.0.1:{srv.getsockname()[1]}/v1", timeout=30)
        sub = backend.completions("x", on_finish=rec).subscribe(on_error=errors.append)
        deadline = time.monotonic() + 5
        while not accepted and time.monotonic() < deadline:
            time.sleep(0.005)
        assert accepted and openai_threads()
        time.sleep(0.05)  # the request is sent; the worker waits for headers that never come
        sub.dispose()
        deadline = time.monotonic() + 2
        while openai_threads() and time.monotonic() < deadline:
            time.sleep(0.005)
        assert not openai_threads(), "the worker waited for the headers after disposal"
        accepted[0].settimeout(2)
        while accepted[0].recv(65536):  # the request, then end of stream: the client closed
            pass
        assert errors == [] and rec.finish is not None and rec.finish.reason is FinishReason.CANCELLED
        backend.close()
    finally:
        srv.close()
        for conn in accepted:
            conn.close()


class Chunks(httpx.SyncByteStream):
    def __init__(self, chunks: list[bytes], fail: Exception | None = None) -> None:
        self.chunks = chunks
        self.fail = fail

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
        if self.fail is not None:
            raise self.fail


def scripted(raw: bytes, split: int, fail: Exception | None = None) -> httpx.MockTransport:
    """A transport answering with ``raw`` as an event stream cut into ``split``-byte reads."""
    chunks = [raw[i : i + split] for i in range(0, len(raw), split)]

    def handler(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, stream=Chunks(chunks, fail))

    return httpx.MockTransport(handler)


@pytest.mark.parametrize("split", [1, 2, 3, 7, 1000])
def test_sse_framing_crlf_comments_multiline_and_split_reads(split: int) -> None:
    event_a = '{"choices": [{"index": 0,\r\ndata: "text": "Hel"}]}'  # one JSON over two data lines
    raw = (
        ": keep-alive\r\n\r\n"
        "retry: 1000\r\nid: 1\r\nevent: message\r\n"
        f"data: {event_a}\r\n\r\n"
        ": another comment\n"
        'data:{"choices": [{"index": 0, "text": "lo\\u00e9"}]}\n\n'
        'data: {"choices": [{"index": 1, "text": "other choice"}]}\r\r'
        "data: [DONE]\r\n\r\n"
    ).encode()
    rec = FinishRecorder()
    with OpenAIBackend("http://test/v1", transport=scripted(raw, split)) as backend:
        items, err = run(backend.completions("x", on_finish=rec))
    assert err is None and "".join(items) == "Hello\u00e9"
    assert rec.finish is not None and rec.finish.reason is FinishReason.EOS  # [DONE] without a reason


def test_stream_broken_mid_event_is_an_error_with_context() -> None:
    raw = b'data: {"choices": [{"index": 0, "text": "a"}]}\n\ndata: {"choices": [{"ind'
    with OpenAIBackend("http://test/v1", transport=scripted(raw, 5)) as backend:
        items, err = run(backend.completions("x"))
    assert items == ["a"] and isinstance(err, OpenAIBackendError) and err.event == '{"choices": [{"ind'
    broken = httpx.RemoteProtocolError("peer closed connection without sending complete message body")
    with OpenAIBackend("http://test/v1", transport=scripted(raw[:48], 5, fail=broken)) as backend:
        items, err = run(backend.completions("x"))
    assert items == ["a"] and isinstance(err, OpenAIBackendError)
    assert "RemoteProtocolError" in str(err) and "http://test/v1/completions" in str(err)


@pytest.mark.parametrize("status", [429, 500, 503])
def test_error_statuses_with_json_bodies(server: tuple[str, Script], status: int) -> None:
    url, script = server
    script.status = status
    items, err = run(OpenAIBackend(url).chat([{"role": "user", "content": "x"}]))
    assert items == [] and isinstance(err, OpenAIBackendError) and err.status == status
    assert f"HTTP {status}" in str(err) and "bad things" in str(err)


def test_a_failing_subscriber_is_not_blamed_on_the_event(server: tuple[str, Script]) -> None:
    url, script = server
    script.events = [completion_event("a"), completion_event("", "stop"), "[DONE]"]

    def on_next(_x: str) -> None:
        raise ValueError("the subscriber broke")

    errors: list[Exception] = []
    done = threading.Event()
    OpenAIBackend(url).completions("x").subscribe(on_next, lambda e: (errors.append(e), done.set()))
    assert done.wait(5)
    assert "the subscriber broke" in str(errors[0]) and "malformed" not in str(errors[0])
    assert getattr(errors[0], "event", None) is None
