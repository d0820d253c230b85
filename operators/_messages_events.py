"""The ``messages_events`` operator: a routed chat's items (:func:`chat_pipeline`) as the
Anthropic Messages API's streaming events (SEMANTICS "Messages events"), and
:class:`MessageEvents`, the engine it runs (what ``POST /v1/messages`` uses)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, TypeAlias

from reactivex import Observable, abc

from rxstream._finish import Finish, FinishReason, FinishRecorder
from rxstream.channels import ToolCallDelta, ToolCallEnd, ToolCallInvalid, ToolCallStart, ToolCallValue
from rxstream.chat import TextDelta, TokenUsage
from rxstream.text import RegexStop

from ._sink import OperatorSink, describe, operator

__all__ = ["MessageEvents", "messages_events", "stop_reason"]

Event: TypeAlias = dict[str, Any]
"""One Messages streaming event, as its JSON object (``{"type": "message_start", ...}``)."""

FinishSource: TypeAlias = FinishRecorder | Callable[[], Finish | None]
"""Where the generation's :class:`~rxstream.Finish` is read at the end."""

UsageSource: TypeAlias = Callable[[], TokenUsage | int | None]
"""Where the generation's output tokens are read at the end (a usage, a count, or None: 0)."""


def tool_use_id(message_id: str, n: int) -> str:
    """The id of the ``n``-th tool call of a message: ``toolu_`` and 24 hex digits derived from
    the message id and ``n`` (the same for every chunking of the output)."""
    return "toolu_" + hashlib.sha256(f"{message_id}/{n}".encode()).hexdigest()[:24]


def stop_reason(finish: Finish | None, tool_use: bool) -> tuple[str, str | None]:
    """Anthropic's ``stop_reason`` and ``stop_sequence`` for how a generation ended.

    ``tool_use`` when it made a valid tool call (unless the budget cut it); ``max_tokens`` for
    the budget; ``stop_sequence`` with the matched string for a stop string (a regular-expression
    stop gives the text it matched); ``end_turn`` otherwise (the model's end, a stop token id, a
    cancelled generation)."""
    reason = finish.reason if finish is not None else FinishReason.EOS
    if reason is FinishReason.LENGTH:
        return "max_tokens", None
    if tool_use:
        return "tool_use", None
    if finish is not None and reason is FinishReason.STOP:
        stop = finish.stop
        if isinstance(stop, RegexStop):
            return "stop_sequence", stop.text
        if isinstance(stop, str):
            return "stop_sequence", stop
    return "end_turn", None


class MessageEvents:
    """One message's event sequence, item by item (one instance per generation).

    :meth:`start` gives ``message_start``; :meth:`add` the events of one :func:`chat_pipeline`
    item; :meth:`finish` closes the open blocks and gives ``message_delta`` and
    ``message_stop``; then :meth:`message` is the final message object (the non-streamed body).

    Blocks: a run of reasoning is a ``thinking`` block (with ``thinking=True``; else dropped),
    a run of answer text a ``text`` block, each tool call a ``tool_use`` block (ids from
    :func:`tool_use_id`); a block starts at its first text and stops when another starts (a
    ``tool_use`` block at its call's end). An invalid call's block stops where it became invalid;
    it is left out of :meth:`message` and both report it under ``rxstream.invalid_tool_calls``.
    """

    def __init__(self, message_id: str, model: str, *, input_tokens: int = 0, thinking: bool = True) -> None:
        self.message_id = message_id
        self.model = model
        self.input_tokens = input_tokens
        self.thinking = thinking
        self.blocks: list[dict[str, Any]] = []  # the message's content blocks so far
        self._text: int | None = None  # the open thinking or text block
        self._calls: dict[int, int] = {}  # the parser's call index -> its block
        self._args: dict[int, str] = {}  # a call's input_json sent so far, by block
        self._open: set[int] = set()  # started blocks not stopped
        self._bad: set[int] = set()  # blocks of invalid calls
        self.invalid: list[dict[str, Any]] = []
        self.valid = 0
        self._end: tuple[str, str | None, int] | None = None

    def start(self) -> list[Event]:
        """``message_start``: the message with no content yet."""
        message = self._shell([], None, None, 0)
        return [{"type": "message_start", "message": message}]

    def _shell(
        self, content: list[dict[str, Any]], reason: str | None, sequence: str | None, output: int
    ) -> dict[str, Any]:
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": reason,
            "stop_sequence": sequence,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": output},
        }

    def _stop(self, index: int) -> list[Event]:
        self._open.discard(index)
        if self._text == index:
            self._text = None
        return [{"type": "content_block_stop", "index": index}]

    def _begin(self, block: dict[str, Any]) -> tuple[int, list[Event]]:
        out = self._stop(self._text) if self._text is not None else []
        index = len(self.blocks)
        self.blocks.append(block)
        self._open.add(index)
        out.append({"type": "content_block_start", "index": index, "content_block": dict(block)})
        return index, out

    def add(self, item: Any) -> list[Event]:
        """The events of one item (a :class:`~rxstream.chat.TextDelta` or a tool-call event).

        Raises:
            TypeError: an item of another type.
        """
        if isinstance(item, TextDelta):
            return self._add_text(item)
        if isinstance(item, ToolCallStart):
            block = {
                "type": "tool_use",
                "id": tool_use_id(self.message_id, len(self._calls)),
                "name": item.name,
            }
            index, out = self._begin({**block, "input": {}})
            self._calls[item.index] = index
            self._args[index] = ""
            return out
        if isinstance(item, ToolCallDelta):
            return self._json(self._calls.get(item.index), item.text)
        if isinstance(item, ToolCallEnd):
            return self._end_call(item)
        if isinstance(item, ToolCallInvalid):
            block_index = self._calls.get(item.index)
            report = {"index": block_index, "error": item.error, "position": item.position, "raw": item.raw}
            self.invalid.append(report)
            if block_index is None or block_index not in self._open:
                return []
            self._bad.add(block_index)
            return self._stop(block_index)
        if isinstance(item, ToolCallValue):
            return []
        raise TypeError(f"messages_events: expected chat_pipeline items, got {describe(item)}")

    def _add_text(self, item: TextDelta) -> list[Event]:
        if not item.text or (item.kind == "reasoning" and not self.thinking):
            return []
        kind = "thinking" if item.kind == "reasoning" else "text"
        out: list[Event] = []
        index = self._text
        if index is None or self.blocks[index]["type"] != kind:
            block = (
                {"type": "thinking", "thinking": "", "signature": ""}
                if kind == "thinking"
                else {
                    "type": "text",
                    "text": "",
                }
            )
            index, out = self._begin(block)
            self._text = index
        self.blocks[index][kind] += item.text
        delta = {"type": f"{kind}_delta", kind: item.text}
        out.append({"type": "content_block_delta", "index": index, "delta": delta})
        return out

    def _json(self, index: int | None, text: str) -> list[Event]:
        if index is None or index not in self._open or not text:
            return []
        self._args[index] += text
        delta = {"type": "input_json_delta", "partial_json": text}
        return [{"type": "content_block_delta", "index": index, "delta": delta}]

    def _end_call(self, item: ToolCallEnd) -> list[Event]:
        index = self._calls.get(item.index)
        if index is None or index not in self._open:
            return []
        sent = self._args[index]
        # the deltas join to the arguments' text (SEMANTICS §9); what a format did not send is sent now
        out = (
            self._json(index, item.arguments_text[len(sent) :])
            if item.arguments_text.startswith(sent)
            else []
        )
        self.blocks[index]["input"] = item.arguments
        self.valid += 1
        return out + self._stop(index)

    def finish(self, finish: Finish | None, output_tokens: int | TokenUsage | None = None) -> list[Event]:
        """The last events: the open blocks' ``content_block_stop`` (in index order), then
        ``message_delta`` (stop reason, usage) and ``message_stop``."""
        out: list[Event] = []
        for index in sorted(self._open):
            out += self._stop(index)
        reason, sequence = stop_reason(finish, self.valid > 0)
        tokens = output_tokens.total if isinstance(output_tokens, TokenUsage) else output_tokens or 0
        self._end = (reason, sequence, tokens)
        delta: Event = {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": sequence},
            "usage": {"output_tokens": tokens},
        }
        if self.invalid:
            delta["rxstream"] = {"invalid_tool_calls": list(self.invalid)}
        return [*out, delta, {"type": "message_stop"}]

    def message(self) -> dict[str, Any]:
        """The final message (after :meth:`finish`): the content blocks (invalid calls left out),
        ``stop_reason``, ``stop_sequence`` and ``usage``, as the non-streamed response body."""
        if self._end is None:
            raise RuntimeError("MessageEvents.message: finish() first")
        reason, sequence, tokens = self._end
        content = [dict(b) for i, b in enumerate(self.blocks) if i not in self._bad]
        body = self._shell(content, reason, sequence, tokens)
        if self.invalid:
            body["rxstream"] = {"invalid_tool_calls": list(self.invalid)}
        return body


def messages_events(
    message_id: str,
    model: str,
    *,
    input_tokens: int = 0,
    thinking: bool = True,
    finish: FinishSource | None = None,
    usage: UsageSource | None = None,
) -> Callable[[Observable[Any]], Observable[Event]]:
    """The items of :func:`chat_pipeline` (answer and reasoning :class:`~rxstream.chat.TextDelta`
    items, tool-call events) as the Anthropic Messages API's streaming events, JSON-ready dicts
    the official ``anthropic`` SDK parses (SEMANTICS "Messages events"):

    ``message_start`` at subscription; per block ``content_block_start``, its deltas
    (``thinking_delta``, ``text_delta``, ``input_json_delta``) and ``content_block_stop``; at the
    end ``message_delta`` (``stop_reason``, ``stop_sequence``, ``usage.output_tokens``) and
    ``message_stop``. Reasoning becomes ``thinking`` blocks (``signature`` ``""``), or is dropped
    with ``thinking=False``; each tool call a ``tool_use`` block whose ``input_json_delta``
    texts join to exactly its arguments. Block indexes count from 0 and tool ids derive from
    ``message_id`` and the call's number, so the events are the same for every chunking of the
    model's output once adjacent deltas of a block are joined.

    The end is read when the items complete: ``finish`` (a :class:`~rxstream.FinishRecorder`
    given to the pipeline as ``on_finish``, or a function returning the :class:`~rxstream.Finish`)
    gives the stop reason (none: ``end_turn``, or ``tool_use``), ``usage`` (a function returning
    the :class:`~rxstream.chat.TokenUsage` that ``chat_pipeline(usage=...)`` reported, or a count)
    the output tokens. An error is passed on as it is (no ``message_delta``).

    Marble diagram (``m="msg_1"``, ``d`` the ``message_start`` event)::

        source:   -a-b-|      a=TextDelta("reasoning", "hm"), b=TextDelta("content", "Hi")
        operator: messages_events("msg_1", "m")
        result:   d(ef)-(ghi)-(jkl|)
        ...       d={"type": "message_start", "message": {"id": "msg_1", "type": "message"
        ...          "role": "assistant", "model": "m", "content": [], "stop_reason": None
        ...          "stop_sequence": None, "usage": {"input_tokens": 0, "output_tokens": 0}}}
        ...       e={"type": "content_block_start", "index": 0
        ...          "content_block": {"type": "thinking", "thinking": "", "signature": ""}}
        ...       f={"type": "content_block_delta", "index": 0
        ...          "delta": {"type": "thinking_delta", "thinking": "hm"}}
        ...       g={"type": "content_block_stop", "index": 0}
        ...       h={"type": "content_block_start", "index": 1
        ...          "content_block": {"type": "text", "text": ""}}
        ...       i={"type": "content_block_delta", "index": 1
        ...          "delta": {"type": "text_delta", "text": "Hi"}}
        ...       j={"type": "content_block_stop", "index": 1}
        ...       k={"type": "message_delta", "usage": {"output_tokens": 0}
        ...          "delta": {"stop_reason": "end_turn", "stop_sequence": None}}
        ...       l={"type": "message_stop"}

    Raises:
        TypeError: a bad argument (named); at run time an item that is not a chat item goes to
            ``on_error``.
        ValueError: an empty ``message_id``, a negative ``input_tokens``.
    """
    if not isinstance(message_id, str) or not message_id:
        raise ValueError(f"messages_events: message_id must be a non-empty string, got {message_id!r}")
    if not isinstance(model, str):
        raise TypeError(f"messages_events: model must be a string, got {type(model).__name__}")
    if isinstance(input_tokens, bool) or not isinstance(input_tokens, int):
        raise TypeError(f"messages_events: input_tokens must be an int, got {type(input_tokens).__name__}")
    if input_tokens < 0:
        raise ValueError(f"messages_events: input_tokens must be >= 0, got {input_tokens}")
    if not isinstance(thinking, bool):
        raise TypeError(f"messages_events: thinking must be a bool, got {type(thinking).__name__}")
    for name, value in (("finish", finish), ("usage", usage)):
        if value is not None and not callable(value):
            raise TypeError(f"messages_events: {name} must be callable, got {type(value).__name__}")

    def read_finish() -> Finish | None:
        if isinstance(finish, FinishRecorder):
            return finish.finish
        return finish() if finish is not None else None

    def make_sink(observer: abc.ObserverBase[Event]) -> OperatorSink[Any, Event]:
        engine = MessageEvents(message_id, model, input_tokens=input_tokens, thinking=thinking)
        return _MessagesSink(observer, engine, read_finish, usage)

    return operator("messages_events", make_sink)


class _MessagesSink(OperatorSink[Any, Event]):
    __slots__ = ("engine", "read_finish", "read_usage")

    def __init__(
        self,
        observer: abc.ObserverBase[Event],
        engine: MessageEvents,
        read_finish: Callable[[], Finish | None],
        read_usage: UsageSource | None,
    ) -> None:
        super().__init__("messages_events", observer)
        self.engine = engine
        self.read_finish = read_finish
        self.read_usage = read_usage

    def run(self, source: Observable[Any], scheduler: abc.SchedulerBase | None) -> abc.DisposableBase:
        for event in self.engine.start():
            self.emit(event)
        return super().run(source, scheduler)

    def on_next(self, value: Any) -> None:
        for event in self.engine.add(value):
            self.emit(event)

    def on_completed(self) -> None:
        usage = self.read_usage() if self.read_usage is not None else None
        events = self.engine.finish(self.read_finish(), usage)
        for event in events:
            self.emit(event)
        self.end(Finish(FinishReason.EOS), dispose=False)
