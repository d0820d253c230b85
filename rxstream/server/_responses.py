"""The OpenAI response shapes: chunks, usage, finish reasons, log-probabilities; a request's
choices as one body or as a stream of server-sent events (choices interleaved, keep-alive
comments while it is silent)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .._finish import Finish, FinishReason
from .._piece import Piece
from ..chat import TextDelta
from ..text import RegexStop
from ._errors import generation_error
from ._generation import Generation
from ._logprobs import ChatLogprobs, CompletionLogprobs, TokenNames
from ._sse import sse

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
    "usage",
]

KEEPALIVE = b": keep-alive\n\n"
"""A server-sent-events comment: clients ignore it, proxies see the stream is alive."""


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
    """A failure during a stream, as the ``{"error": ...}`` event OpenAI's clients understand
    (:func:`~._errors.generation_error`: the request's own rules, or the server)."""
    return generation_error(exc).body()


class ChatOutput:
    """What a routed chat generation produced, item by item: answer and reasoning text, tool calls
    (numbered 0, 1, ... in the order they start, as OpenAI numbers them), invalid tool calls, and
    with ``logprobs`` the entries of the answer's and the reasoning's tokens.

    :meth:`add` returns the ``delta``, the choice extension and the ``logprobs`` a stream chunk
    carries for an item; :meth:`message` is the non-streaming ``message`` and :meth:`logprobs`
    its ``logprobs``.
    """

    def __init__(self, reasoning: bool, names: TokenNames | None = None) -> None:
        self.reasoning = reasoning
        self.content: list[str] = []
        self.thoughts: list[str] = []
        self.calls: list[dict[str, Any]] = []  # started calls, in order
        self.valid: set[int] = set()  # positions in self.calls of the calls that ended valid
        self.invalid: list[dict[str, Any]] = []
        self._position: dict[int, int] = {}  # the parser's call index -> position in self.calls
        # one per text: a token that ends inside a character waits for the rest in its own text
        self._lp = None if names is None else (ChatLogprobs(names), ChatLogprobs(names))
        self.content_logprobs: list[dict[str, Any]] = []
        self.reasoning_logprobs: list[dict[str, Any]] = []

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The complete, valid tool calls, in OpenAI's message format."""
        return [c for k, c in enumerate(self.calls) if k in self.valid]

    def chunk_logprobs(
        self, content: list[dict[str, Any]] | None = None, reasoning: list[dict[str, Any]] | None = None
    ) -> dict[str, Any] | None:
        """A stream chunk's ``logprobs``: its answer entries in ``content`` and its reasoning
        entries in ``reasoning_content`` (when the route has reasoning), ``[]`` where it has none,
        as OpenAI sends on every chunk but the last; None when log-probabilities are not asked."""
        if self._lp is None:
            return None
        out: dict[str, Any] = {"content": content or []}
        if self.reasoning:
            out["reasoning_content"] = reasoning or []
        out["refusal"] = None
        return out

    def logprobs(self) -> dict[str, Any] | None:
        """The non-streaming ``logprobs`` (None when not asked)."""
        return self.chunk_logprobs(self.content_logprobs, self.reasoning_logprobs)

    def add(self, item: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None, dict[str, Any] | None]:
        """Record ``item``; return ``(delta, extension, logprobs)`` for a stream chunk (delta and
        extension None: no chunk)."""
        delta, extension = self._add(item)
        if self._lp is None or (delta is None and extension is None):
            return delta, extension, None
        if isinstance(item, TextDelta) and item.piece is not None:
            if item.kind == "content":
                entries = self._lp[0].entries(item.piece)
                self.content_logprobs += entries
                return delta, extension, self.chunk_logprobs(content=entries)
            entries = self._lp[1].entries(item.piece)
            self.reasoning_logprobs += entries
            return delta, extension, self.chunk_logprobs(reasoning=entries)
        return delta, extension, self.chunk_logprobs()

    def finish(self, cut: bool) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """At the end: ``(delta, logprobs)`` of a last chunk for the entries that waited for a
        character never completed (see :meth:`ChatLogprobs.finish`), or None."""
        if self._lp is None:
            return None
        content, reasoning = self._lp[0].finish(cut), self._lp[1].finish(cut)
        if not content and not reasoning:
            return None
        self.content_logprobs += content
        self.reasoning_logprobs += reasoning
        delta = {"content": ""} if content else {}
        if reasoning:
            delta["reasoning_content"] = ""
        logprobs = self.chunk_logprobs(content=content, reasoning=reasoning)
        assert logprobs is not None
        return delta, logprobs

    def _add(self, item: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
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


# ------------------------------------------------------------------------------ log-probabilities
class _Logprobs:
    """One choice's log-probabilities in its endpoint's shape (chat or completions)."""

    def __init__(self, names: TokenNames, chat: bool) -> None:
        self.chat = chat
        self.chat_lp = ChatLogprobs(names)
        self.completion_lp = CompletionLogprobs(names)

    def of(self, piece: Piece) -> dict[str, Any]:
        """The ``logprobs`` object for the tokens of one piece (a chunk's share)."""
        if self.chat:
            return {"content": self.chat_lp.entries(piece), "refusal": None}
        return self.completion_lp.entries(piece)

    def finish(self, cut: bool) -> dict[str, Any] | None:
        """The ``logprobs`` of the chat entries that waited at the end for a character never
        completed (see :meth:`ChatLogprobs.finish`), or None."""
        tail = self.chat_lp.finish(cut) if self.chat else []
        return {"content": tail, "refusal": None} if tail else None

    def join(self, parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """The ``logprobs`` object of a whole choice, from its chunks' shares."""
        if self.chat:
            return {"content": [e for p in parts for e in p["content"]], "refusal": None}
        return CompletionLogprobs.join(parts)


def _logprobs_of(gen: Generation, names: TokenNames | None) -> _Logprobs | None:
    if gen.request.logprobs is None or names is None:
        return None
    return _Logprobs(names, gen.request.chat)


def _chat_output(gen: Generation, names: TokenNames | None) -> ChatOutput | None:
    """A routed chat's :class:`ChatOutput` (with its log-probabilities when asked), else None."""
    if not gen.routed:
        return None
    return ChatOutput(gen.plan.has_reasoning, None if gen.request.logprobs is None else names)


def _cut(gen: Generation) -> bool:
    """Whether a stop string ended the generation (a character it cut is not in the text)."""
    finish = gen.recorder.finish
    return finish is not None and finish.reason is FinishReason.STOP


def _first_logprobs(output: ChatOutput | None, shape: _Logprobs | None) -> dict[str, Any] | None:
    """The role chunk's ``logprobs``: with log-probabilities asked, no entries (OpenAI sends
    ``{"content": [], "refusal": null}`` there), else None."""
    if output is not None:
        return output.chunk_logprobs()
    if shape is not None and shape.chat:
        return {"content": [], "refusal": None}
    return None


# ------------------------------------------------------------------------------ several choices
_Event = tuple[Literal["item", "end", "error", "keepalive"], int, Any]


async def _merged(gens: Sequence[Generation], keepalive: float | None) -> AsyncGenerator[_Event, None]:
    """The items of every choice as they come, interleaved: ``("item", i, str | Piece)``, then
    ``("end", i, None)`` or ``("error", i, exc)`` per choice; ``("keepalive", -1, None)`` after
    ``keepalive`` seconds without one. Closing it (or a failure here) cancels every choice, which
    disposes its generation."""
    queue: asyncio.Queue[_Event] = asyncio.Queue(maxsize=2 * len(gens))

    async def pump(i: int, gen: Generation) -> None:
        try:
            # closed explicitly (not left to the garbage collector) when the task ends or is cancelled
            async with contextlib.aclosing(gen.items()) as items:
                async for item in items:
                    await queue.put(("item", i, item))
        except Exception as exc:
            await queue.put(("error", i, exc))
            return
        await queue.put(("end", i, None))

    tasks = [asyncio.ensure_future(pump(i, g)) for i, g in enumerate(gens)]
    getter: asyncio.Future[_Event] | None = None
    try:
        running = len(gens)
        while running:
            if getter is None and not queue.empty():
                event = queue.get_nowait()
            elif keepalive is None:
                event = await queue.get()
            else:
                # not asyncio.wait_for: on Python 3.11 it can swallow a cancellation that comes
                # as the item arrives (the response would then never stop)
                if getter is None:
                    getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait((getter,), timeout=keepalive)
                if not done:
                    yield ("keepalive", -1, None)
                    continue
                event, getter = getter.result(), None
            if event[0] != "item":
                running -= 1
            yield event
    finally:
        if getter is not None:
            getter.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


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
        async with contextlib.aclosing(_merged(gens, None)) as events:
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
        choices.append(choice)
    kind = "chat.completion" if chat else "text_completion"
    body = {**chunk_base(kind, rid, created, model_name), "choices": choices}
    body["usage"] = usage(len(results[0].gen.prompt_ids), sum(r.gen.tokens for r in results))
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
        if self.include_usage:  # OpenAI: "usage": null on all chunks but the last
            return sse({**self.base, "choices": [choice], "usage": None})
        return sse({**self.base, "choices": [choice]})


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
    ``: keep-alive`` comment goes out after ``keepalive`` seconds of silence.
    """
    chunk = _Chunks(gens[0], rid, created, model_name)
    shapes = [_logprobs_of(g, names) for g in gens]
    outputs = [_chat_output(g, names) for g in gens]
    if chunk.chat:
        for i in range(len(gens)):
            yield chunk(i, "", first=True, logprobs=_first_logprobs(outputs[i], shapes[i]))
    try:
        # closed explicitly (not left to the garbage collector) when this generator is closed
        async with contextlib.aclosing(_merged(gens, keepalive)) as events:
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
        yield sse(error_event(exc))
        return
    if chunk.include_usage:
        total = usage(len(gens[0].prompt_ids), sum(g.tokens for g in gens))
        yield sse({**chunk.base, "choices": [], "usage": total})
    yield sse("[DONE]")
