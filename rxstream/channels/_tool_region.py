"""What every tool-call format's reader shares: :class:`Region` (one region's text, its current
call, its failure), :class:`Log` (the text, sliceable by position) and :class:`Tracker` (the path
of each value of a JSON value)."""

from __future__ import annotations

import json
import secrets
from abc import ABC, abstractmethod
from bisect import bisect_right
from typing import TYPE_CHECKING, Any, Final

from ._json_schema import SchemaNode, utf16
from ._json_stream import (
    ARR_END,
    ARR_START,
    KEY,
    LIT_START,
    LITERAL,
    NUM_START,
    NUMBER,
    OBJ_END,
    OBJ_START,
    STR_START,
    STRING,
    JsonEvent,
)
from ._segment import Segment
from ._tool_events import ToolCallEnd, ToolCallEvent, ToolCallInvalid, ToolCallStart

if TYPE_CHECKING:
    from ._tool_parser import ToolCallParser

__all__ = ["WS_CHARS", "Log", "Region", "Tracker", "default_id", "schema_error", "shown"]

WS_CHARS: Final = " \t\r\n"


def schema_error(name: str, message: str) -> str:
    return f"arguments do not match the schema of {name!r}: {message}"


def shown(old: bytes, written: str, start: int, pos: int) -> str:
    """A string as far as the character at ``pos`` that ruled it out (``written`` at ``start``
    follows the UTF-16 prefix ``old``)."""
    return old.decode("utf-16-le", "surrogatepass") + written[: pos - start + 1]


def default_id(_: int) -> str:
    return "call_" + secrets.token_hex(12)


class Log:
    """The text of a region, sliceable by position."""

    __slots__ = ("chunks", "end", "starts")

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.starts: list[int] = []
        self.end = 0

    def append(self, text: str) -> None:
        if text:
            self.starts.append(self.end)
            self.chunks.append(text)
            self.end += len(text)

    def slice(self, a: int, b: int) -> str:
        if a >= b:
            return ""
        k = bisect_right(self.starts, a) - 1
        out: list[str] = []
        while a < b:
            chunk = self.chunks[k]
            start = self.starts[k]
            out.append(chunk[a - start : b - start])
            a = start + len(chunk)
            k += 1
        return "".join(out)

    def text(self) -> str:
        return "".join(self.chunks)


class Tracker:
    """The path of each value of one JSON value (the arguments, or one parameter's value)."""

    __slots__ = ("frames", "prefix")

    def __init__(self, prefix: tuple[str | int, ...] = ()) -> None:
        self.prefix = prefix
        self.frames: list[list[Any]] = []  # [is_array, component, count]

    def path(self) -> tuple[str | int, ...]:
        return self.prefix + tuple(f[1] for f in self.frames)

    def _next(self) -> None:
        if self.frames and self.frames[-1][0]:
            frame = self.frames[-1]
            frame[1] = frame[2]
            frame[2] += 1

    def on(self, ev: JsonEvent) -> tuple[str, Any, Any, int] | None:
        """``("leaf", path, value, end)`` for a settled scalar (``end``: the index after its text),
        ``("open"|"close", depth, None, position)`` for a container (``depth``: the length of its
        path, known without building it: a container costs O(1) at any depth), else None."""
        k = ev[0]
        if k == KEY:
            self.frames[-1][1] = ev[3]
        elif k == STR_START or k == NUM_START or k == LIT_START:
            self._next()
        elif k == STRING or k == NUMBER or k == LITERAL:
            return ("leaf", self.path(), ev[3], ev[2])
        elif k == OBJ_START or k == ARR_START:
            self._next()
            depth = len(self.prefix) + len(self.frames)
            self.frames.append([k == ARR_START, None, 0])
            return ("open", depth, None, ev[1])
        elif k == OBJ_END or k == ARR_END:
            self.frames.pop()
            return ("close", len(self.prefix) + len(self.frames), None, ev[1])
        return None


class Region(ABC):
    """One tool-call region: its text, its current call, its failure (a format's subclass reads
    the text: :meth:`_read` and :meth:`_at_close`)."""

    def __init__(self, parser: ToolCallParser, segment: Segment | None) -> None:
        self.p = parser
        self.open_text = segment.text if segment is not None else ""
        self.segment = segment
        self.log = Log()
        self.out: list[ToolCallEvent | Segment] = []
        self.failed: tuple[int, str, int] | None = None  # (index, error, position)
        self.index = -1
        self.call_id = ""
        self.name = ""
        self.started = False
        self.calls = 0  # calls begun in this region

    # the subclasses' parts
    def begin(self) -> list[ToolCallEvent | Segment]:
        return []

    @abstractmethod
    def _read(self, text: str, base: int) -> None:
        """Parse ``text`` (which starts at offset ``base`` of the region)."""

    @abstractmethod
    def _at_close(self, reason: str | None) -> None:
        """The region closed (``reason``: why, None for its close delimiter)."""

    # shared
    def feed_text(self, text: str) -> list[ToolCallEvent | Segment]:
        base = self.log.end
        self.log.append(text)
        out: list[ToolCallEvent | Segment] = []
        self.out = out
        if self.failed is None and text:
            self._read(text, base)
        return out

    def close(self, text: str, reason: str | None) -> list[ToolCallEvent | Segment]:
        out: list[ToolCallEvent | Segment] = []
        self.out = out
        if self.failed is None:
            self._at_close(reason)
        if self.failed is not None and not self.p.report_at_decision:
            index, error, position = self.failed
            out.append(ToolCallInvalid(index, error, position, self.open_text + self.log.text() + text))
        return out

    def start_call(self, name: str) -> None:
        p = self.p
        self.index = p.next_index
        p.next_index += 1
        self.call_id = p.new_id(self.index)
        self.name = name
        self.started = True
        self.out.append(ToolCallStart(self.index, self.call_id, name))

    def end_call(self, arguments_text: str) -> None:
        arguments = json.loads(arguments_text)
        self.out.append(ToolCallEnd(self.index, self.call_id, self.name, arguments, arguments_text))
        self.started = False

    def fail(self, position: int, error: str) -> None:
        if self.failed is not None:
            return
        self.before_fail(position)
        index = self.index if self.started else self.p.next_index
        self.failed = (index, error, position)
        if self.p.report_at_decision:
            self.out.append(ToolCallInvalid(index, error, position, self.open_text + self.log.text()))

    def before_fail(self, position: int) -> None:  # noqa: B027 - an optional hook, nothing by default
        """Send what is valid before ``position`` (the deltas up to it)."""

    def tool_schema(self, name: str) -> SchemaNode | None:
        tools = self.p.tools
        if tools is None:
            return None
        tool = tools.get(name)
        return None if tool is None else tool.schema

    def name_candidates(self) -> tuple[bytes, ...] | None:
        tools = self.p.tools
        return None if tools is None else tuple(utf16(n) for n in tools)

    def unknown_name(self, name: str) -> str:
        tools = self.p.tools or {}
        known = ", ".join(repr(n) for n in list(tools)[:10]) + (", ..." if len(tools) > 10 else "")
        return f"unknown tool {name!r} (known: {known})"
