"""A request's choices as server-sent events (``chat.completion.chunk`` or ``text_completion``),
ending with ``data: [DONE]``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from .._piece import Piece
from ._choice_events import merged
from ._generation import Generation
from ._logprobs import TokenNames
from ._response_shapes import (
    KEEPALIVE,
    _chat_output,
    _cut,
    _first_logprobs,
    _logprobs_of,
    chat_finish,
    chunk_base,
    error_event,
    total_usage,
    usage,
)
from ._sse import sse

__all__ = ["stream_events"]


class _Chunks:
    """The stream chunks of one response (``chat.completion.chunk`` or ``text_completion``)."""

    def __init__(self, gens: Sequence[Generation], rid: str, created: int, model_name: str) -> None:
        gen = gens[0]
        self.gens = gens
        self.chat = gen.request.chat
        self.include_usage = gen.request.include_usage
        self.continuous_usage = gen.request.continuous_usage
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        self.base = chunk_base(kind, rid, created, model_name)

    def __call__(
        self,
        index: int,
        text: str | None,
        reason: str | None = None,
        stop_reason: Any = None,
        first: bool = False,
        *,
        delta: dict[str, Any] | None = None,
        extension: dict[str, Any] | None = None,
        logprobs: dict[str, Any] | None = None,
    ) -> bytes:
        choice: dict[str, Any] = {"index": index}
        if self.chat:
            out: dict[str, Any] = {"role": "assistant"} if first else {}
            if text is not None:
                out["content"] = text
            if delta is not None:
                out.update(delta)
            choice["delta"] = out
        else:
            choice["text"] = text or ""
        choice.update({"logprobs": logprobs, "finish_reason": reason})
        if reason is not None:
            choice["stop_reason"] = stop_reason
        if extension is not None:
            choice["rxstream"] = extension
        ids = self.gens[index].token_ids
        if ids is not None:
            choice["token_ids"] = ids.take()
        if self.continuous_usage:  # vLLM: the usage so far on every chunk
            so_far = usage(len(self.gens[0].prompt_ids), sum(g.tokens for g in self.gens))
            return sse({**self.base, "choices": [choice], "usage": so_far})
        if self.include_usage:  # OpenAI: "usage": null on all chunks but the last
            return sse({**self.base, "choices": [choice], "usage": None})
        return sse({**self.base, "choices": [choice]})

    def usage_chunk(self) -> bytes | None:
        """The last chunk, with the whole request's usage (when asked)."""
        if not self.include_usage:
            return None
        return sse({**self.base, "choices": [], "usage": total_usage(self.gens)})


async def stream_events(
    gens: Sequence[Generation],
    rid: str,
    created: int,
    model_name: str,
    *,
    names: TokenNames | None = None,
    keepalive: float | None = None,
) -> AsyncIterator[bytes]:
    """A request's choices as server-sent events, ending with ``data: [DONE]``.

    Each chunk carries one choice (its ``index``), in the order the text comes, as OpenAI
    streams ``n > 1``; each choice ends with its own chunk with its ``finish_reason``. A
    ``: keep-alive`` comment goes out after ``keepalive`` seconds of silence. With
    ``include_usage`` the usage chunk goes out last however the stream ends (before the
    ``error`` event of a generation that failed).
    """
    chunk = _Chunks(gens, rid, created, model_name)
    shapes = [_logprobs_of(g, names) for g in gens]
    outputs = [_chat_output(g, names) for g in gens]
    if chunk.chat:
        for i in range(len(gens)):
            yield chunk(i, "", first=True, logprobs=_first_logprobs(outputs[i], shapes[i]))
    try:
        # closed explicitly (not left to the garbage collector) when this generator is closed
        async with contextlib.aclosing(merged(gens, keepalive)) as events:
            async for kind, i, value in events:
                if kind == "keepalive":
                    yield KEEPALIVE
                elif kind == "item":
                    output = outputs[i]
                    if output is not None:
                        delta, extension, logprobs = output.add(value)
                        if delta is not None or extension is not None:
                            yield chunk(i, None, delta=delta or {}, extension=extension, logprobs=logprobs)
                    elif isinstance(value, Piece):
                        shape = shapes[i]
                        logprobs = shape.of(value) if shape is not None else None
                        yield chunk(i, value.text, logprobs=logprobs)
                    else:
                        yield chunk(i, value)
                elif kind == "end":
                    output, shape = outputs[i], shapes[i]
                    if output is not None:
                        last = output.finish(_cut(gens[i]))
                        if last is not None:
                            yield chunk(i, None, delta=last[0], logprobs=last[1])
                    elif shape is not None:
                        tail = shape.finish(_cut(gens[i]))
                        if tail is not None:
                            yield chunk(i, "", logprobs=tail)
                    reason, stop_reason = chat_finish(gens[i], outputs[i])
                    yield chunk(i, None if chunk.chat else "", reason, stop_reason)
                else:
                    raise value
    except Exception as exc:
        # every choice has ended here (closing the merge disposed the others): usage adds up
        closing = chunk.usage_chunk()
        if closing is not None:
            yield closing
        yield sse(error_event(exc))
        return
    closing = chunk.usage_chunk()
    if closing is not None:
        yield closing
    yield sse("[DONE]")
