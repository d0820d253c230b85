"""The ``tool_calls`` operator: tool-call regions of a routed stream to tool-call events (SEMANTICS §9)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from reactivex import Observable, abc

from rxstream._finish import Finish, FinishReason
from rxstream.channels import (
    Segment,
    ToolCallError,
    ToolCallEvent,
    ToolCallInvalid,
    ToolCallParser,
    ToolFormat,
    compile_tools,
    tool_format,
)

from ._sink import OperatorSink, describe, operator

__all__ = ["tool_calls"]

_ON_INVALID = ("report", "cancel", "error")


def tool_calls(
    tools: Iterable[Mapping[str, Any]] | None = None,
    *,
    format: ToolFormat = "json",
    channel: str = "tool_call",
    on_invalid: Literal["report", "cancel", "error"] = "report",
    id_factory: Callable[[int], str] | None = None,
) -> Callable[[Observable[Segment]], Observable[Segment | ToolCallEvent]]:
    r"""Turn the tool-call regions of a routed stream into tool-call events as they stream.

    Segments of other channels pass through unchanged and in order; the segments of ``channel``
    are replaced by :class:`~rxstream.channels.ToolCallStart` (the name is known),
    :class:`~rxstream.channels.ToolCallDelta` (argument text: the deltas of a call, joined, are
    its ``arguments_text``), :class:`~rxstream.channels.ToolCallValue` (a value the moment it is
    settled: a string at its closing quote, a number at the character after it, an object or
    array at its closing bracket), :class:`~rxstream.channels.ToolCallEnd` (the parsed
    arguments) and :class:`~rxstream.channels.ToolCallInvalid` (invalid JSON, a schema
    violation or an unknown tool, at the first character after which no continuation could be
    valid; the rest of that region is skipped). See SEMANTICS §9 and
    :class:`~rxstream.channels.ToolCallParser`.

    Args:
        tools: the OpenAI tools list (``[{"type": "function", "function": {"name",
            "description", "parameters": schema}}]``): a call must name one of them, and its
            arguments are checked against its schema as they arrive. None: any name, no checks.
        format: how the regions are written: a :class:`~rxstream.channels.ToolCallFormat` or
            its name (:func:`rxstream.channels.tool_format_names`: the generic ``json``,
            ``json-list`` and ``xml``, and the model families' own).
        channel: the channel whose segments hold the tool calls.
        on_invalid: ``"report"``: emit the :class:`~rxstream.channels.ToolCallInvalid` when its
            region ends (with the region's whole text in ``raw``) and go on; ``"cancel"``: emit it
            at the segment that decides it, then complete and dispose the upstream (the
            generation stops); ``"error"``: send a :class:`~rxstream.channels.ToolCallError`
            (a ``ValueError`` whose ``event`` is the invalid event) to ``on_error`` at that
            segment and dispose the upstream.
        id_factory: ``index -> id`` for the calls (default: ``call_`` + 24 random hex digits).

    Raises:
        TypeError / ValueError: a bad argument; a bad entry of ``tools`` (the message names it,
            ``tools[1]``) or a schema that does not compile.

    A non-``Segment`` item is sent to ``on_error`` as a ``TypeError``.

    Marble diagram (the number ``5`` is settled by the ``}`` after it: its value goes out in that
    frame)::

        source:   -a-b-c-d-e-|
        ...       a=Segment("content", "chunk", "Hi")
        ...       b=Segment("tool_call", "open", "<tool_call>")
        ...       c=Segment("tool_call", "chunk", '{"name": "f", "arguments": {"n": 5')
        ...       d=Segment("tool_call", "chunk", "}}")
        ...       e=Segment("tool_call", "close", "</tool_call>")
        operator: tool_calls(id_factory=lambda index: f"call_{index}")
        result:   -a---(bc)-(fgh)---|
        ...       a=Segment("content", "chunk", "Hi")
        ...       b=ToolCallStart(0, "call_0", "f")
        ...       c=ToolCallDelta(0, '{"n": 5')
        ...       f=ToolCallValue(0, ("n",), 5)
        ...       g=ToolCallDelta(0, "}")
        ...       h=ToolCallEnd(0, "call_0", "f", {"n": 5}, '{"n": 5}')

    With ``on_invalid="cancel"`` an unknown tool ends the stream at the character that rules it
    out (the ``p`` of ``nope``), and the upstream is disposed there::

        source:   -a-b-c-d-|
        ...       a=Segment("tool_call", "open", "<tool_call>")
        ...       b=Segment("tool_call", "chunk", '{"name": "no')
        ...       c=Segment("tool_call", "chunk", 'pe"}')
        ...       d=Segment("tool_call", "close", "</tool_call>")
        operator: tool_calls([{"function": {"name": "now"}}], on_invalid="cancel")
        result:   -----(i|)
        ... i=ToolCallInvalid(0, "unknown tool 'nop...' (known: 'now')", 12, '<tool_call>{"name": "nope"}')
        upstream: ^----!
    """
    fmt = tool_format(format, "tool_calls")
    if not isinstance(channel, str) or not channel:
        raise ValueError(f"tool_calls: channel must be a non-empty str, got {describe(channel)}")
    if on_invalid not in _ON_INVALID:
        raise ValueError(f"tool_calls: on_invalid is 'report', 'cancel' or 'error', got {on_invalid!r}")
    if id_factory is not None and not callable(id_factory):
        raise TypeError(f"tool_calls: id_factory must be callable, got {describe(id_factory)}")
    compiled = compile_tools(tools, "tool_calls")
    invalid_at: Literal["region_end", "decision"] = "region_end" if on_invalid == "report" else "decision"

    def make_sink(observer: abc.ObserverBase[Any]) -> OperatorSink[Any, Any]:
        parser = ToolCallParser(fmt, compiled, id_factory=id_factory, invalid_at=invalid_at)
        return _ToolCallsSink(observer, parser, channel, on_invalid)

    return operator("tool_calls", make_sink)


class _ToolCallsSink(OperatorSink[Any, Any]):
    __slots__ = ("channel", "on_invalid", "parser")

    def __init__(
        self, observer: abc.ObserverBase[Any], parser: ToolCallParser, channel: str, on_invalid: str
    ) -> None:
        super().__init__("tool_calls", observer)
        self.parser = parser
        self.channel = channel
        self.on_invalid = on_invalid

    def on_next(self, value: Any) -> None:
        if not isinstance(value, Segment):
            raise TypeError(f"tool_calls: expected Segment items, got {describe(value)}")
        if value.channel != self.channel:
            self.observer.on_next(value)
            return
        self._emit(self.parser.feed(value))

    def _emit(self, events: list[ToolCallEvent | Segment]) -> None:
        for event in events:
            if isinstance(event, ToolCallInvalid) and self.on_invalid != "report":
                if self.on_invalid == "error":
                    self.fail(ToolCallError(event))
                    return
                self.observer.on_next(event)
                self.end(Finish(FinishReason.STOP))
                return
            self.observer.on_next(event)

    def on_completed(self) -> None:
        self._emit(self.parser.finish())
        self.end(Finish(FinishReason.EOS), dispose=False)
