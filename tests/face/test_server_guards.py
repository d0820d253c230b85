"""The server's guards: JSON-only POSTs, allowed Host names (DNS rebinding), and timeouts for
connections that send nothing, trickle a request, or read no response."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest
import reactivex

from rxstream.backends import OnnxModel
from rxstream.server import ServerLimits, create_app, run_in_thread
from rxstream.server._connections import guarded_protocol
from rxstream.server._hosts import host_allowed, parse_allowed_hosts
from tests.serve_process import http_request

LIMITS = ServerLimits(header_timeout=0.5, body_timeout=0.5, send_timeout=0.5, idle_timeout=1)


@pytest.fixture(scope="module")
def server(model: OnnxModel) -> Iterator[tuple[tuple[str, int], Any]]:
    app = create_app(model, model_name="tiny", limits=LIMITS, allowed_hosts=["box.lan", ".corp.example"])
    with run_in_thread(app) as url:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        yield (host, int(port)), app


def _post(address: tuple[str, int], body: bytes, headers: list[tuple[str, str]]) -> tuple[int, Any]:
    status, _, raw = http_request(address, "POST", "/v1/completions", body, headers=headers)
    return status, json.loads(raw) if raw else None


BODY = json.dumps({"prompt": "hi", "max_tokens": 2}).encode()


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
def test_posts_must_be_json(server: tuple[tuple[str, int], Any], content_type: str | None) -> None:
    """A page on another site can POST these without a CORS preflight: they must start nothing."""
    address, app = server
    started = app.state.stats.snapshot()["started"]
    headers = [("Content-Type", content_type)] if content_type else []
    status, body = _post(address, BODY, headers)
    assert status == 415, body
    assert "application/json" in body["error"]["message"]
    assert app.state.stats.snapshot()["started"] == started
    ok, _ = _post(address, BODY, [("Content-Type", "application/json; charset=utf-8")])
    assert ok == 200


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:8000", True),
        ("127.0.0.1", True),
        ("[::1]:8000", True),
        ("localhost:8000", True),
        ("LOCALHOST", True),
        ("app.localhost:1", True),
        ("10.1.2.3", True),
        ("box.lan:8000", True),
        ("box.lan.", True),
        ("a.corp.example", True),
        ("corp.example", True),
        ("evil.example", False),
        ("evil.example:8000", False),
        ("box.lan.evil.example", False),
        ("localhost.evil.example", False),
        ("", False),
    ],
)
def test_host_header_guard(server: tuple[tuple[str, int], Any], host: str, allowed: bool) -> None:
    address, app = server
    started = app.state.stats.snapshot()["started"]
    status, body = _post(address, BODY, [("Host", host), ("Content-Type", "application/json")])
    if allowed:
        assert status == 200, body
    else:
        assert status == 400 and body["error"]["param"] == "Host", body
        assert "--allowed-hosts" in body["error"]["message"]
        assert app.state.stats.snapshot()["started"] == started
        status, _, _ = http_request(address, "GET", "/health", headers=[("Host", host)])
        assert status == 400


def test_allowed_hosts_rules() -> None:
    assert not host_allowed("example.com")
    assert host_allowed("example.com", parse_allowed_hosts(["*"]))
    assert host_allowed("x.example.com", parse_allowed_hosts(["a.org, .example.com"]))
    assert host_allowed(None)  # HTTP/1.0 without Host: no browser sends that
    for bad in ["", "a.org:80", "http://a.org", "a b"]:
        with pytest.raises(ValueError, match="--allowed-hosts"):
            parse_allowed_hosts([bad])


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        while True:
            if not sock.recv(4096):
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_connection_that_sends_nothing_is_closed(server: tuple[tuple[str, int], Any]) -> None:
    address, _ = server
    with socket.create_connection(address) as sock:
        start = time.monotonic()
        assert _closed_by_server(sock, 5)
        assert time.monotonic() - start < 3


def test_trickled_headers_are_cut_off(server: tuple[tuple[str, int], Any]) -> None:
    address, _ = server
    with socket.create_connection(address) as sock:
        start = time.monotonic()
        sock.sendall(b"GET /health HTTP/1.1\r\n")
        closed = False
        while time.monotonic() - start < 5:
            try:
                sock.sendall(b"X: y\r\n")
            except OSError:
                closed = True
                break
            if _closed_by_server(sock, 0.1):
                closed = True
                break
        assert closed and time.monotonic() - start < 3


def test_keep_alive_connection_is_guarded_after_its_first_response(
    server: tuple[tuple[str, int], Any],
) -> None:
    address, _ = server
    with socket.create_connection(address) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        sock.settimeout(5)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        start = time.monotonic()
        sock.sendall(b"GET /health HTTP/1.1\r\n")  # a second request that never completes
        assert _closed_by_server(sock, 5)
        assert time.monotonic() - start < 3


def test_trickled_body_gets_408(server: tuple[tuple[str, int], Any]) -> None:
    address, app = server
    started = app.state.stats.snapshot()["started"]
    with socket.create_connection(address) as sock:
        sock.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{"
        )
        sock.settimeout(5)
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
    assert data.startswith(b"HTTP/1.1 408"), data
    assert app.state.stats.snapshot()["started"] == started


def test_a_client_that_reads_nothing_is_cut_off_and_its_generation_cancelled(model: OnnxModel) -> None:
    # no grace period: once the stuck client is cut off, nobody may resume its stream
    limits = ServerLimits(send_timeout=0.5, max_tokens=100_000, resume_grace=0)
    app = create_app(model, model_name="tiny", limits=limits)

    class Endless:  # the tiny model's tokenizer over a source that never ends by itself
        def __getattr__(self, name: str) -> Any:
            return getattr(model, name)

        def generate(self, prompt_ids: list[int], **kw: Any) -> Any:
            ids = model.encode(" and so on, and so forth")
            return reactivex.from_iterable(itertools.cycle(ids), scheduler=kw["scheduler"])

    app = create_app(Endless(), model_name="tiny", limits=limits)
    with run_in_thread(app) as url:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, int(port)))
        body = json.dumps({"prompt": "hi", "max_tokens": 100, "stream": True}).encode()
        sock.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body
        )
        deadline = time.monotonic() + 60
        stats = app.state.stats
        while stats.snapshot()["started"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        while stats.snapshot()["active"] and time.monotonic() < deadline:
            time.sleep(0.1)
        snap = stats.snapshot()
        sock.close()
    assert snap["started"] == 1 and snap["active"] == 0, snap
    assert snap["finished"] == {"cancelled": 1}


def test_send_timer_aborts_only_while_writing_is_paused() -> None:
    """The guard's timers, driven by hand on a real event loop."""
    limits = ServerLimits(header_timeout=0.05, send_timeout=0.05)
    protocol_class = guarded_protocol(limits)
    loop = asyncio.new_event_loop()
    try:

        async def app(_scope: Any, _receive: Any, _send: Any) -> None:  # a response still being written
            await asyncio.sleep(3600)

        config = mock.MagicMock(
            loaded=True,
            loaded_app=app,
            h11_max_incomplete_event_size=None,
            limit_concurrency=None,
            timeout_keep_alive=5.0,
        )
        state = mock.MagicMock(connections=set(), tasks=set())
        proto: Any = protocol_class(config, state, {}, _loop=loop)  # type: ignore[call-arg]
        transport = mock.MagicMock()
        transport.is_closing.return_value = False
        transport.get_extra_info.return_value = None
        proto.connection_made(transport)
        proto.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # headers complete: no header timeout
        proto.pause_writing()
        proto.resume_writing()
        loop.run_until_complete(asyncio.sleep(0.15))
        assert not transport.abort.called
        proto.pause_writing()
        loop.run_until_complete(asyncio.sleep(0.15))
        assert transport.abort.called
    finally:
        proto.connection_lost(None)  # the app's task ends: its client is gone
        for task in state.tasks:
            task.cancel()
        loop.run_until_complete(asyncio.wait_for(asyncio.gather(*state.tasks, return_exceptions=True), 5))
        loop.close()


def test_limits_are_checked() -> None:
    for bad in [0, -1, float("nan"), float("inf"), True, "5"]:
        with pytest.raises(ValueError, match="header_timeout"):
            ServerLimits(header_timeout=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_connections"):
        ServerLimits(max_connections=0)


def test_page_is_unaffected(server: tuple[tuple[str, int], Any], tmp_path: Path) -> None:
    address, _ = server
    r = httpx.get(f"http://{address[0]}:{address[1]}/")
    assert r.status_code == 200 and "<html" in r.text.lower()
