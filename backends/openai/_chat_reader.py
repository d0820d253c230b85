"""Reading a Chat Completions or completions event stream: each chunk's first choice (its text
or ``delta.content``, ``delta.reasoning_content`` / ``delta.reasoning``, ``delta.tool_calls``),
its ``finish_reason``, and the ``usage`` chunk (``stream_options.include_usage``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from rxstream._finish import Finish
from rxstream._piece import Piece
from rxstream.detok import TokenBytes

from ._errors import RemoteError, error_line
from ._events import choice_tokens, map_finish
from ._outputs import Outputs, RemoteUsage, count

__all__ = ["ChatReader"]


def _usage(usage: Mapping[str, Any]) -> RemoteUsage:
    prompt = usage.get("prompt_tokens_details")
    completion = usage.get("completion_tokens_details")
    return RemoteUsage(
        count(usage.get("prompt_tokens")),
        count(usage.get("completion_tokens")),
        count(completion.get("reasoning_tokens")) if isinstance(completion, Mapping) else None,
        count(prompt.get("cached_tokens")) if isinstance(prompt, Mapping) else None,
    )


class ChatReader:
    """Turns each chunk of one Chat Completions (or completions) stream into :class:`Outputs`
    calls. The stream may end after ``[DONE]`` or after a ``finish_reason``."""

    END = "a finish_reason or [DONE]"

    def __init__(
        self, kind: Literal["completions", "chat"], outputs: Outputs, pieces: bool, vocab: TokenBytes | None
    ) -> None:
        self.kind = kind
        self.outputs = outputs
        self.pieces = pieces
        self.vocab = vocab
        self._done = False
        self._finish_reason: str | None = None
        self._stop_reason: object = None

    @property
    def ended(self) -> bool:
        return self._done or self._finish_reason is not None

    @property
    def finish(self) -> Finish:
        return map_finish(self._finish_reason, self._stop_reason)

    def saw_done(self) -> None:
        self._done = True
        self.outputs.end_calls()

    def read(self, data: str, event: Mapping[str, Any]) -> bool:
        """Read one chunk (never ends the stream: ``[DONE]`` or the stream's end does)."""
        if "error" in event:
            raise RemoteError(error_line(event) or data)
        choices = event.get("choices")
        if not isinstance(choices, list):
            raise ValueError("no 'choices' list")
        if isinstance(event.get("usage"), Mapping):
            self.outputs.usage = _usage(event["usage"])
        for choice in choices:
            if not isinstance(choice, Mapping):
                raise ValueError("a choice is not an object")
            if choice.get("index", 0) != 0:
                continue
            self._choice(choice)
            if choice.get("finish_reason") is not None:
                self._finish_reason = str(choice["finish_reason"])
                self._stop_reason = choice.get("stop_reason")
                self.outputs.end_calls()
        return False

    def _choice(self, choice: Mapping[str, Any]) -> None:
        delta: Mapping[str, Any] = {}
        if self.kind == "chat":
            delta = choice.get("delta") or {}
            if not isinstance(delta, Mapping):
                raise ValueError("'delta' is not an object")
            text = delta.get("content") or ""
        else:
            text = choice.get("text") or ""
        if not isinstance(text, str):
            raise ValueError(f"text is {type(text).__name__}, not a string")
        reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
        if not isinstance(reasoning, str):
            raise ValueError(f"reasoning is {type(reasoning).__name__}, not a string")
        self.outputs.reasoning(reasoning)
        self._tool_calls(delta.get("tool_calls"))
        if self.pieces:
            if not isinstance(choice.get("logprobs"), Mapping):  # ids only: what choice_tokens gives then
                raw = choice.get("token_ids")
                ids = ()
                if isinstance(raw, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in raw):
                    ids = tuple(raw)
                if text or ids:
                    self.outputs.text(text, Piece(text, ids))
                return
            t = choice_tokens(choice, self.vocab)
            if text or t.size:
                self.outputs.text(text, Piece(text, t.ids, t.logprobs, t.top_logprobs, t.tokens))
        else:
            self.outputs.text(text)

    def _tool_calls(self, calls: object) -> None:
        if calls is None:
            return
        if not isinstance(calls, list):
            raise ValueError("'tool_calls' is not a list")
        for call in calls:
            if not isinstance(call, Mapping) or not isinstance(call.get("index", 0), int):
                raise ValueError("a tool call is not an object with an int index")
            key = call.get("index", 0)
            function = call.get("function") or {}
            if not isinstance(function, Mapping):
                raise ValueError("a tool call's 'function' is not an object")
            if not self.outputs.is_call(key):
                name = function.get("name")
                if not isinstance(name, str):
                    raise ValueError("a tool call starts without a function name")
                self.outputs.call_start(key, str(call.get("id") or ""), name)
            arguments = function.get("arguments") or ""
            if not isinstance(arguments, str):
                raise ValueError("a tool call's arguments are not a string")
            self.outputs.call_arguments(key, arguments)
