"""Which ``Host`` headers ``rxstream serve`` answers (a guard against DNS rebinding).

A web page on another site can make the user's browser send requests to a server on the user's
machine; with DNS rebinding (a name that first resolves to the attacker, then to 127.0.0.1) it can
also read the answers. The browser then sends the attacker's name in ``Host``. So the server
answers only requests whose ``Host`` is an IP address, ``localhost`` (or a ``*.localhost``
name), or a name the operator allowed (``--allowed-hosts``); anything else gets a 400.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["HostGuard", "host_allowed", "parse_allowed_hosts"]


def parse_allowed_hosts(values: Iterable[str]) -> tuple[str, ...]:
    """Normalize ``--allowed-hosts`` values (comma-separated names; ``.example.com`` allows its
    subdomains too; ``*`` allows every name).

    Raises:
        ValueError: an empty name or one with a port, path or space in it.
    """
    out: list[str] = []
    for value in values:
        for name in value.split(","):
            name = name.strip().lower()
            if not name or (any(c in name for c in " /:@") and not _is_ip(name.strip("[]"))):
                raise ValueError(f"--allowed-hosts: {name!r} is not a host name (give names without ports)")
            out.append(name.strip("[]"))
    return tuple(out)


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _host_name(header: str) -> str:
    header = header.strip().lower()
    if header.startswith("["):  # [::1]:8000
        return header[1 : header.find("]")] if "]" in header else header
    name, _, port = header.rpartition(":")
    return name if name and port.isdigit() else header


def host_allowed(header: str | None, allowed: Iterable[str] = ()) -> bool:
    """Whether a request with this ``Host`` header is answered (see the module docs)."""
    if header is None:  # HTTP/1.0 without Host: not a browser's request
        return True
    name = _host_name(header).rstrip(".")
    if _is_ip(name) or name == "localhost" or name.endswith(".localhost"):
        return True
    for rule in allowed:
        if (
            rule == "*"
            or name == rule
            or (rule.startswith(".") and (name.endswith(rule) or name == rule[1:]))
        ):
            return True
    return False


class HostGuard:
    """ASGI middleware that answers 400 to HTTP requests whose ``Host`` is not allowed."""

    def __init__(self, app: ASGIApp, allowed: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = tuple(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), None)
            if not host_allowed(host, self.allowed):
                message = (
                    f"Host {host!r} is not allowed; start the server with --allowed-hosts NAME to "
                    "answer requests for that name"
                )
                body = json.dumps(
                    {
                        "error": {
                            "message": message,
                            "type": "invalid_request_error",
                            "param": "Host",
                            "code": None,
                        }
                    }
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 400,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
