"""The ``json_patches`` operator: a JSON answer, or a tool call's arguments, as it streams ->
settled values as RFC 6902 ``add`` operations (SEMANTICS §15)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reactivex import Observable, abc

from rxstream.channels import ToolCallDelta
from rxstream.channels._json_stream import (
    ARR_END,
    ARR_START,
    DEFAULT_MAX_DEPTH,
    ERROR,
    KEY,
    OBJ_END,
    OBJ_START,
    JsonStream,
)
from rxstream.chat import TextDelta

from ._sink import OperatorSink, describe, operator

__all__ = ["JsonPatch", "json_patches"]

Pointer = tuple[str | int, ...]


def _escape(part: str | int) -> str:
    return str(part).replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True, slots=True)
class JsonPatch:
    """One settled value: an RFC 6902 ``add`` of ``value`` at ``path`` in the document being
    streamed (the answer, or tool call ``call``'s arguments).

    Attributes:
        pointer: the path as keys and list indices (``("items", 0, "name")``; ``()``: the root).
        value: the value; an object or list is added empty (``{}``, ``[]``) when it opens, and its
            members follow as they settle.
        call: the tool call's index for a call's arguments; None for the answer.
    """

    pointer: Pointer
    value: Any
    call: int | None = None

    @property
    def path(self) -> str:
        """The RFC 6901 JSON Pointer (``"/items/0/name"``; ``""``: the root)."""
        return "".join("/" + _escape(p) for p in self.pointer)

    def operation(self) -> dict[str, Any]:
        """The RFC 6902 operation: ``{"op": "add", "path": ..., "value": ...}``."""
        return {"op": "add", "path": self.path, "value": self.value}

    def apply(self, document: Any) -> Any:
        """``document`` with this patch applied (RFC 6902 ``add``: a member is set, a list index
        equal to the list's length appends); returns the document (a new root for the root's
        patch). An opened object or list is added as a fresh empty one."""
        value = self.value
        if isinstance(value, dict | list):
            value = type(value)(value)
        if not self.pointer:
            return value
        target = document
        for part in self.pointer[:-1]:
            target = target[part]
        last = self.pointer[-1]
        if isinstance(target, list):
            assert isinstance(last, int)
            target.insert(last, value)
        else:
            target[last] = value
        return document


def json_patches(*, max_depth: int = DEFAULT_MAX_DEPTH) -> Callable[[Observable[Any]], Observable[JsonPatch]]:
    """Turn a streamed JSON document into its values, each emitted the moment it is settled.

    Items: ``str`` (the answer's text, say after :func:`~rxstream.operators.text_pipeline` with a
    ``json_schema`` format), :class:`~rxstream.chat.TextDelta` of the answer (``content``) and
    :class:`~rxstream.channels.ToolCallDelta` (each call's arguments, a document of its own); other
    items (reasoning, tool-call starts and ends) are skipped. Each value becomes a
    :class:`JsonPatch`: a consumer that applies them (:meth:`JsonPatch.apply`) holds, after the last,
    the same object as ``json.loads`` of the whole text, for every chunking of the text -- and
    before that, every settled part of it. A string is settled at its closing quote, a number at
    the character after it, ``true``/``false``/``null`` at their last letter, an object or list
    when it opens (empty) and its members as they settle.

    Text that cannot be JSON is a ``ValueError`` to ``on_error`` naming the position (so is an
    answer that ended before its document did); nesting deeper than ``max_depth`` too.

    Marble diagram::

        source:   -a---b-----c-|     a='{"n": 1', b='2, "t": [tr', c='ue]}'
        operator: json_patches()
        result:   -x---(yz)-----w-|  x=JsonPatch((), {}), y=JsonPatch(("n",), 12)
        ...                          z=JsonPatch(("t",), []), w=JsonPatch(("t", 0), True)
    """
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1:
        raise ValueError(f"json_patches: max_depth must be a positive int, got {max_depth!r}")

    def make_sink(observer: abc.ObserverBase[JsonPatch]) -> OperatorSink[Any, JsonPatch]:
        return _PatchSink(observer, max_depth)

    return operator("json_patches", make_sink)


class _Document:
    """One document's parser and where its next value goes."""

    __slots__ = ("call", "frames", "stream")

    def __init__(self, call: int | None, max_depth: int) -> None:
        self.call = call
        self.stream = JsonStream(max_depth=max_depth)
        # each open container: [pointer, is_object, next list index, the key of the next value]
        self.frames: list[list[Any]] = []

    def feed(self, text: str, emit: Callable[[JsonPatch], None]) -> None:
        events = self.stream.feed(text)
        if events:
            self.emit(events, emit)

    def emit(self, events: list[Any], emit: Callable[[JsonPatch], None]) -> None:
        frames, call = self.frames, self.call
        for event in events:
            kind = event[0]
            if kind == KEY:
                frames[-1][3] = event[3]
                continue
            if kind == OBJ_END or kind == ARR_END:
                frames.pop()
                continue
            if kind == ERROR:
                where = "the answer" if call is None else f"tool call {call}'s arguments"
                raise ValueError(f"json_patches: not JSON in {where} at character {event[1]}: {event[2]}")
            if frames:
                top = frames[-1]
                if top[1]:
                    pointer = (*top[0], top[3])
                else:
                    pointer = (*top[0], top[2])
                    top[2] += 1
            else:
                pointer = ()
            if kind == OBJ_START:
                emit(JsonPatch(pointer, {}, call))
                frames.append([pointer, True, 0, ""])
            elif kind == ARR_START:
                emit(JsonPatch(pointer, [], call))
                frames.append([pointer, False, 0, ""])
            else:  # STRING, NUMBER, LITERAL: (kind, start, end, value, ...)
                emit(JsonPatch(pointer, event[3], call))

    def finish(self, emit: Callable[[JsonPatch], None]) -> None:
        self.emit(self.stream.end(), emit)
        if not self.stream.complete:
            where = "the answer" if self.call is None else f"tool call {self.call}'s arguments"
            raise ValueError(f"json_patches: {where} ended before the JSON did")


class _PatchSink(OperatorSink[Any, JsonPatch]):
    __slots__ = ("answer", "calls", "max_depth")

    def __init__(self, observer: abc.ObserverBase[JsonPatch], max_depth: int) -> None:
        super().__init__("json_patches", observer)
        self.max_depth = max_depth
        self.answer: _Document | None = None
        self.calls: dict[int, _Document] = {}

    def on_next(self, value: Any) -> None:
        if type(value) is str:
            doc = self.answer
            if doc is None:
                doc = self.answer = _Document(None, self.max_depth)
            events = doc.stream.feed(value)
            if events:
                doc.emit(events, self.observer.on_next)
        elif isinstance(value, TextDelta):
            if value.kind == "content":
                self.on_next(value.text)
        elif isinstance(value, ToolCallDelta):
            doc = self.calls.get(value.index)
            if doc is None:
                doc = self.calls[value.index] = _Document(value.index, self.max_depth)
            doc.feed(value.text, self.observer.on_next)
        elif not hasattr(value, "index"):  # tool-call starts, ends and invalid calls are skipped
            raise TypeError(f"json_patches: expected text or tool-call deltas, got {describe(value)}")

    def on_completed(self) -> None:
        for doc in [self.answer, *self.calls.values()]:  # an error here goes to on_error
            if doc is not None:
                doc.finish(self.observer.on_next)
        self.done = True
        self.observer.on_completed()
