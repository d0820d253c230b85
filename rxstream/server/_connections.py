"""Connection guards for ``rxstream serve``: header and send timeouts, a connection cap.

uvicorn closes a keep-alive connection that stays idle between requests, but not one that sends
nothing at all, trickles its request headers, or stops reading a response: each of those would
hold a socket (and, while streaming, a generation slot) forever. :func:`guarded_protocol` makes an
HTTP protocol class for uvicorn that closes such connections, and :func:`uvicorn_config` builds
the uvicorn configuration that uses it together with the connection cap and keep-alive timeout
of :class:`~rxstream.server.ServerLimits`.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from ._limits import ServerLimits

if TYPE_CHECKING:
    import uvicorn

__all__ = ["guarded_protocol", "raise_open_files_limit", "uvicorn_config"]


class _GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol that closes connections which send no request or read no response.

    * ``header_timeout``: a request's headers must be complete this many seconds after the
      connection opens, or after the previous response on a keep-alive connection ended.
    * ``send_timeout``: while the client reads nothing (the socket's send buffer stays full),
      the connection is aborted after this many seconds; the application sees a disconnect, so
      a streaming generation is cancelled as when the client leaves.
    """

    header_timeout: float = 10.0
    send_timeout: float = 60.0

    _header_timer: asyncio.TimerHandle | None = None
    _header_cycle: Any = None
    _send_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_cycle = self.cycle
        self._header_timer = self.loop.call_later(self.header_timeout, self._header_timeout_expired)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timeout_expired(self) -> None:
        self._header_timer = None
        idle = self.cycle is self._header_cycle and (self.cycle is None or self.cycle.response_complete)
        if idle and not self.transport.is_closing():
            self.transport.abort()

    def handle_events(self) -> None:
        super().handle_events()
        if self._header_timer is not None and self.cycle is not self._header_cycle:
            self._cancel_header_timer()  # a request's headers arrived

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._arm_header_timer()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_timer is None:
            self._send_timer = self.loop.call_later(self.send_timeout, self._send_timeout_expired)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def _send_timeout_expired(self) -> None:
        self._send_timer = None
        self.transport.abort()  # close() would wait for the unread buffer to drain

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None
        super().connection_lost(exc)


def guarded_protocol(limits: ServerLimits) -> type[asyncio.Protocol]:
    """An HTTP protocol class for uvicorn with ``limits``' header and send timeouts."""
    return type(
        "GuardedH11Protocol",
        (_GuardedH11Protocol,),
        {"header_timeout": limits.header_timeout, "send_timeout": limits.send_timeout},
    )


def raise_open_files_limit(connections: int) -> None:
    """Raise this process's soft limit on open files so that ``connections`` sockets fit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + 256  # the model, the log, the listening socket, threads...
    if soft != resource.RLIM_INFINITY and soft < wanted:
        new = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))


def uvicorn_config(app: Any, *, limits: ServerLimits, **kwargs: Any) -> uvicorn.Config:
    """A uvicorn configuration for ``app`` that enforces ``limits``' connection guards.

    ``max_connections`` caps open connections (uvicorn answers further requests with 503),
    ``idle_timeout`` closes a keep-alive connection with no new request, and the guarded
    protocol applies the header and send timeouts. ``kwargs`` go to :class:`uvicorn.Config`.
    """
    import uvicorn

    return uvicorn.Config(
        app,
        http=guarded_protocol(limits),
        limit_concurrency=limits.max_connections,
        timeout_keep_alive=max(1, round(limits.idle_timeout)),
        **kwargs,
    )
