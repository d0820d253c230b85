"""Run the real ``rxstream serve`` command in a child process, for tests (loopback only)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RXSTREAM = str(Path(sys.executable).with_name("rxstream"))
"""The installed console script (the entry point users run), next to this interpreter."""

_URL = re.compile(r"running on (http://[0-9.]+:\d+)/")


@dataclass
class ServeProcess:
    """A running ``rxstream serve``: its process, base URL, host/port and everything it logged."""

    proc: subprocess.Popen[str]
    url: str
    log: list[str] = field(default_factory=list)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        return host, int(port)

    def health(self, timeout: float = 10) -> dict[str, Any]:
        return json.loads(http_request(self.address, "GET", "/health", timeout=timeout)[2])

    def wait_idle(self, timeout: float = 30) -> dict[str, Any]:
        """Wait until no generation is active or waiting; return the last /health."""
        deadline = time.monotonic() + timeout
        while True:
            h = self.health()
            if (h["active"] == 0 and h["waiting"] == 0) or time.monotonic() > deadline:
                return h
            time.sleep(0.05)

    def text(self) -> str:
        return "".join(self.log)


def http_request(
    address: tuple[str, int],
    method: str,
    path: str,
    body: bytes = b"",
    *,
    headers: Sequence[tuple[str, str]] = (),
    timeout: float = 10,
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 request on a fresh connection (Connection: close); returns status, headers, body."""
    host, port = address
    with socket.create_connection(address, timeout=timeout) as sock:
        names = {k.lower() for k, _ in headers}
        lines = [f"{method} {path} HTTP/1.1"]
        if "host" not in names:
            lines.append(f"Host: {host}:{port}")
        lines += [f"{k}: {v}" for k, v in headers]
        lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
        sock.sendall("\r\n".join(lines).encode("latin-1") + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    hdrs = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    if hdrs.get("transfer-encoding") == "chunked":
        out = b""
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                break
            out += rest[:size]
            rest = rest[size + 2 :]
        rest = out
    return int(status_line.split()[1]), hdrs, rest


def post_json(address: tuple[str, int], path: str, payload: Any, timeout: float = 30) -> tuple[int, Any]:
    status, _, body = http_request(
        address,
        "POST",
        path,
        json.dumps(payload).encode(),
        headers=[("Content-Type", "application/json")],
        timeout=timeout,
    )
    return status, json.loads(body) if body else None


@contextmanager
def serve_process(
    model_dir: Path | str, *args: str, env: dict[str, str] | None = None, start_timeout: float = 60
) -> Iterator[ServeProcess]:
    """Start ``rxstream serve --model model_dir --port 0 ...``; stop it (SIGINT, then SIGKILL) on exit."""
    cmd = [RXSTREAM, "serve", "--model", str(model_dir), "--port", "0", "--provider", "cpu", *args]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    assert proc.stdout is not None
    sp = ServeProcess(proc, "")
    found = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            sp.log.append(line)
            m = _URL.search(line)
            if m and not found.is_set():
                sp.url = m.group(1)
                found.set()
        found.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if not found.wait(start_timeout) or not sp.url:
            raise RuntimeError(f"rxstream serve did not start:\n{sp.text()}")
        yield sp
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        reader.join(5)
