"""The OpenAI response shapes: chunk heads, usage, finish reasons, error events, a routed chat's
message (:class:`ChatOutput`) and the log-probabilities of a choice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._finish import Finish, FinishReason
from .._piece import Piece
from ..chat import TextDelta, TokenUsage
from ..text import RegexStop
from ._errors import generation_error
from ._generation import Generation
from ._logprobs import ChatLogprobs, CompletionLogprobs, TokenNames

__all__ = [
    "KEEPALIVE",
    "ChatOutput",
    "chat_finish",
    "chunk_base",
    "error_event",
    "finish_fields",
    "total_usage",
    "usage",
]

KEEPALIVE = b": keep-alive\n\n"
"""A server-sent-events comment: clients ignore it, proxies see the stream is alive."""


def finish_fields(finish: Finish | None) -> tuple[str | None, str | int | list[int] | None]:
    """OpenAI's ``finish_reason`` and vLLM's ``stop_reason`` for how a generation ended.

    A regular-expression stop gives the text it matched as ``stop_reason``; a stop id sequence
    gives its ids as a list.
    """
    if finish is None:
        return "stop", None
    if finish.reason is FinishReason.STOP:
        stop = finish.stop
        if isinstance(stop, tuple):
            return "stop", list(stop)
        return "stop", stop.text if isinstance(stop, RegexStop) else stop
    return finish.openai_reason, None


def chunk_base(kind: str, rid: str, created: int, model: str) -> dict[str, Any]:
    """The fields every response object starts with."""
    return {"id": rid, "object": kind, "created": created, "model": model}


def usage(prompt_tokens: int, completion: TokenUsage | int) -> dict[str, Any]:
    """The ``usage`` object: OpenAI's counts, ``completion_tokens_details.reasoning_tokens`` and
    the ``rxstream`` buckets of the completion's tokens (SEMANTICS §10: they add up to
    ``completion_tokens``); a bare count (the usage so far) gives OpenAI's three counts only."""
    tokens = completion if isinstance(completion, int) else completion.total
    out: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": tokens,
        "total_tokens": prompt_tokens + tokens,
    }
    if isinstance(completion, TokenUsage):
        out["completion_tokens_details"] = {"reasoning_tokens": completion.reasoning}
        out["rxstream"] = completion.as_dict()
    return out


def total_usage(gens: Sequence[Generation]) -> dict[str, Any]:
    """The ``usage`` of a request's generations (one prompt; the completions' buckets summed)."""
    return usage(len(gens[0].prompt_ids), sum((g.token_usage for g in gens), TokenUsage()))


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


def chat_finish(
    gen: Generation, output: ChatOutput | None
) -> tuple[str | None, str | int | list[int] | None]:
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
