"""A request that cannot be served, as an OpenAI-style error (:class:`RequestError`)."""

from __future__ import annotations

from starlette.responses import JSONResponse

__all__ = ["RequestError"]


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

    def response(self) -> JSONResponse:
        """The error as a JSON response."""
        body = {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}
        return JSONResponse(body, status_code=self.status)
