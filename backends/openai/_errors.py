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
