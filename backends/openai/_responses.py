"""Reading an OpenAI Responses event stream (``POST /responses`` with ``"stream": true``).

The events are typed by their ``type``: ``response.output_text.delta`` (answer text, with
``logprobs``), ``response.reasoning_text.delta`` and ``response.reasoning_summary_text.delta``
(reasoning), ``response.output_item.added`` / ``.done`` (a ``function_call`` item opens and
closes a tool call) with ``response.function_call_arguments.delta`` / ``.done`` between them,
and the end: ``response.completed``, ``response.incomplete`` (``max_output_tokens`` is
``LENGTH``), ``response.failed`` or an ``error`` event. Other events are skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rxstream._finish import Finish, FinishReason
from rxstream._piece import Piece
from rxstream.detok import TokenBytes

from ._errors import RemoteError, error_line
from ._events import TypedEvents, choice_tokens, event_str
from ._outputs import Outputs, RemoteUsage, count

__all__ = ["ResponsesReader"]


def _usage(usage: object) -> RemoteUsage | None:
    if not isinstance(usage, Mapping):
        return None
    inputs = usage.get("input_tokens_details")
    outputs = usage.get("output_tokens_details")
    return RemoteUsage(
        count(usage.get("input_tokens")),
        count(usage.get("output_tokens")),
        count(outputs.get("reasoning_tokens")) if isinstance(outputs, Mapping) else None,
        count(inputs.get("cached_tokens")) if isinstance(inputs, Mapping) else None,
    )


class ResponsesReader(TypedEvents):
    """Turns each event of one Responses stream into :class:`Outputs` calls."""

    END = "response.completed, response.incomplete or response.failed"

    def __init__(self, outputs: Outputs, pieces: bool, vocab: TokenBytes | None) -> None:
        self.outputs = outputs
        self.pieces = pieces
        self.vocab = vocab
        self.finish: Finish | None = None

    def read(self, data: str, event: Mapping[str, Any]) -> bool:
        """Read one event; True when it ends the stream. ValueError: malformed; RemoteError: the
        server reported an error."""
        kind = self.event_type(event)
        out = self.outputs
        if kind == "response.output_text.delta":
            text = event_str(event, "delta")
            out.text(text, self._piece(text, event.get("logprobs")) if self.pieces else None)
        elif kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            out.reasoning(event_str(event, "delta"))
        elif kind in ("response.output_item.added", "response.output_item.done"):
            self._item(kind, event)
        elif kind == "response.function_call_arguments.delta":
            out.call_arguments(event.get("output_index"), event_str(event, "delta"))
        elif kind == "response.function_call_arguments.done":
            out.call_arguments_are(event.get("output_index"), event_str(event, "arguments"))
        elif kind in ("response.completed", "response.incomplete"):
            return self._end(kind, event.get("response"))
        elif kind == "response.failed":
            response = event.get("response")
            error = response.get("error") if isinstance(response, Mapping) else None
            raise RemoteError(error_line(error) or "the response failed")
        elif kind == "error":
            raise RemoteError(error_line(event) or data)
        return False

    def _piece(self, text: str, logprobs: object) -> Piece:
        t = choice_tokens(
            {"logprobs": {"content": logprobs}} if isinstance(logprobs, list) else {}, self.vocab
        )
        return Piece(text, t.ids, t.logprobs, t.top_logprobs, t.tokens)

    def _item(self, kind: str, event: Mapping[str, Any]) -> None:
        item = event.get("item")
        if not isinstance(item, Mapping):
            raise ValueError(f"{kind}: 'item' is not an object")
        key = event.get("output_index")
        if item.get("type") == "reasoning":
            self.outputs.new_reasoning_region()
        if item.get("type") != "function_call":
            return
        arguments = item.get("arguments") or ""
        if not isinstance(arguments, str):
            raise ValueError(f"{kind}: the function call's 'arguments' is not a string")
        if kind == "response.output_item.added":
            call_id = item.get("call_id") or item.get("id") or ""
            self.outputs.call_start(key, str(call_id), event_str(item, "name"))
            self.outputs.call_arguments(key, arguments)
        else:
            self.outputs.call_arguments_are(key, arguments)
            self.outputs.call_end(key)

    def _end(self, kind: str, response: object) -> bool:
        if not isinstance(response, Mapping):
            raise ValueError(f"{kind}: 'response' is not an object")
        self.outputs.end_calls()
        self.outputs.usage = _usage(response.get("usage"))
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, Mapping) else None
        if kind == "response.incomplete" and reason == "max_output_tokens":
            self.finish = Finish(FinishReason.LENGTH)
        else:
            self.finish = Finish(FinishReason.EOS)
        return True
