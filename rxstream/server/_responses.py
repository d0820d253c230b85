"""The OpenAI response shapes: chunks, usage, finish reasons; a request's whole text or its
stream of server-sent events."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from .._finish import Finish, FinishReason
from ..text import RegexStop
from ._generation import Generation
from ._sse import sse

__all__ = [
    "chunk_base",
    "collect",
    "completion_body",
    "error_event",
    "finish_fields",
    "stream_events",
    "usage",
]


def finish_fields(finish: Finish | None) -> tuple[str | None, str | int | None]:
    """OpenAI's ``finish_reason`` and vLLM's ``stop_reason`` for how a generation ended.

    A regular-expression stop gives the text it matched as ``stop_reason``.
    """
    if finish is None:
        return "stop", None
    if finish.reason is FinishReason.STOP:
        stop = finish.stop
        return "stop", stop.text if isinstance(stop, RegexStop) else stop
    return finish.openai_reason, None


def chunk_base(kind: str, rid: str, created: int, model: str) -> dict[str, Any]:
    """The fields every response object starts with."""
    return {"id": rid, "object": kind, "created": created, "model": model}


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """The ``usage`` object."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def error_event(exc: BaseException) -> dict[str, Any]:
    """A failure during a stream, as the ``{"error": ...}`` event OpenAI's clients understand."""
    return {
        "error": {"message": f"generation failed: {exc}", "type": "server_error", "param": None, "code": None}
    }


async def collect(gen: Generation) -> tuple[Exception | None, str]:
    """The whole text of a generation, or the exception that ended it."""
    parts: list[str] = []
    try:
        async with contextlib.aclosing(gen.texts()) as texts:
            async for delta in texts:
                parts.append(delta)
    except Exception as exc:
        return exc, ""
    return None, "".join(parts)


def completion_body(gen: Generation, text: str, rid: str, created: int, model_name: str) -> dict[str, Any]:
    """The non-streaming response body (``chat.completion`` or ``text_completion``)."""
    reason, stop_reason = finish_fields(gen.recorder.finish)
    choice: dict[str, Any]
    if gen.request.chat:
        choice = {"index": 0, "message": {"role": "assistant", "content": text}}
        kind = "chat.completion"
    else:
        choice = {"index": 0, "text": text}
        kind = "text_completion"
    choice.update({"logprobs": None, "finish_reason": reason, "stop_reason": stop_reason})
    body = {**chunk_base(kind, rid, created, model_name), "choices": [choice]}
    body["usage"] = usage(len(gen.prompt_ids), gen.tokens)
    return body


class _Chunks:
    """The stream chunks of one response (``chat.completion.chunk`` or ``text_completion``)."""

    def __init__(self, gen: Generation, rid: str, created: int, model_name: str) -> None:
        self.chat = gen.request.chat
        self.include_usage = gen.request.include_usage
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        self.base = chunk_base(kind, rid, created, model_name)

    def __call__(
        self, text: str | None, reason: str | None = None, stop_reason: Any = None, first: bool = False
    ) -> bytes:
        choice: dict[str, Any] = {"index": 0}
        if self.chat:
            delta: dict[str, Any] = {"role": "assistant"} if first else {}
            if text is not None:
                delta["content"] = text
            choice["delta"] = delta
        else:
            choice["text"] = text or ""
        choice.update({"logprobs": None, "finish_reason": reason})
        if reason is not None:
            choice["stop_reason"] = stop_reason
        if self.include_usage:  # OpenAI: "usage": null on all chunks but the last
            return sse({**self.base, "choices": [choice], "usage": None})
        return sse({**self.base, "choices": [choice]})


async def stream_events(gen: Generation, rid: str, created: int, model_name: str) -> AsyncIterator[bytes]:
    """A generation as server-sent events, ending with ``data: [DONE]``."""
    chunk = _Chunks(gen, rid, created, model_name)
    if chunk.chat:
        yield chunk("", first=True)
    try:
        # closed explicitly (not left to the garbage collector) when this generator is closed
        async with contextlib.aclosing(gen.texts()) as texts:
            async for delta in texts:
                yield chunk(delta)
    except Exception as exc:
        yield sse(error_event(exc))
        return
    reason, stop_reason = finish_fields(gen.recorder.finish)
    yield chunk(None if chunk.chat else "", reason, stop_reason)
    if chunk.include_usage:
        yield sse({**chunk.base, "choices": [], "usage": usage(len(gen.prompt_ids), gen.tokens)})
    yield sse("[DONE]")
