"""Streamed POSTs over plain HTTP/1.1 on an event loop (:class:`WirePool`): what a gateway holding
hundreds of streams needs per chunk (one ``data_received``, the chunked framing undone in place,
the bytes handed on synchronously) and no more; keep-alive connections per host, a read timeout,
a pause while the reader is behind, and an abort that closes the socket at once.

Only ``http://`` URLs without a proxy take this path (engines next to a gateway); ``https://``,
proxies and custom transports go through httpx (:meth:`StreamRequest.arun`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

__all__ = ["WireConnection", "WireError", "WirePool", "wire_target"]

_MAX_HEAD = 64 * 1024
"""The most bytes of a response's status line and headers."""

_DRAIN = 1.0
"""Seconds a connection may take to end a body its reader no longer needs, to be reused."""

_MAX_IDLE = 64
"""Idle keep-alive connections kept per host."""


class WireError(Exception):
    """The connection failed, broke, timed out, or the response was not HTTP/1.1 we can read;
    ``kind`` names which as httpx does (``ConnectError``, ``ReadTimeout``,
    ``RemoteProtocolError``), and leads the message."""

    def __init__(self, message: str, kind: str = "RemoteProtocolError") -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def wire_target(url: str) -> tuple[str, int, str] | None:
    """``(host, port, path)`` of a plain ``http://`` URL, else None (another scheme)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return None
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return parts.hostname, parts.port or 80, path


class WireConnection(asyncio.Protocol):
    """One HTTP/1.1 connection: one request at a time, its response read as it arrives."""

    def __init__(self, pool: WirePool, key: tuple[str, int]) -> None:
        self.pool = pool
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.reused = False
        self.lost: BaseException | None = None
        self._buf = bytearray()
        self._head: asyncio.Future[tuple[int, dict[str, str]]] | None = None
        self._failure: BaseException | None = None
        self._stopped = False  # the reader needs no more of this body
        self._released = False  # the request is over; the connection waits for its body's end
        self._uses = 0  # requests sent on it
        self._end: asyncio.Future[bool] | None = None
        self._on_data: Callable[[bytes], bool] | None = None
        self._received = False
        self._framing = ""  # "chunked", "length" or "close"
        self._left = 0  # bytes of the current chunk (or of the body) still to come
        self._chunk_state = "size"  # "size", "data", "crlf", "trailer"
        self._keep = True
        self._done = False
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._ready: Callable[[], bool] | None = None
        self._paused = False

    # -- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionResetError("the engine closed the connection")
        self.pool.forget(self)
        self._cancel_timer()
        if self._done or (self._head is not None and self._head.done() and self._end is None):
            return  # finished, or the reader has not asked for the body yet (read() sees it)
        self._lost_now()

    def _lost_now(self) -> None:
        if self._framing == "close" and self._head is not None and self._head.done():
            self._finish()  # the body ends with the connection
            return
        self._fail(WireError(f"the connection broke: {self.lost}"))

    def data_received(self, data: bytes) -> None:
        self._received = True
        self._last = time.monotonic()
        if self._head is not None and not self._head.done():
            self._buf += data
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > _MAX_HEAD:
                    self._fail(WireError("the response's headers are too long"))
                return
            head, rest = bytes(self._buf[:end]), bytes(self._buf[end + 4 :])
            self._buf.clear()
            try:
                status, headers = self._read_head(head)
            except WireError as exc:
                self._fail(exc)
                return
            self._head.set_result((status, headers))
            if rest:
                self._buf += rest
            return
        if self._on_data is None:
            self._buf += data  # the body's first bytes, before the reader asked for them
            return
        self._body(data)
        self._check_ready()

    # -- the response's framing ----------------------------------------------------------------
    def _read_head(self, head: bytes) -> tuple[int, dict[str, str]]:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise WireError(f"not an HTTP/1.1 response: {lines[0][:80]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        encoding = headers.get("transfer-encoding", "").lower()
        if headers.get("content-encoding", "identity").lower() != "identity":
            raise WireError(f"the response is encoded ({headers['content-encoding']})")
        if "chunked" in encoding:
            self._framing = "chunked"
        elif "content-length" in headers:
            self._framing = "length"
            try:
                self._left = int(headers["content-length"])
            except ValueError:
                raise WireError(f"a bad Content-Length: {headers['content-length']!r}") from None
        else:
            self._framing = "close"
        self._keep = self._framing != "close" and headers.get("connection", "").lower() != "close"
        if parts[0] == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
            self._keep = False
        return int(parts[1]), headers

    def _body(self, data: bytes) -> None:
        if self._done:
            return
        if self._framing == "chunked":
            self._chunked(data)
        elif self._framing == "length":
            piece = data[: self._left]
            self._left -= len(piece)
            if piece:
                self._deliver(piece)
            if self._left <= 0:
                self._finish()
        elif data:
            self._deliver(data)

    def _chunked(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        while not self._done:
            state = self._chunk_state
            if state == "data":
                if not buf:
                    return
                piece = bytes(buf[: self._left])
                del buf[: len(piece)]
                self._left -= len(piece)
                if self._left == 0:
                    self._chunk_state = "crlf"
                self._deliver(piece)
                continue
            end = buf.find(b"\r\n")
            if end < 0:
                if len(buf) > _MAX_HEAD:
                    self._fail(WireError("a chunk's size line is too long"))
                return
            line = bytes(buf[:end])
            del buf[: end + 2]
            if state == "crlf":
                if line:
                    self._fail(WireError("a chunk does not end with CRLF"))
                    return
                self._chunk_state = "size"
            elif state == "size":
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    self._fail(WireError(f"a bad chunk size: {line[:40]!r}"))
                    return
                if size == 0:
                    self._chunk_state = "trailer"
                else:
                    self._left = size
                    self._chunk_state = "data"
            elif not line:  # the blank line after the trailers: the body's end
                self._finish()

    def _deliver(self, piece: bytes) -> bool:
        """Hand ``piece`` on. When the reader needs no more (its stream's last event), its read
        ends there, and the rest of the body (the engine's closing chunk, as a rule) is read and
        dropped, so that the connection can serve the next request."""
        on_data = self._on_data
        if on_data is None or self._stopped or not on_data(piece):
            return False
        self._stopped = True
        if self._end is not None and not self._end.done():
            self._end.set_result(True)
        return False

    def _finish(self) -> None:
        if self._done:
            return
        self._done = True
        self._cancel_timer()
        if self._end is not None and not self._end.done():
            self._end.set_result(False)
        if self._released:
            self._released = False
            self.release()

    def _fail(self, exc: BaseException) -> None:
        if self._done:
            return
        self._done = True
        self._failure = exc
        self._keep = False
        self._cancel_timer()
        for future in (self._head, self._end):
            if future is not None and not future.done():
                future.set_exception(exc)
        self.abort()

    # -- back-pressure and the read timeout ----------------------------------------------------
    def _check_ready(self) -> None:
        ready = self._ready
        if ready is None or self._done or self._paused or ready():
            return
        assert self.transport is not None
        self._paused = True
        self.transport.pause_reading()
        self.pool.loop.call_later(self.pool.pause, self._poll_ready)

    def _poll_ready(self) -> None:
        ready = self._ready
        if self._done or self.transport is None:
            return
        if ready is not None and not ready():
            self.pool.loop.call_later(self.pool.pause, self._poll_ready)
            return
        self._paused = False
        self._last = time.monotonic()  # waiting on the reader is not the engine's silence
        self.transport.resume_reading()

    def _arm_timer(self) -> None:
        self._last = time.monotonic()
        self._timer = self.pool.loop.call_later(self.pool.timeout, self._check_timeout)

    def _check_timeout(self) -> None:
        self._timer = None
        if self._done:
            return
        idle = time.monotonic() - self._last
        if self._paused or idle < self.pool.timeout:
            self._timer = self.pool.loop.call_later(max(0.01, self.pool.timeout - idle), self._check_timeout)
            return
        self._fail(WireError(f"no data from the engine for {self.pool.timeout:g} s", "ReadTimeout"))

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # -- what a request does ---------------------------------------------------------------------
    def send(self, request: bytes) -> asyncio.Future[tuple[int, dict[str, str]]]:
        """Send one request; the future gets the response's status and headers."""
        assert self.transport is not None
        loop = self.pool.loop
        self._head = loop.create_future()
        self._end = None
        self._on_data = None
        self._received = False
        self._done = False
        self._failure = None
        self._stopped = False
        self._released = False
        self._uses += 1
        self._chunk_state = "size"
        self._buf.clear()
        self._arm_timer()
        self.transport.write(request)
        return self._head

    def read(
        self, on_data: Callable[[bytes], bool], ready: Callable[[], bool] | None = None
    ) -> asyncio.Future[bool]:
        """Hand the body's bytes to ``on_data`` as they come (it returns True when it needs no
        more); the future gets True when it stopped the body, False at the body's end."""
        self._end = self.pool.loop.create_future()
        self._on_data = on_data
        self._ready = ready
        if self._failure is not None:
            self._end.set_exception(self._failure)
            return self._end
        early = bytes(self._buf)
        self._buf.clear()
        if self._framing == "length" and self._left == 0:
            self._finish()
        elif early:
            self._body(early)
        if not self._done and self.lost is not None:
            self._lost_now()
        self._check_ready()
        return self._end

    async def read_all(self) -> bytes:
        """The whole body (an error answer's)."""
        parts: list[bytes] = []

        def keep(piece: bytes) -> bool:
            parts.append(piece)
            return sum(map(len, parts)) > _MAX_HEAD

        await self.read(keep)
        return b"".join(parts)

    def release(self) -> None:
        """The request is over: keep the connection for the next one (once the rest of a body
        its reader stopped has come, within ``_DRAIN`` seconds), or close it."""
        if self._done and self._failure is None and self._keep and self.lost is None and not self._paused:
            self._on_data = None
            self._ready = None
            self.pool.put(self)
        elif self._stopped and not self._done and self._keep and self.lost is None:
            self._released = True
            self._ready = None
            if self._paused and self.transport is not None:
                self._paused = False
                self.transport.resume_reading()
            self.pool.loop.call_later(_DRAIN, self._drain_expired, self._uses)
        else:
            self.abort()

    def _drain_expired(self, uses: int) -> None:
        if uses == self._uses and self._released and not self._done:
            self._released = False
            self._done = True
            self.abort()

    def abort(self) -> None:
        self._keep = False
        self._cancel_timer()
        if self.transport is not None:
            self.transport.abort()

    @property
    def received(self) -> bool:
        return self._received


class WirePool:
    """The plain-HTTP connections of one event loop (``headers`` sent with every request)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, headers: Mapping[str, str], timeout: float, pause: float
    ) -> None:
        self.loop = loop
        self.timeout = timeout
        self.pause = pause
        self.headers = "".join(f"{k}: {v}\r\n" for k, v in headers.items() if k.lower() != "accept-encoding")
        self._idle: dict[tuple[str, int], list[WireConnection]] = {}

    def request(self, host: str, port: int, path: str, body: bytes) -> bytes:
        host_header = host if port == 80 else f"{host}:{port}"
        if ":" in host and not host.startswith("["):
            host_header = f"[{host}]" if port == 80 else f"[{host}]:{port}"
        return (
            f"POST {path} HTTP/1.1\r\nHost: {host_header}\r\n{self.headers}"
            f"Accept-Encoding: identity\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode("latin-1") + body

    async def connect(self, host: str, port: int) -> WireConnection:
        """An idle connection to ``host:port``, or a new one."""
        key = (host, port)
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.lost is None and conn.transport is not None and not conn.transport.is_closing():
                conn.reused = True
                return conn
        try:
            _, conn = await asyncio.wait_for(
                self.loop.create_connection(lambda: WireConnection(self, key), host, port), self.timeout
            )
        except (TimeoutError, OSError) as exc:
            what = str(exc) or type(exc).__name__
            raise WireError(f"cannot connect to {host}:{port}: {what}", "ConnectError") from None
        return conn

    def put(self, conn: WireConnection) -> None:
        idle = self._idle.setdefault(conn.key, [])
        if len(idle) >= _MAX_IDLE:
            conn.abort()
            return
        idle.append(conn)

    def forget(self, conn: WireConnection) -> None:
        idle = self._idle.get(conn.key)
        if idle and conn in idle:
            idle.remove(conn)

    def close(self) -> None:
        idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                with contextlib.suppress(Exception):
                    conn.abort()
