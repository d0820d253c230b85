"""A request that cannot be served, as an OpenAI-style error (:class:`RequestError`)."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from ..text import HoldLimitError, RegexBudgetError

__all__ = ["RequestError", "generation_error"]


class RequestError(Exception):
    """A request that cannot be served: becomes an OpenAI-style error body with ``status``."""

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        status: int = 400,
        kind: str = "invalid_request_error",
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status
        self.kind = kind
        self.code = code

    def body(self) -> dict[str, Any]:
        """The OpenAI-style error object: ``{"error": {"message", "type", "param", "code"}}``."""
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        """The error as a JSON response."""
        return JSONResponse(self.body(), status_code=self.status)


def generation_error(exc: BaseException) -> RequestError:
    """What a failure during a generation tells the client: the request's own rules asked too
    much (a 400 naming ``rxstream``: a regex budget or a hold limit with ``on_hold_limit="error"``),
    else the server failed (500)."""
    if isinstance(exc, RegexBudgetError | HoldLimitError):
        return RequestError(f"the request's rules: {exc}", param="rxstream", code="rules_too_costly")
    return RequestError(f"generation failed: {exc}", status=500, kind="server_error")
