"""Reading an Anthropic Messages event stream (``POST /messages`` with ``"stream": true``).

``message_start`` (the prompt's usage), then per content block ``content_block_start`` (a
``text``, ``thinking`` or ``tool_use`` block), its ``content_block_delta`` events (``text_delta``:
answer text; ``thinking_delta``: reasoning; ``input_json_delta``: the tool call's arguments) and
``content_block_stop``; ``message_delta`` carries the ``stop_reason`` (``end_turn``,
``tool_use``: ``EOS``; ``max_tokens``: ``LENGTH``; ``stop_sequence``: ``STOP`` with the
sequence) and the output's usage; ``message_stop`` ends the stream. ``ping`` and other events
are skipped; an ``error`` event is a failure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rxstream._finish import Finish, FinishReason

from ._errors import RemoteError, error_line
from ._events import TypedEvents, event_object, event_str
from ._outputs import Outputs, RemoteUsage, count

__all__ = ["MessagesReader"]


class MessagesReader(TypedEvents):
    """Turns each event of one Messages stream into :class:`Outputs` calls."""

    END = "message_stop"

    def __init__(self, outputs: Outputs) -> None:
        self.outputs = outputs
        self.finish: Finish | None = None
        self._stop_reason: object = None
        self._stop_sequence: object = None
        self._usage: dict[str, int | None] = {}

    def read(self, data: str, event: Mapping[str, Any]) -> bool:
        """Read one event; True when it ends the stream. ValueError: malformed; RemoteError: the
        server reported an error."""
        kind = self.event_type(event)
        out = self.outputs
        if kind == "content_block_start":
            self._block_start(event.get("index"), event_object(event, "content_block"))
        elif kind == "content_block_delta":
            delta = event_object(event, "delta")
            dtype = delta.get("type")
            if dtype == "text_delta":
                out.text(event_str(delta, "text"))
            elif dtype == "thinking_delta":
                out.reasoning(event_str(delta, "thinking"))
            elif dtype == "input_json_delta":
                out.call_arguments(event.get("index"), event_str(delta, "partial_json"))
        elif kind == "content_block_stop":
            out.call_end(event.get("index"))
        elif kind == "message_start":
            self._add_usage(event_object(event, "message").get("usage"))
        elif kind == "message_delta":
            delta = event_object(event, "delta")
            self._stop_reason = delta.get("stop_reason", self._stop_reason)
            self._stop_sequence = delta.get("stop_sequence", self._stop_sequence)
            self._add_usage(event.get("usage"))
        elif kind == "message_stop":
            out.end_calls()
            self.finish = self._finish()
            return True
        elif kind == "error":
            raise RemoteError(error_line(event) or data)
        return False

    def _block_start(self, index: object, block: Mapping[str, Any]) -> None:
        btype = block.get("type")
        if btype == "tool_use":
            self.outputs.call_start(index, str(block.get("id") or ""), event_str(block, "name"))
            given = block.get("input")
            if isinstance(given, Mapping) and given:  # a whole input up front (no deltas follow)
                self.outputs.call_arguments(index, json.dumps(given))
        elif btype == "thinking":
            self.outputs.new_reasoning_region()
            self.outputs.reasoning(block.get("thinking") or "")
        elif btype == "text":
            self.outputs.text(block.get("text") or "")

    def _add_usage(self, usage: object) -> None:
        """Usage counts are cumulative: a later event's count replaces an earlier one."""
        if not isinstance(usage, Mapping):
            return
        for key in ("input_tokens", "output_tokens", "cache_read_input_tokens"):
            value = count(usage.get(key))
            if value is not None:
                self._usage[key] = value
        details = usage.get("output_tokens_details")
        if isinstance(details, Mapping) and (value := count(details.get("thinking_tokens"))) is not None:
            self._usage["reasoning_tokens"] = value
        u = self._usage
        self.outputs.usage = RemoteUsage(
            u.get("input_tokens"),
            u.get("output_tokens"),
            u.get("reasoning_tokens"),
            u.get("cache_read_input_tokens"),
        )

    def _finish(self) -> Finish:
        if self._stop_reason == "max_tokens":
            return Finish(FinishReason.LENGTH)
        if self._stop_reason == "stop_sequence" and isinstance(self._stop_sequence, str):
            return Finish(FinishReason.STOP, stop=self._stop_sequence)
        return Finish(FinishReason.EOS)
