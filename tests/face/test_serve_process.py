"""The real ``rxstream serve`` command under hostile and careless clients (loopback only, bounded).

Each test starts the installed console script in a child process, so it runs with the signal
dispositions, logging and uvicorn setup that users get.
"""

from __future__ import annotations

import json
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rxstream.backends import build_tiny_model
from tests.serve_process import RXSTREAM, ServeProcess, http_request, post_json, serve_process

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(signal, "SIGPIPE"), reason="POSIX signals"),
]


@pytest.fixture(scope="module")
def server(tiny_dir: Path) -> Iterator[ServeProcess]:
    with serve_process(tiny_dir, "--max-concurrency", "16", "--header-timeout", "2") as sp:
        yield sp


def _request(path: str, payload: dict[str, object]) -> bytes:
    body = json.dumps(payload).encode()
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


STREAM = {"prompt": "hello", "max_tokens": 500, "stream": True, "temperature": 0}
"""Greedy decoding of the tiny model runs the whole budget: a long stream to walk away from."""


def _read_a_little_and_close(address: tuple[str, int], rng: random.Random) -> None:
    """Read part of a stream, drain what arrived (so close() sends FIN, not RST) and go away:
    the server's next writes meet a closed socket (EPIPE)."""
    with socket.create_connection(address, timeout=20) as sock:
        sock.sendall(_request("/v1/completions", STREAM))
        got, want = 0, rng.choice([200, 600, 1500, 4000])
        while got < want:
            data = sock.recv(65536)
            if not data:
                break
            got += len(data)
        sock.setblocking(False)
        try:
            while sock.recv(65536):
                pass
        except BlockingIOError:
            pass


def _assert_healthy(sp: ServeProcess) -> None:
    assert sp.proc.poll() is None, f"the server died (exit {sp.proc.returncode}):\n{sp.text()[-3000:]}"
    health = sp.wait_idle()
    assert health["active"] == 0 and health["waiting"] == 0, health
    log = sp.text()
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]


def test_disconnect_storm_does_not_kill_the_server(server: ServeProcess) -> None:
    """Rounds of 16 concurrent streaming clients that read a little and leave (this killed the
    process with SIGPIPE in its first rounds when the command restored SIGPIPE's default action)."""
    rng = random.Random(8)
    for _ in range(4):
        threads = [
            threading.Thread(
                target=_read_a_little_and_close, args=(server.address, random.Random(rng.random()))
            )
            for _ in range(16)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert server.proc.poll() is None, f"died with exit {server.proc.returncode}"
    _assert_healthy(server)
    status, body = post_json(server.address, "/v1/completions", {"prompt": "hi", "max_tokens": 3})
    assert status == 200 and body["usage"]["completion_tokens"] >= 1


def _churn_client(address: tuple[str, int], rng: random.Random, results: list[str]) -> None:
    kind = rng.choice(["full", "early", "reset", "before-body", "non-stream-leave", "chat-full"])
    try:
        if kind == "full":
            status, body = post_json(address, "/v1/completions", {"prompt": "once", "max_tokens": 40})
            assert status == 200, body
        elif kind == "chat-full":
            payload = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 30, "stream": True}
            status, _, raw = http_request(
                address,
                "POST",
                "/v1/chat/completions",
                json.dumps(payload).encode(),
                headers=[("Content-Type", "application/json")],
                timeout=60,
            )
            assert status == 200 and raw.rstrip().endswith(b"data: [DONE]"), raw[-200:]
        else:
            with socket.create_connection(address, timeout=20) as sock:
                payload = dict(STREAM, max_tokens=rng.randrange(50, 500))
                if kind == "non-stream-leave":
                    payload["stream"] = False
                request = _request("/v1/completions", payload)
                if kind == "before-body":
                    sock.sendall(request[: rng.randrange(10, len(request) - 1)])
                    time.sleep(rng.random() * 0.2)
                    results.append(kind)
                    return
                sock.sendall(request)
                time.sleep(rng.random() * 0.3)
                if kind == "reset":  # abortive close: RST
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                elif kind == "early":
                    sock.recv(rng.choice([1, 500, 5000]))
        results.append(kind)
    except Exception as exc:  # reported by the test
        results.append(f"{kind}: {type(exc).__name__}: {exc}")


def test_client_churn_with_random_disconnects(server: ServeProcess) -> None:
    """32 clients at once: some finish, others leave at random points, and all of it again."""
    rng = random.Random(32)
    for _ in range(2):
        results: list[str] = []
        threads = [
            threading.Thread(
                target=_churn_client, args=(server.address, random.Random(rng.random()), results)
            )
            for _ in range(32)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        failures = [r for r in results if ":" in r]
        assert len(results) == 32 and not failures, failures
        assert server.proc.poll() is None
    _assert_healthy(server)


def test_a_thousand_idle_connections_do_not_exhaust_the_server(server: ServeProcess) -> None:
    socks: list[socket.socket] = []
    try:
        for _ in range(1000):
            socks.append(socket.create_connection(server.address, timeout=10))
        socks[0].sendall(b"GET /he")  # and one that trickles
        assert server.health()["status"] == "ok"  # served while they are all open
        deadline = time.monotonic() + 15  # the header timeout (2 s) closes every one of them
        open_ = list(socks)
        while open_ and time.monotonic() < deadline:
            still = []
            for s in open_:
                s.setblocking(False)
                try:
                    if s.recv(1) == b"":
                        continue
                except (BlockingIOError, InterruptedError):
                    still.append(s)
                    continue
                except ConnectionResetError:
                    continue
            open_ = still
            time.sleep(0.1)
        assert not open_, f"{len(open_)} idle connections still open"
    finally:
        for s in socks:
            s.close()
    _assert_healthy(server)


def test_connection_cap_answers_503_until_idle_connections_time_out(tiny_dir: Path) -> None:
    with serve_process(tiny_dir, "--max-connections", "20", "--header-timeout", "1") as sp:
        socks = [socket.create_connection(sp.address, timeout=10) for _ in range(25)]
        try:
            status, _, _ = http_request(sp.address, "GET", "/health")
            assert status == 503
            time.sleep(2.5)
            assert sp.health()["status"] == "ok"
        finally:
            for s in socks:
                s.close()
        assert sp.proc.poll() is None


def test_ctrl_c_ends_streams_and_exits_130_with_one_line(tiny_dir: Path) -> None:
    """SIGINT with a long stream open: the generation is cancelled, the process exits with 130
    within a few seconds, and prints no traceback."""
    with serve_process(tiny_dir) as sp:
        sock = socket.create_connection(sp.address, timeout=20)
        sock.sendall(_request("/v1/completions", STREAM))
        assert sock.recv(100).startswith(b"HTTP/1.1 200")
        start = time.monotonic()
        sp.proc.send_signal(signal.SIGINT)
        code = sp.proc.wait(15)
        took = time.monotonic() - start
        sock.close()
    assert code == 130, sp.text()[-2000:]
    assert took < 5, took
    log = sp.text()
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log[-2000:]
    assert log.rstrip().splitlines()[-1] == "rxstream serve: interrupted"


def test_sigterm_stops_the_server_quietly(tiny_dir: Path) -> None:
    with serve_process(tiny_dir) as sp:
        sp.proc.send_signal(signal.SIGTERM)
        code = sp.proc.wait(15)
    assert code in (0, 130, -signal.SIGTERM, 128 + signal.SIGTERM), code
    assert "Traceback" not in sp.text(), sp.text()[-2000:]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--model", "nope"], 1, "'nope' is neither a model directory nor a known model"),
        (["--port", "99999"], 2, "--port: must be between 0 and 65535"),
        (["--port", "x"], 2, "--port: not a port number"),
        (["--max-concurrency", "0"], 2, "--max-concurrency must be a positive int"),
        (["--kv-tokens", "0"], 2, "--kv-tokens must be a positive int"),
        (["--prefill-chunk", "-3"], 2, "--prefill-chunk must be a positive int"),
        (["--prefix-cache-mb", "-1"], 2, "--prefix-cache-mb must be 0 or more"),
        (["--draft-tokens", "17"], 2, "--draft-tokens must be from 0 to 16, got 17"),
        (["--draft-tokens", "-1"], 2, "--draft-tokens must be from 0 to 16, got -1"),
        (["--prefix-sharing", "maybe"], 2, "--prefix-sharing: invalid choice"),
        (["--batching", "maybe"], 2, "--batching: invalid choice"),
        (["--header-timeout", "-1"], 2, "--header-timeout must be a positive number of seconds"),
        (["--keepalive-interval", "0"], 2, "--keepalive-interval must be a positive number of seconds"),
        (["--resume-grace", "-1"], 2, "--resume-grace must be 0 or a positive number of seconds"),
        (["--resume-buffer-mb", "0"], 2, "--resume-buffer-mb must be a positive number of MiB"),
        (["--resume-total-mb", "nan"], 2, "--resume-total-mb must be a positive number of MiB"),
        (["--allowed-hosts", "a.org:80"], 1, "--allowed-hosts"),
        (["--provider", "tpu"], 2, "--provider: invalid choice"),
    ],
)
def test_serve_mistakes_get_one_line(args: list[str], code: int, message: str) -> None:
    result = subprocess.run(
        [RXSTREAM, "serve", *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert result.returncode == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rxstream serve: ") and message in lines[0], result.stderr


def test_a_port_in_use_is_one_line_before_the_model_loads(tiny_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [RXSTREAM, "serve", "--port", str(port), "--model", str(tiny_dir / "missing")],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 1
    assert (
        result.stderr.strip() == f"rxstream serve: cannot listen on 127.0.0.1:{port}: Address already in use"
    )


def test_start_up_line_names_model_provider_and_urls(server: ServeProcess) -> None:
    assert any(line.startswith("rxstream serve: sampling defaults: greedy") for line in server.log)
    batching = next(
        line for line in server.log if line.startswith("rxstream serve: batching: on (up to 16 requests")
    )
    assert "prefix sharing on, 128 MB for ended requests' prefixes" in batching
    line = next(line for line in server.log if line.startswith("rxstream serve: ") and "running on" in line)
    assert f"running on {server.url}/" in line and "on cpu" in line
    assert f"chat page: {server.url}/" in line and f"OpenAI API: {server.url}/v1" in line


def test_ctrl_c_ends_open_streams_cleanly_and_at_once(tmp_path: Path) -> None:
    """A client reading a long stream when the server is stopped gets an error event saying so
    (503, ``server_shutdown``: the answer is incomplete; not a cut connection, and not a
    finished answer), within a second or so, and the generation stops."""
    long_dir = build_tiny_model(tmp_path / "long", max_position_embeddings=8192)
    with serve_process(long_dir) as sp:
        sock = socket.create_connection(sp.address, timeout=30)
        sock.sendall(_request("/v1/completions", dict(STREAM, max_tokens=2000)))
        data = b""
        while data.count(b"data: ") < 5:
            data += sock.recv(65536)
        start = time.monotonic()
        sp.proc.send_signal(signal.SIGINT)
        # the body is chunked: the last event may arrive with the terminating "0" chunk in one read
        while b"server_shutdown" not in data or not data.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        ended = time.monotonic() - start
        sock.close()
        code = sp.proc.wait(15)
    assert ended < 1.5, ended
    events = [json.loads(line[6:]) for line in data.decode().splitlines() if line.startswith("data: {")]
    assert events[-1]["error"]["code"] == "server_shutdown", events[-1]  # the last event
    assert "shutting down" in events[-1]["error"]["message"]
    assert all(e["choices"][0]["finish_reason"] is None for e in events[:-1])  # never a finish
    assert b"[DONE]" not in data
    assert sum(1 for _ in events) < 2000
    assert code == 130


def test_binds_loopback_by_default(server: ServeProcess) -> None:
    """Started without --host, the server listens on 127.0.0.1 only (not reachable from other
    machines); the README says how to expose it."""
    from rxstream.cli import build_parser

    assert build_parser().parse_args(["serve"]).host == "127.0.0.1"
    assert server.url.startswith("http://127.0.0.1:")
