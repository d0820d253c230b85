"""The OpenAI response shapes: chunks, usage, finish reasons; a request's whole text or its
stream of server-sent events."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from .._finish import Finish, FinishReason
from ..text import RegexStop
from ._channels import TextDelta
from ._generation import Generation
from ._sse import sse

__all__ = [
    "ChatOutput",
    "chat_finish",
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


class ChatOutput:
    """What a routed chat generation produced, item by item: answer and reasoning text, tool calls
    (numbered 0, 1, ... in the order they start, as OpenAI numbers them), invalid tool calls.

    :meth:`add` returns the ``delta`` (and choice extension) a stream chunk carries for an item;
    :meth:`message` is the non-streaming ``message``.
    """

    def __init__(self, reasoning: bool) -> None:
        self.reasoning = reasoning
        self.content: list[str] = []
        self.thoughts: list[str] = []
        self.calls: list[dict[str, Any]] = []  # started calls, in order
        self.valid: set[int] = set()  # positions in self.calls of the calls that ended valid
        self.invalid: list[dict[str, Any]] = []
        self._position: dict[int, int] = {}  # the parser's call index -> position in self.calls

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The complete, valid tool calls, in OpenAI's message format."""
        return [c for k, c in enumerate(self.calls) if k in self.valid]

    def add(self, item: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """Record ``item``; return ``(delta, extension)`` for a stream chunk (None: no chunk)."""
        if isinstance(item, TextDelta):
            if item.kind == "content":
                self.content.append(item.text)
                return {"content": item.text}, None
            self.thoughts.append(item.text)
            return {"reasoning_content": item.text}, None
        from rxstream.channels import ToolCallDelta, ToolCallEnd, ToolCallInvalid, ToolCallStart

        if isinstance(item, ToolCallStart):
            k = self._position[item.index] = len(self.calls)
            self.calls.append(
                {"id": item.id, "type": "function", "function": {"name": item.name, "arguments": ""}}
            )
            first = {
                "index": k,
                "id": item.id,
                "type": "function",
                "function": {"name": item.name, "arguments": ""},
            }
            return {"tool_calls": [first]}, None
        if isinstance(item, ToolCallDelta):
            k = self._position[item.index]
            self.calls[k]["function"]["arguments"] += item.text
            return {"tool_calls": [{"index": k, "function": {"arguments": item.text}}]}, None
        if isinstance(item, ToolCallEnd):
            k = self._position[item.index]
            self.valid.add(k)
            # the deltas' concatenation is the arguments text; the final text is authoritative
            self.calls[k]["function"]["arguments"] = item.arguments_text
            return None, None
        if isinstance(item, ToolCallInvalid):
            report = {
                "index": self._position.get(item.index),
                "error": item.error,
                "position": item.position,
                "raw": item.raw,
            }
            self.invalid.append(report)
            return None, {"invalid_tool_calls": [report]}
        return None, None

    def message(self) -> dict[str, Any]:
        """The non-streaming ``message`` (``content`` null when empty; ``reasoning_content`` when
        the model's format has reasoning; ``tool_calls`` when it made any)."""
        text = "".join(self.content)
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.thoughts) or None
        calls = self.tool_calls
        if calls:
            message["tool_calls"] = calls
        return message

    def extension(self) -> dict[str, Any] | None:
        """The choice's ``rxstream`` extension (invalid tool calls), or None."""
        return {"invalid_tool_calls": self.invalid} if self.invalid else None


def chat_finish(gen: Generation, output: ChatOutput | None) -> tuple[str | None, str | int | None]:
    """``finish_reason`` and ``stop_reason``: ``tool_calls`` when the model made a valid tool call
    and the generation was not cut by its budget (or failed)."""
    reason, stop_reason = finish_fields(gen.recorder.finish)
    if output is not None and output.valid and reason not in ("length", "error"):
        return "tool_calls", None
    return reason, stop_reason


async def collect(gen: Generation) -> tuple[Exception | None, str | ChatOutput]:
    """The whole output of a generation (text, or a routed chat's :class:`ChatOutput`), or the
    exception that ended it."""
    parts: list[str] = []
    output = ChatOutput(gen.plan.has_reasoning) if gen.routed else None
    try:
        async with contextlib.aclosing(gen.items()) as items:
            async for item in items:
                if output is not None:
                    output.add(item)
                else:
                    parts.append(item)
    except Exception as exc:
        return exc, ""
    return None, output if output is not None else "".join(parts)


def completion_body(
    gen: Generation, output: str | ChatOutput, rid: str, created: int, model_name: str
) -> dict[str, Any]:
    """The non-streaming response body (``chat.completion`` or ``text_completion``)."""
    chat_output = output if isinstance(output, ChatOutput) else None
    reason, stop_reason = chat_finish(gen, chat_output)
    choice: dict[str, Any]
    if chat_output is not None:
        choice = {"index": 0, "message": chat_output.message()}
        kind = "chat.completion"
        extension = chat_output.extension()
        if extension is not None:
            choice["rxstream"] = extension
    elif gen.request.chat:
        choice = {"index": 0, "message": {"role": "assistant", "content": output}}
        kind = "chat.completion"
    else:
        choice = {"index": 0, "text": output}
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
        self,
        text: str | None,
        reason: str | None = None,
        stop_reason: Any = None,
        first: bool = False,
        *,
        delta: dict[str, Any] | None = None,
        extension: dict[str, Any] | None = None,
    ) -> bytes:
        choice: dict[str, Any] = {"index": 0}
        if self.chat:
            out: dict[str, Any] = {"role": "assistant"} if first else {}
            if text is not None:
                out["content"] = text
            if delta is not None:
                out.update(delta)
            choice["delta"] = out
        else:
            choice["text"] = text or ""
        choice.update({"logprobs": None, "finish_reason": reason})
        if reason is not None:
            choice["stop_reason"] = stop_reason
        if extension is not None:
            choice["rxstream"] = extension
        if self.include_usage:  # OpenAI: "usage": null on all chunks but the last
            return sse({**self.base, "choices": [choice], "usage": None})
        return sse({**self.base, "choices": [choice]})


async def stream_events(gen: Generation, rid: str, created: int, model_name: str) -> AsyncIterator[bytes]:
    """A generation as server-sent events, ending with ``data: [DONE]``."""
    chunk = _Chunks(gen, rid, created, model_name)
    output = ChatOutput(gen.plan.has_reasoning) if gen.routed else None
    if chunk.chat:
        yield chunk("", first=True)
    try:
        # closed explicitly (not left to the garbage collector) when this generator is closed
        async with contextlib.aclosing(gen.items()) as items:
            async for item in items:
                if output is None:
                    yield chunk(item)
                    continue
                delta, extension = output.add(item)
                if delta is not None or extension is not None:
                    yield chunk(None, delta=delta or {}, extension=extension)
    except Exception as exc:
        yield sse(error_event(exc))
        return
    reason, stop_reason = chat_finish(gen, output)
    yield chunk(None if chunk.chat else "", reason, stop_reason)
    if chunk.include_usage:
        yield sse({**chunk.base, "choices": [], "usage": usage(len(gen.prompt_ids), gen.tokens)})
    yield sse("[DONE]")
