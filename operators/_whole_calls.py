"""The ``whole_tool_calls`` operator: each tool call held until it is valid, then sent whole."""

from __future__ import annotations

from collections.abc import Callable

from reactivex import Observable, abc

from rxstream._finish import Finish, FinishReason
from rxstream.channels import ToolCallDelta, ToolCallEnd, ToolCallInvalid, ToolCallStart, ToolCallValue

from ._sink import OperatorSink, operator

__all__ = ["whole_tool_calls"]


def whole_tool_calls() -> Callable[[Observable[object]], Observable[object]]:
    r"""Hold each tool call until its arguments are complete and valid, then send it whole.

    A stream of :func:`tool_calls` events (with any other items, such as
    :class:`~rxstream.chat.TextDelta`) where a call's :class:`~rxstream.channels.ToolCallStart`,
    :class:`~rxstream.channels.ToolCallDelta` and :class:`~rxstream.channels.ToolCallValue`
    events wait for its :class:`~rxstream.channels.ToolCallEnd`; then they go out together, in
    their order, its deltas joined into one. A call that turns out invalid (its
    :class:`~rxstream.channels.ToolCallInvalid`), or is still open when the stream ends or fails,
    is dropped: nothing of it goes out but the ``ToolCallInvalid`` (SEMANTICS §9.2). Items after
    a held call's start wait with it, so the order of everything is kept.

    So a client never receives part of a call that is not one: what the OpenAI, Responses and
    Anthropic streams need when decoding does not constrain the calls. The cost is the
    arguments' streaming: a call arrives in one frame, when it ends.

    A call is held only as long as its region lasts, which the generation's token budget bounds.

    Marble diagram (``c`` makes ``{"n": 5`` invalid under no tool's schema; ``d`` is a valid call)::

        source:   -a-b-c-d-e-|
        ...       a=TextDelta("content", "Hi")
        ...       b=ToolCallStart(0, "call_0", "f")
        ...       c=ToolCallInvalid(0, "bad", 3, "raw")
        ...       d=ToolCallStart(1, "call_1", "g")
        ...       e=ToolCallEnd(1, "call_1", "g", {}, "{}")
        operator: whole_tool_calls()
        result:   -a---c---(de)-|
        ...       a=TextDelta("content", "Hi")
        ...       c=ToolCallInvalid(0, "bad", 3, "raw")
        ...       d=ToolCallStart(1, "call_1", "g")
        ...       e=ToolCallEnd(1, "call_1", "g", {}, "{}")
    """

    def make_sink(observer: abc.ObserverBase[object]) -> OperatorSink[object, object]:
        return _WholeCallsSink(observer)

    return operator("whole_tool_calls", make_sink)


class _WholeCallsSink(OperatorSink[object, object]):
    __slots__ = ("held", "open")

    def __init__(self, observer: abc.ObserverBase[object]) -> None:
        super().__init__("whole_tool_calls", observer)
        self.held: list[object] = []  # items waiting behind the first open call's start, in order
        self.open: set[int] = set()  # the indexes of the calls started and not yet ended

    def on_next(self, value: object) -> None:
        if isinstance(value, ToolCallStart):
            self.open.add(value.index)
        elif isinstance(value, ToolCallInvalid):
            self._drop(value.index)
        elif isinstance(value, ToolCallEnd):
            self.open.discard(value.index)
        if not self.held and not self._waits(value):
            self.emit(value)
            return
        self.held.append(value)
        self._flush()

    def _waits(self, value: object) -> bool:
        index = getattr(value, "index", None)
        return isinstance(value, ToolCallStart) and index in self.open

    def _drop(self, index: int) -> None:
        """Forget call ``index``: its held events go, the items around them stay."""
        if index in self.open:
            self.open.discard(index)
            self.held = [v for v in self.held if not _of_call(v, index)]

    def _flush(self) -> None:
        """Send the held items up to the start of the first call still open."""
        sent = 0
        for value in self.held:
            if isinstance(value, ToolCallStart) and value.index in self.open:
                break
            sent += 1
        ready, self.held = self.held[:sent], self.held[sent:]
        for value in _joined(ready):
            self.emit(value)

    def on_completed(self) -> None:
        for index in list(self.open):
            self._drop(index)
        self._flush()
        self.end(Finish(FinishReason.EOS), dispose=False)

    def on_error(self, error: Exception) -> None:
        self.held.clear()
        self.open.clear()
        super().on_error(error)


def _joined(items: list[object]) -> list[object]:
    """``items`` with each call's deltas joined into one, where its first delta was."""
    out: list[object] = []
    at: dict[int, tuple[int, str]] = {}  # a call's index -> (its joined delta's place, its text)
    for value in items:
        if isinstance(value, ToolCallDelta):
            if value.index in at:
                k, text = at[value.index]
                at[value.index] = k, text + value.text
                out[k] = ToolCallDelta(value.index, text + value.text)
                continue
            at[value.index] = len(out), value.text
        out.append(value)
    return out


def _of_call(value: object, index: int) -> bool:
    """Whether ``value`` is an event of call ``index`` that a drop takes back (not its report)."""
    return isinstance(value, ToolCallStart | ToolCallDelta | ToolCallValue) and value.index == index
