"""The error a failed request to an OpenAI-compatible endpoint reports."""

from __future__ import annotations

__all__ = ["OpenAIBackendError"]


class OpenAIBackendError(RuntimeError):
    """A request to an OpenAI-compatible endpoint failed.

    Attributes:
        url: the URL that was requested.
        status: the HTTP status, when the server answered with an error status.
        event: the text of the offending server-sent event, when one was at fault.
    """

    def __init__(
        self, message: str, *, url: str, status: int | None = None, event: str | None = None
    ) -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.event = event


class RemoteError(Exception):
    """An error the server reported in its stream (an error event, a failed response): the
    message is one line."""


def one_line(text: str, limit: int = 1000) -> str:
    """``text`` on one line (runs of whitespace as one space), cut to ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def error_line(error: object) -> str | None:
    """The one-line text of an API's error object: OpenAI's ``{"message", "type", "code"}``
    (also inside ``{"error": ...}``), Anthropic's ``{"type": "error", "error": {"type",
    "message"}}``; None when ``error`` is neither."""
    import json

    if isinstance(error, str):
        try:
            error = json.loads(error)
        except ValueError:
            return None
    if not isinstance(error, dict):
        return None
    if isinstance(error.get("error"), dict):
        error = error["error"]
    if not isinstance(error, dict):
        return None
    message = error.get("message")
    if not isinstance(message, str):
        return None
    kind = error.get("code") or error.get("type")
    if isinstance(kind, str | int) and not isinstance(kind, bool) and kind != "error":
        return one_line(f"{kind}: {message}")
    return one_line(message)
