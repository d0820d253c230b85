"""The OpenAI response shapes: chunks, usage, finish reasons, log-probabilities; a request's
choices as one body or as a stream of server-sent events (choices interleaved, keep-alive
comments while it is silent)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._piece import Piece
from ._choice_events import merged
from ._generation import Generation
from ._logprobs import TokenNames
from ._response_shapes import (
    KEEPALIVE,
    ChatOutput,
    _chat_output,
    _cut,
    _logprobs_of,
    chat_finish,
    chunk_base,
    error_event,
    finish_fields,
    total_usage,
    usage,
)
from ._response_stream import stream_events

__all__ = [
    "KEEPALIVE",
    "ChatOutput",
    "ChoiceResult",
    "chat_finish",
    "chunk_base",
    "collect",
    "completion_body",
    "error_event",
    "finish_fields",
    "stream_events",
    "total_usage",
    "usage",
]


@dataclass
class ChoiceResult:
    """What one choice of a non-streamed request produced: its text (or a routed chat's
    :class:`ChatOutput`) and its share of log-probabilities per item."""

    gen: Generation
    output: ChatOutput | None = None
    parts: list[str] = field(default_factory=list)
    logprobs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.parts)


async def collect(
    gens: Sequence[Generation], names: TokenNames | None = None
) -> tuple[Exception | None, list[ChoiceResult]]:
    """Every choice's whole output (text or :class:`ChatOutput`, and log-probabilities), or the
    first exception that ended one (the others are then cancelled)."""
    results = [ChoiceResult(g, _chat_output(g, names)) for g in gens]
    shapes = [_logprobs_of(g, names) for g in gens]
    try:
        async with contextlib.aclosing(merged(gens, None)) as events:
            async for kind, i, value in events:
                if kind == "error":
                    return value, []
                if kind != "item":
                    continue
                result = results[i]
                if result.output is not None:
                    result.output.add(value)
                    continue
                result.parts.append(value.text if isinstance(value, Piece) else value)
                shape = shapes[i]
                if shape is not None and isinstance(value, Piece):
                    result.logprobs.append(shape.of(value))
    except Exception as exc:
        return exc, []
    for result, shape in zip(results, shapes, strict=True):
        if result.output is not None:
            result.output.finish(_cut(result.gen))
        elif shape is not None:
            tail = shape.finish(_cut(result.gen))
            if tail is not None:
                result.logprobs.append(tail)
    return None, results


def completion_body(
    results: Sequence[ChoiceResult], rid: str, created: int, model_name: str, names: TokenNames | None = None
) -> dict[str, Any]:
    """The non-streaming response body (``chat.completion`` or ``text_completion``), one choice
    per result."""
    chat = results[0].gen.request.chat
    choices = []
    for i, result in enumerate(results):
        gen, output = result.gen, result.output
        reason, stop_reason = chat_finish(gen, output)
        choice: dict[str, Any]
        if output is not None:
            choice = {"index": i, "message": output.message()}
            extension = output.extension()
            if extension is not None:
                choice["rxstream"] = extension
        elif chat:
            choice = {"index": i, "message": {"role": "assistant", "content": result.text}}
        else:
            choice = {"index": i, "text": result.text}
        shape = _logprobs_of(gen, names)
        if output is not None:
            logprobs = output.logprobs()
        else:
            logprobs = None if shape is None else shape.join(result.logprobs)
        choice.update({"logprobs": logprobs, "finish_reason": reason, "stop_reason": stop_reason})
        if gen.token_ids is not None:
            choice["token_ids"] = gen.token_ids.take()
        choices.append(choice)
    kind = "chat.completion" if chat else "text_completion"
    body = {**chunk_base(kind, rid, created, model_name), "choices": choices}
    body["usage"] = total_usage([r.gen for r in results])
    return body
