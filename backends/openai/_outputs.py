"""What a remote chat stream emits, the same for every API: the answer's text (or, with
``channels=True``, reasoning and answer :class:`~rxstream.channels.Segment` chunks and tool-call
events), and the usage the server reported (:class:`RemoteUsage`)."""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from rxstream._piece import Piece
from rxstream.channels import Segment, ToolCallDelta, ToolCallEnd, ToolCallInvalid, ToolCallStart

__all__ = ["Outputs", "RemoteUsage"]


@dataclass(frozen=True, slots=True)
class RemoteUsage:
    """The tokens a server says one request used (each field None when the server did not say).

    Attributes:
        input_tokens: prompt tokens (Chat Completions' ``prompt_tokens``; for the Messages API,
            ``input_tokens``, not counting cache reads and writes).
        output_tokens: generated tokens (``completion_tokens``), reasoning included.
        reasoning_tokens: of those, the reasoning's (``reasoning_tokens`` where the server
            reports it).
        cached_tokens: prompt tokens read from a cache (``cached_tokens``;
            ``cache_read_input_tokens`` for the Messages API).
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None


def count(value: object) -> int | None:
    """A token count from a usage field (None unless a non-negative int)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


class _Call:
    __slots__ = ("arguments", "id", "index", "name", "open")

    def __init__(self, index: int, call_id: str, name: str) -> None:
        self.index = index
        self.id = call_id
        self.name = name
        self.arguments: list[str] = []
        self.open = True


class Outputs:
    """The items of one stream, built from what each API's reader finds.

    Readers call :meth:`text`, :meth:`reasoning`, :meth:`call_start`, :meth:`call_arguments`
    and :meth:`call_end`; :meth:`take` returns the items gathered since the last call. Without
    ``channels`` only the answer's text is kept (str, or :class:`~rxstream.Piece` when the reader
    passes one). Tool calls are numbered from 0 in the order they start; a call's key is
    whatever the API identifies it by (an item id, a block index, a Chat Completions index).
    """

    def __init__(self, channels: bool) -> None:
        self.channels = channels
        self.usage: RemoteUsage | None = None
        self._items: list[Any] = []
        self._calls: dict[Hashable, _Call] = {}
        self._reasoning_region = -1
        self._last = ""  # the kind of the last output: "reasoning", "content" or "call"
        self.calls_made = 0

    def take(self) -> list[Any]:
        items, self._items = self._items, []
        return items

    def text(self, text: str, piece: Piece | None = None) -> None:
        if self.channels:
            if text:
                self._items.append(Segment("content", "chunk", text))
                self._last = "content"
        elif piece is not None:
            self._items.append(piece)
        elif text:
            self._items.append(text)

    def reasoning(self, text: str) -> None:
        if not self.channels or not text:
            return
        if self._last != "reasoning":
            self._reasoning_region += 1
        self._items.append(Segment("reasoning", "chunk", text, region=self._reasoning_region))
        self._last = "reasoning"

    def new_reasoning_region(self) -> None:
        """The next reasoning text starts a region of its own (a new reasoning item or block)."""
        self._last = ""

    def call_start(self, key: Hashable, call_id: str, name: str) -> None:
        if key in self._calls:
            raise ValueError(f"tool call {key!r} started twice")
        call = self._calls[key] = _Call(len(self._calls), call_id, name)
        self.calls_made += 1
        self._last = "call"
        if self.channels:
            self._items.append(ToolCallStart(call.index, call_id, name))

    def call_arguments(self, key: Hashable, text: str) -> None:
        call = self._calls.get(key)
        if call is None or not call.open:
            raise ValueError(f"arguments for tool call {key!r}, which is not open")
        if text:
            call.arguments.append(text)
            if self.channels:
                self._items.append(ToolCallDelta(call.index, text))

    def call_arguments_are(self, key: Hashable, text: str) -> None:
        """The call's whole arguments text as the server sums it up: the rest of it is a delta."""
        call = self._calls.get(key)
        if call is not None and call.open:
            have = "".join(call.arguments)
            if text.startswith(have):
                self.call_arguments(key, text[len(have) :])

    def is_call(self, key: Hashable) -> bool:
        return key in self._calls

    def call_end(self, key: Hashable) -> None:
        call = self._calls.get(key)
        if call is None or not call.open:
            return
        call.open = False
        if not self.channels:
            return
        text = "".join(call.arguments)
        try:
            arguments = json.loads(text or "{}")
        except ValueError as exc:
            position = getattr(exc, "pos", len(text))
            self._items.append(ToolCallInvalid(call.index, f"invalid JSON: {exc}", position, text))
            return
        if not isinstance(arguments, dict):
            self._items.append(ToolCallInvalid(call.index, "the arguments are not an object", 0, text))
            return
        self._items.append(ToolCallEnd(call.index, call.id, call.name, arguments, text))

    def end_calls(self) -> None:
        """End every call still open (the stream ended)."""
        for key in list(self._calls):
            self.call_end(key)
