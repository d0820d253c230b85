"""A package index on 127.0.0.1 for the pull tests: PEP 691 JSON or PEP 503 HTML project pages and
the files they list, served from a real socket by a thread.

``PackageIndex(files)`` serves ``/simple/<project>/`` (JSON when the request accepts
``application/vnd.pypi.simple.v1+json``, else HTML; ``mode`` forces one) listing every file in
``files`` (name -> path on disk) under ``/files/<name>``. ``fail_next`` answers that many requests
with HTTP 503 first, ``fail_next_file`` that many file requests; ``requests`` records each
request's path and Accept header.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Literal

__all__ = ["PackageIndex"]

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


class PackageIndex:
    def __init__(self, project: str, files: dict[str, Path]) -> None:
        self.project = project
        self.files = files
        self.mode: Literal["auto", "json", "html"] = "auto"
        self.fail_next = 0
        self.fail_next_file = 0
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._digests = {name: _sha256(path) for name, path in files.items()}
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The index URL (what ``PIP_INDEX_URL`` names)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/simple/"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def reset(self) -> None:
        with self._lock:
            self.mode = "auto"
            self.fail_next = 0
            self.fail_next_file = 0
            self.requests.clear()

    def _page(self, accept: str) -> tuple[bytes, str]:
        use_json = self.mode == "json" or (self.mode == "auto" and JSON_TYPE in accept)
        if use_json:
            files = [
                {"filename": name, "url": f"../../files/{name}", "hashes": {"sha256": self._digests[name]}}
                for name in self.files
            ]
            body = {"meta": {"api-version": "1.1"}, "name": self.project, "files": files}
            return json.dumps(body).encode(), JSON_TYPE
        links = "".join(
            f'<a href="/files/{name}#sha256={self._digests[name]}">{name}</a><br/>\n' for name in self.files
        )
        return f"<!DOCTYPE html><html><body>\n{links}</body></html>".encode(), "text/html"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                with index._lock:
                    index.requests.append((self.path, self.headers.get("Accept", "")))
                    failing = index.fail_next > 0
                    if failing:
                        index.fail_next -= 1
                    elif self.path.startswith("/files/") and index.fail_next_file > 0:
                        failing = True
                        index.fail_next_file -= 1
                if failing:
                    self._send(503, b"try again", "text/plain")
                elif self.path.rstrip("/") == f"/simple/{index.project}":
                    body, kind = index._page(self.headers.get("Accept", ""))
                    self._send(200, body, kind)
                elif self.path.startswith("/files/") and self.path[7:] in index.files:
                    self._send_file(index.files[self.path[7:]])
                else:
                    self._send(404, b"not found", "text/plain")

            def _send(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _send_file(self, path: Path) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(os.path.getsize(path)))
                self.end_headers()
                try:
                    with path.open("rb") as f:
                        while chunk := f.read(1 << 16):
                            self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client was killed mid-download (the tests do that on purpose)

        return Handler


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
