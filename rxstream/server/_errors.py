"""A request that cannot be served, as an OpenAI-style error (:class:`RequestError`)."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from ..text import HoldLimitError, RegexBudgetError
from ._shutdown import ServerShutdown

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
    much (a 400 naming ``rxstream``: a regex budget or a hold limit with ``on_hold_limit="error"``);
    an upstream engine (an error with the engine's ``url`` and HTTP ``status``, as the gateway
    raises) refused the request (its 4xx, passed on) or failed (502); the server stopped during it
    (503, :class:`~._shutdown.ServerShutdown`); else the server failed (500)."""
    if isinstance(exc, ServerShutdown):
        return RequestError(str(exc), status=503, kind="server_error", code=exc.code)
    if isinstance(exc, RegexBudgetError | HoldLimitError):
        return RequestError(f"the request's rules: {exc}", param="rxstream", code="rules_too_costly")
    status = getattr(exc, "status", None)
    if isinstance(status, int) and isinstance(getattr(exc, "url", None), str):
        if 400 <= status < 500:
            return RequestError(str(exc), status=status, code="upstream_error")
        return RequestError(str(exc), status=502, kind="server_error", code="upstream_error")
    return RequestError(f"generation failed: {exc}", status=500, kind="server_error")
