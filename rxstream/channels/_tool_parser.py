"""``ToolCallParser``: tool-call regions (``Segment`` items) to tool-call events, as they stream.

One parser reads one stream: the segments of its tool-call channel, region after region
(SEMANTICS §9). For each call it emits

- :class:`ToolCallStart` once the tool's name is known (and allowed);
- :class:`ToolCallDelta` pieces of the arguments' JSON text: joined, exactly
  ``ToolCallEnd.arguments_text``. For the JSON formats that is the model's own text of the
  arguments value, as written (sent as it arrives, up to the last character known to be valid);
  for ``xml`` it is JSON generated from the parameters;
- :class:`ToolCallValue` for each value once settled (SEMANTICS §9: a string at its closing
  quote, a number at the character after it, ``true``/``false``/``null`` at their last letter,
  an object or array at its closing bracket): every scalar at any depth, and every argument
  (a key of the arguments object) whatever its type. Each comes after the deltas that hold its
  text;
- :class:`ToolCallEnd` with the parsed arguments when the call is complete;
- :class:`ToolCallInvalid` for invalid JSON, a schema violation, an unknown tool name or a
  region that ends too early, with the position of the first character after which no
  continuation could be valid. The rest of that region is skipped (other calls in it included);
  the next region starts afresh.

Formats (:data:`~._spec.ToolFormat`):

- ``json``: ``{"name": ..., "arguments": {...}}`` per region (``"parameters"`` is taken for
  ``"arguments"``; other keys are ignored; several objects one after another are several calls).
  When ``"arguments"`` comes before ``"name"``, its deltas and values are held until the name
  is known (and checked against that tool's schema then). A call without arguments has ``{}``.
- ``json-list``: one JSON list of such objects per region (Mistral ``[TOOL_CALLS]``).
- ``llama3``: as ``json`` with ``"parameters"`` (``"arguments"`` is taken too); calls may also
  be separated by ``;``.
- ``xml``: ``<function=NAME>`` then ``<parameter=KEY>`` VALUE ``</parameter>`` ... then
  ``</function>`` (Qwen3-Coder). One newline after the opening tag and one before the closing
  tag are not part of the value; a value also ends at ``<parameter=`` or ``</function>`` (a
  missing ``</parameter>``). A value becomes JSON by its schema: a ``string`` parameter is a JSON
  string, streamed as it comes; ``boolean``/``null`` accept any letter case (``True``, ``None``);
  numbers, objects and arrays must be JSON of their type; a parameter whose type allows strings
  and others, or that has no schema, is that JSON when its text is a number, ``true``/``false``/
  ``null``, an object or an array valid for it, else the text as a string (a quoted text stays
  a string, quotes included). Non-string values go out (delta and values) when their parameter
  ends. Positions of string values are where their text is decided (held text included).
- ``harmony``: the name is the ``name`` capture of the region's opening delimiter (a leading
  ``functions.`` is dropped when that is how the tool is known), the region's text is the
  arguments object (gpt-oss).

Call ids are ``call_`` and 24 hex digits from :mod:`secrets`, or ``id_factory(index)``.
"""

from __future__ import annotations

import functools
import json
import secrets
from abc import ABC, abstractmethod
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from ._json_schema import (
    ANY,
    SchemaChecker,
    SchemaError,
    SchemaNode,
    compile_schema,
    prefix_failure,
    utf16,
)
from ._json_stream import (
    ARR_END,
    ARR_START,
    ERROR,
    KEY,
    LIT_START,
    LITERAL,
    NUM_START,
    NUMBER,
    OBJ_END,
    OBJ_START,
    STR_PART,
    STR_START,
    STRING,
    JsonEvent,
    JsonStream,
)
from ._segment import Segment
from ._spec import ToolFormat

__all__ = [
    "Tool",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallError",
    "ToolCallEvent",
    "ToolCallInvalid",
    "ToolCallParser",
    "ToolCallStart",
    "ToolCallValue",
    "compile_tools",
]

_FORMATS: Final = ("json", "json-list", "llama3", "xml", "harmony")


# -- events -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """A call begins: its tool's name is known. ``index`` numbers the calls of a stream from 0."""

    index: int
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """More of call ``index``'s arguments text (the deltas of a call, joined, are its
    ``arguments_text``)."""

    index: int
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallValue:
    """A settled value of call ``index``'s arguments: ``path`` is its keys and list indices
    from the arguments object (``("cities", 0)``)."""

    index: int
    path: tuple[str | int, ...]
    value: Any


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    """Call ``index`` is complete: ``arguments`` is ``json.loads(arguments_text)``."""

    index: int
    id: str
    name: str
    arguments: dict[str, Any]
    arguments_text: str


@dataclass(frozen=True, slots=True)
class ToolCallInvalid:
    """A tool call that cannot be valid.

    Attributes:
        index: the call's index (for a call whose start was never emitted, the index the next
            call will get).
        error: what is wrong (invalid JSON, a schema violation, an unknown tool name, a region
            that ended too early).
        position: the first character after which no continuation could be valid, as an index
            into the region's text (the text after its opening delimiter; its length when the
            region ended too early; 0 for a bad name in a ``harmony`` opening delimiter).
        raw: the region's text with its delimiters, as received (up to the deciding segment
            when the stream is cancelled there), so that nothing is lost.
    """

    index: int
    error: str
    position: int
    raw: str


ToolCallEvent: TypeAlias = ToolCallStart | ToolCallDelta | ToolCallValue | ToolCallEnd | ToolCallInvalid


class ToolCallError(ValueError):
    """An invalid tool call, as an error (``tool_calls(on_invalid="error")``): ``event`` says why."""

    def __init__(self, event: ToolCallInvalid) -> None:
        super().__init__(f"invalid tool call {event.index} at {event.position}: {event.error}")
        self.event = event


# -- tools --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tool:
    """A tool a call may name: its name and compiled parameter schema."""

    name: str
    schema: SchemaNode
    parameters: Mapping[str, Any] | None = None


def compile_tools(tools: Iterable[Any] | None, owner: str = "tool_calls") -> dict[str, Tool] | None:
    """``{name: Tool}`` from an OpenAI tools list (``[{"type": "function", "function": {"name",
    "description", "parameters"}}]``; the flat ``{"type": "function", "name", "parameters"}`` is
    taken too), or None for None (any name, no schema).

    Raises:
        TypeError / ValueError: a bad entry (the message names it: ``tools[2]``), a schema that
            does not compile, or a name given twice.
    """
    if tools is None:
        return None
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Iterable):
        raise TypeError(f"{owner}: tools must be a list of tool definitions, got {type(tools).__name__}")
    out: dict[str, Tool] = {}
    for i, entry in enumerate(tools):
        where = f"{owner}: tools[{i}]"
        if isinstance(entry, Tool):
            tool = entry
        else:
            if not isinstance(entry, Mapping):
                raise TypeError(f"{where}: expected a mapping, got {type(entry).__name__}")
            kind = entry.get("type", "function")
            if kind != "function":
                raise ValueError(f"{where}: only type 'function' is supported, got {kind!r}")
            spec = entry.get("function", entry)
            if not isinstance(spec, Mapping):
                raise TypeError(f"{where}: 'function' must be a mapping, got {type(spec).__name__}")
            name = spec.get("name")
            if not isinstance(name, str) or not name:
                raise ValueError(f"{where}: the function needs a non-empty string 'name', got {name!r}")
            params = spec.get("parameters")
            if params is None:
                schema = ANY
            else:
                try:
                    schema = _schema(params)
                except SchemaError as exc:
                    raise ValueError(f"{where} ({name}): {exc}") from None
            tool = Tool(name, schema, params)
        if tool.name in out:
            raise ValueError(f"{where}: tool {tool.name!r} is defined twice")
        out[tool.name] = tool
    return out


def _schema(params: Any) -> SchemaNode:
    """``params`` compiled, once per distinct schema: a server compiles each request's tools when
    it checks them and again for its pipeline, and clients send the same tools again and again."""
    try:
        key = json.dumps(params, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):  # not JSON (a tuple key, a set...): compiled each time
        return compile_schema(params, "parameters")
    return _schema_of(key)


@functools.lru_cache(maxsize=128)
def _schema_of(key: str) -> SchemaNode:
    return compile_schema(json.loads(key), "parameters")


def _schema_error(name: str, message: str) -> str:
    return f"arguments do not match the schema of {name!r}: {message}"


def _shown(old: bytes, written: str, start: int, pos: int) -> str:
    """A string as far as the character at ``pos`` that ruled it out (``written`` at ``start``
    follows the UTF-16 prefix ``old``)."""
    return old.decode("utf-16-le", "surrogatepass") + written[: pos - start + 1]


def _default_id(_: int) -> str:
    return "call_" + secrets.token_hex(12)


# -- the parser ---------------------------------------------------------------------------------
class ToolCallParser:
    """Tool-call events from the segments of one tool-call channel (see the module docstring).

    Args:
        format: how the regions are written (:data:`~._spec.ToolFormat`).
        tools: the tools a call may name (an OpenAI tools list, or :func:`compile_tools`'
            result); None: any name, arguments not checked.
        id_factory: ``index -> id`` for the calls (default: ``call_`` + 24 random hex digits).
        invalid_at: when a :class:`ToolCallInvalid` goes out: ``"region_end"`` (when its region
            ends, with the region's whole text in ``raw``) or ``"decision"`` (at the segment
            that decides it, with the text so far).

    :meth:`feed` takes the channel's segments (``open``, ``chunk``, ``close``, ``malformed``);
    :meth:`finish` ends the stream (a region still open is unclosed). A ``close`` or
    ``malformed`` segment with no region open is returned as it is.
    """

    __slots__ = ("_format", "_id_factory", "_invalid_at", "_region", "next_index", "tools")

    def __init__(
        self,
        format: ToolFormat = "json",
        tools: Iterable[Any] | Mapping[str, Tool] | None = None,
        *,
        id_factory: Callable[[int], str] | None = None,
        invalid_at: Literal["region_end", "decision"] = "region_end",
    ) -> None:
        if format not in _FORMATS:
            raise ValueError(f"ToolCallParser: unknown format {format!r} (known: {', '.join(_FORMATS)})")
        if invalid_at not in ("region_end", "decision"):
            raise ValueError(f"ToolCallParser: invalid_at is 'region_end' or 'decision', got {invalid_at!r}")
        if id_factory is not None and not callable(id_factory):
            raise TypeError(f"ToolCallParser: id_factory must be callable, got {type(id_factory).__name__}")
        self._format: ToolFormat = format
        self.tools: dict[str, Tool] | None = (
            dict(tools)
            if isinstance(tools, Mapping) and all(isinstance(t, Tool) for t in tools.values())
            else compile_tools(tools, "ToolCallParser")
        )
        self._id_factory = id_factory or _default_id
        self._invalid_at = invalid_at
        self._region: _Region | None = None
        self.next_index = 0

    @property
    def in_region(self) -> bool:
        """Whether a region is open."""
        return self._region is not None

    def new_id(self, index: int) -> str:
        call_id = self._id_factory(index)
        if not isinstance(call_id, str):
            raise TypeError(f"tool_calls: id_factory must return a str, got {type(call_id).__name__}")
        return call_id

    @property
    def report_at_decision(self) -> bool:
        return self._invalid_at == "decision"

    def feed(self, segment: Segment) -> list[ToolCallEvent | Segment]:
        """Read one segment of the tool-call channel; return the events it settles."""
        event = segment.event
        region = self._region
        if event == "chunk":
            if region is None:
                region = self._region = self._new_region(None)
                out = region.begin()
            else:
                out = []
            out.extend(region.feed_text(segment.text))
            return out
        if event == "open":
            out = self._close("a new tool call region opened first", "") if region is not None else []
            region = self._region = self._new_region(segment)
            out.extend(region.begin())
            return out
        if region is None:  # a close or malformed segment with nothing open
            return [segment]
        if event == "close":
            return self._close(None, segment.text)
        return self._close(segment.reason or "malformed input", segment.text)

    def finish(self) -> list[ToolCallEvent | Segment]:
        """The stream ended: close a region still open (unclosed)."""
        if self._region is None:
            return []
        return self._close("the stream ended inside a tool call region", "")

    def _close(self, reason: str | None, text: str) -> list[ToolCallEvent | Segment]:
        region = self._region
        assert region is not None
        self._region = None
        return list(region.close(text, reason))

    def _new_region(self, segment: Segment | None) -> _Region:
        if self._format == "xml":
            return _XmlRegion(self, segment)
        return _JsonRegion(self, self._format, segment)


# -- regions ------------------------------------------------------------------------------------
class _Log:
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


class _Tracker:
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


class _Region(ABC):
    """One tool-call region: its text, its current call, its failure (a format's subclass reads
    the text: :meth:`_read` and :meth:`_at_close`)."""

    def __init__(self, parser: ToolCallParser, segment: Segment | None) -> None:
        self.p = parser
        self.open_text = segment.text if segment is not None else ""
        self.segment = segment
        self.log = _Log()
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


class _JsonRegion(_Region):
    """A region in one of the JSON formats (``json``, ``json-list``, ``llama3``, ``harmony``)."""

    def __init__(self, parser: ToolCallParser, fmt: ToolFormat, segment: Segment | None) -> None:
        super().__init__(parser, segment)
        self.fmt = fmt
        self.tok = JsonStream(
            detail=True, multiple=fmt in ("json", "llama3"), separators=";" if fmt == "llama3" else ""
        )
        self.depth = 0
        self.call_depth = 2 if fmt == "json-list" else 1
        self.field: str | None = None  # the call object's key whose value is being read
        self.fields: set[str] = set()
        self.name_open = False
        self.name_units = b""
        self.name_parted = False
        self.in_args = False
        self.args_depth = 0
        self.args_start = -1
        self.args_end = -1
        self.sent = 0
        self.args_parts: list[str] = []
        self.pending: list[JsonEvent] = []
        self.checker: SchemaChecker | None = None
        self.tracker = _Tracker()
        self.cstart = 0
        self.ending: str | None = None

    def begin(self) -> list[ToolCallEvent | Segment]:
        out: list[ToolCallEvent | Segment] = []
        self.out = out
        if self.fmt != "harmony":
            return out
        seg = self.segment
        name = seg.captures.get("name", "") if seg is not None else ""
        tools = self.p.tools
        if name.startswith("functions.") and (tools is None or name not in tools):
            name = name[len("functions.") :]
        if not name:
            self.fail(0, "no tool name in the opening delimiter (its 'name' capture)")
        elif tools is not None and name not in tools:
            self.fail(0, self.unknown_name(name))
        else:
            self._begin_call()
            self._name_known(name)
        return out

    def _begin_call(self) -> None:
        self.calls += 1
        self.field = None
        self.fields = set()
        self.in_args = False
        self.args_depth = 0
        self.args_start = -1
        self.args_end = -1
        self.args_parts = []
        self.pending = []
        self.checker = None
        self.tracker = _Tracker()
        self.name = ""

    # -- reading ------------------------------------------------------------------------------
    def _read(self, text: str, base: int) -> None:
        self._events(self.tok.feed(text))
        if self.failed is None and self.started and self.args_start >= 0:
            self._flush(self.log.end)

    def _at_close(self, reason: str | None) -> None:
        if not self.log.text().strip(_WS_CHARS) and (self.fmt == "harmony" or self.calls == 0):
            what = "arguments" if self.fmt == "harmony" else "tool call"
            self.fail(self.log.end, f"{reason}: no {what}" if reason else f"empty {what}")
            return
        self.ending = reason or "the region ended"
        self._events(self.tok.end())

    def _events(self, events: list[JsonEvent]) -> None:
        for ev in events:
            if self.failed is not None:
                return
            k = ev[0]
            if k == ERROR:
                self._json_error(ev[1], ev[2])
                return
            if self.in_args:
                self._args_event(ev)
                continue
            d = self.depth
            if k == OBJ_START or k == ARR_START or k == STR_START or k == NUM_START or k == LIT_START:
                self._value_start(ev, d)
            elif k == OBJ_END or k == ARR_END:
                self.depth = d - 1
                self._container_end(ev[1], d - 1)
            elif k == KEY:
                if d == self.call_depth:
                    self._key(ev)
            elif k == STR_PART:
                if self.name_open:
                    self._name_part(ev[3], ev[4], ev[1], ev[5])
            elif k == STRING:
                if self.name_open:
                    self._name_done(ev)
                elif d == self.call_depth:
                    self.field = None
            elif k == NUMBER or k == LITERAL:
                if d == self.call_depth:
                    self.field = None
            # KEY_START, NUM_PART: nothing to do at this level

    def _json_error(self, position: int, message: str) -> None:
        if self.ending is not None:
            self.fail(position, f"{self.ending} before the JSON was complete ({message})")
        else:
            self.fail(position, f"invalid JSON: {message}")

    def _value_start(self, ev: JsonEvent, d: int) -> None:
        k = ev[0]
        pos = ev[1]
        if self.fmt == "harmony":
            if d == 0:
                if k != OBJ_START:
                    self.fail(pos, "the arguments must be a JSON object")
                    return
                self._args_begin(ev)
                return
        elif d < self.call_depth:
            if self.fmt == "json-list" and d == 0:
                if k != ARR_START:
                    self.fail(pos, "expected a JSON list of tool calls")
                    return
                self.depth = 1
                return
            if k != OBJ_START:
                self.fail(pos, 'expected a tool call object {"name": ..., "arguments": {...}}')
                return
            self._begin_call()
            self.depth = d + 1
            return
        elif d == self.call_depth:
            if self.field == "name":
                if k != STR_START:
                    self.fail(pos, "the tool name must be a string")
                    return
                self.name_open = True
                self.name_units = b""
                self.name_parted = False
                return
            if self.field == "args":
                if k != OBJ_START:
                    self.fail(pos, "the arguments must be a JSON object")
                    return
                self._args_begin(ev)
                return
        if k == OBJ_START or k == ARR_START:
            self.depth = d + 1

    def _container_end(self, pos: int, d: int) -> None:
        if d == self.call_depth - 1 and self.fmt != "harmony":
            self._call_end(pos)
        elif d == self.call_depth:
            self.field = None

    def _key(self, ev: JsonEvent) -> None:
        key = ev[3]
        if key == "name":
            field = "name"
        elif key in ("arguments", "parameters"):
            field = "args"
        else:
            self.field = "skip"
            return
        if field in self.fields:
            what = "name" if field == "name" else "arguments"
            self.fail(ev[2] - 1, f"the tool call has a second {what!r}")
            return
        self.fields.add(field)
        self.field = field

    # -- the name -----------------------------------------------------------------------------
    def _name_part(self, piece: str, raw: str | None, start: int, pending: str = "") -> None:
        self.name_parted = True
        cands = self.name_candidates()
        if cands is None:
            return
        old = self.name_units
        self.name_units, bad = prefix_failure(old, piece, raw, start, cands, pending)
        if bad is not None:
            shown = _shown(old, (piece if raw is None else raw) + pending, start, bad)
            self.fail(bad, self.unknown_name(shown + "..."))

    def _name_done(self, ev: JsonEvent) -> None:
        self.name_open = False
        name = ev[3]
        if not self.name_parted:
            self._name_part(name, ev[4], ev[1] + 1)
            if self.failed is not None:
                return
        tools = self.p.tools
        if not name or (tools is not None and name not in tools):
            self.fail(ev[2] - 1, self.unknown_name(name) if name else "the tool name is empty")
            return
        self.field = None
        self._name_known(name)

    def _name_known(self, name: str) -> None:
        self.start_call(name)
        schema = self.tool_schema(name)
        self.checker = SchemaChecker(schema) if schema is not None else None
        pending = self.pending
        self.pending = []
        for ev in pending:
            self._args_process(ev)
            if self.failed is not None:
                return
        if self.args_start >= 0:
            self._flush(self.log.end)

    # -- the arguments ------------------------------------------------------------------------
    def _args_begin(self, ev: JsonEvent) -> None:
        self.in_args = True
        self.args_depth = 0
        self.args_start = ev[1]
        self.sent = ev[1]
        self._args_event(ev)

    def _args_event(self, ev: JsonEvent) -> None:
        k = ev[0]
        if k == OBJ_START or k == ARR_START:
            self.args_depth += 1
        elif k == OBJ_END or k == ARR_END:
            self.args_depth -= 1
            if self.args_depth == 0:
                self.args_end = ev[1]
                self.in_args = False
                self.field = None
        if self.started:
            self._args_process(ev)
        else:
            self.pending.append(ev)

    def _args_process(self, ev: JsonEvent) -> None:
        checker = self.checker
        if checker is not None:
            violation = checker.feed(ev)
            if violation is not None:
                self.fail(violation[0], _schema_error(self.name, violation[1]))
                return
        r = self.tracker.on(ev)
        if r is None:
            return
        what, where, value, pos = r
        index = self.index
        if what == "leaf":
            self._flush(pos)
            self.out.append(ToolCallValue(index, where, value))
        elif what == "open":
            if where == 1:
                self.cstart = pos
        elif where == 0:  # the arguments object is complete
            self._flush(pos + 1)
            if self.fmt == "harmony":
                self.end_call("".join(self.args_parts))
        elif where == 1:
            self._flush(pos + 1)
            value = json.loads(self.log.slice(self.cstart, pos + 1))
            self.out.append(ToolCallValue(index, self.tracker.path(), value))

    def _flush(self, upto: int) -> None:
        if self.args_end >= 0:
            upto = min(upto, self.args_end + 1)
        if upto > self.sent:
            text = self.log.slice(self.sent, upto)
            self.sent = upto
            self.args_parts.append(text)
            self.out.append(ToolCallDelta(self.index, text))

    def before_fail(self, position: int) -> None:
        if self.started and self.args_start >= 0:
            self._flush(position)

    def _call_end(self, pos: int) -> None:
        if not self.started:
            self.fail(pos, 'the tool call has no "name"')
            return
        if self.args_start < 0:  # no arguments: {}
            checker = self.checker
            if checker is not None:
                for ev in ((OBJ_START, pos), (OBJ_END, pos)):
                    violation = checker.feed(ev)
                    if violation is not None:
                        self.fail(pos, _schema_error(self.name, violation[1]))
                        return
            self.args_parts = ["{}"]
            self.out.append(ToolCallDelta(self.index, "{}"))
        self.end_call("".join(self.args_parts))


# -- xml ----------------------------------------------------------------------------------------
_X_OUTSIDE: Final = 0  # between functions: whitespace, then <function=
_X_TAG: Final = 1  # reading one of the tags in self.tags
_X_NAME: Final = 2  # the function name, up to '>'
_X_INSIDE: Final = 3  # inside a function: whitespace, then <parameter= or </function>
_X_PNAME: Final = 4  # a parameter name, up to '>'
_X_VALUE: Final = 5  # a parameter value, up to its end tag

_FUNC_OPEN: Final = "<function="
_PARAM_OPEN: Final = "<parameter="
_PARAM_CLOSE: Final = "</parameter>"
_FUNC_CLOSE: Final = "</function>"
_VALUE_ENDS: Final = (_PARAM_CLOSE, _PARAM_OPEN, _FUNC_CLOSE)
_LONGEST_END: Final = max(len(t) for t in _VALUE_ENDS)
_WS_CHARS: Final = " \t\r\n"


def _json_string_body(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


class _XmlRegion(_Region):
    """A region in the ``xml`` format (Qwen3-Coder)."""

    def __init__(self, parser: ToolCallParser, segment: Segment | None) -> None:
        super().__init__(parser, segment)
        self.st = _X_OUTSIDE
        self.tags: tuple[str, ...] = ()
        self.tag_k = 0
        self.name_start = 0
        self.units = b""
        self.text_parts: list[str] = []
        self.schema: SchemaNode | None = None
        self.alts: list[SchemaNode] = []
        self.keys: set[str] = set()
        self.key = ""
        self.args_parts: list[str] = []
        # the value in progress
        self.mode = "string"  # string | json | auto | word
        self.vnode: SchemaNode = ANY
        self.hold = ""
        self.vfirst = True
        self.vstart = 0
        self.vtext: list[str] = []
        self.vunits = b""
        self.vtok: JsonStream | None = None
        self.vchecker: SchemaChecker | None = None
        self.vtracker = _Tracker()
        self.vleaves: list[tuple[tuple[str | int, ...], Any]] = []
        self.words: tuple[str, ...] = ()
        self.wphase = 0
        self.word = ""
        self.vlimit = 1 << 62  # positions from here on are decided by the end tag
        self.vend = 0

    def _delta(self, text: str) -> None:
        self.args_parts.append(text)
        self.out.append(ToolCallDelta(self.index, text))

    # -- reading ------------------------------------------------------------------------------
    def _read(self, s: str, base: int) -> None:
        i = 0
        n = len(s)
        while i < n and self.failed is None:
            st = self.st
            if st == _X_OUTSIDE or st == _X_INSIDE:
                while i < n and s[i] in _WS_CHARS:
                    i += 1
                if i == n:
                    return
                self.tags = (_FUNC_OPEN,) if st == _X_OUTSIDE else (_PARAM_OPEN, _FUNC_CLOSE)
                self.tag_k = 0
                self.st = _X_TAG
            elif st == _X_TAG:
                c = s[i]
                k = self.tag_k
                alive = tuple(t for t in self.tags if t[k] == c)
                if not alive:
                    want = " or ".join(repr(t) for t in self.tags)
                    self.fail(base + i, f"expected {want}, got {c!r}")
                    return
                self.tags = alive
                self.tag_k = k = k + 1
                i += 1
                if len(alive) == 1 and k == len(alive[0]):
                    self._tag_done(alive[0], base + i - 1)
            elif st == _X_NAME or st == _X_PNAME:
                j = i
                while j < n and s[j] not in ">\n<":
                    j += 1
                piece = s[i:j]
                if piece:
                    self.text_parts.append(piece)
                    self._name_piece(piece, base + i)
                    if self.failed is not None:
                        return
                i = j
                if j < n:
                    if s[j] != ">":
                        what = "function" if st == _X_NAME else "parameter"
                        self.fail(base + j, f"expected '>' to end the {what} name, got {s[j]!r}")
                        return
                    i = j + 1
                    self._name_end(base + j)
            else:
                i = self._value_text(s, i, base)

    def _tag_done(self, tag: str, pos: int) -> None:
        if tag == _FUNC_OPEN:
            self.st = _X_NAME
            self.name_start = pos + 1
            self.units = b""
            self.text_parts = []
        elif tag == _PARAM_OPEN:
            self.st = _X_PNAME
            self.name_start = pos + 1
            self.units = b""
            self.text_parts = []
        else:
            self._function_end(pos)

    def _name_piece(self, piece: str, start: int) -> None:
        if self.st == _X_NAME:
            cands = self.name_candidates()
            if cands is None:
                return
            old = self.units
            self.units, bad = prefix_failure(old, piece, None, start, cands)
            if bad is not None:
                self.fail(bad, self.unknown_name(_shown(old, piece, start, bad) + "..."))
            return
        closed = [a for a in self.alts if a.closed]
        if len(closed) < len(self.alts) or not closed:
            return  # any name will do
        given = {utf16(k) for k in self.keys}  # a parameter may come once
        cands = tuple(k for a in closed for k in a.key_units if k not in given)
        old = self.units
        self.units, bad = prefix_failure(old, piece, None, start, cands)
        if bad is not None:
            shown = _shown(old, piece, start, bad)
            self.fail(bad, _schema_error(self.name, f"$: key {shown + '...'!r} is not allowed"))

    def _name_end(self, pos: int) -> None:
        name = "".join(self.text_parts)
        if self.st == _X_NAME:
            tools = self.p.tools
            if not name.strip():
                self.fail(pos, "the tool name is empty")
                return
            if tools is not None and name not in tools:
                self.fail(pos, self.unknown_name(name))
                return
            self.calls += 1
            self.start_call(name)
            self.schema = self.tool_schema(name)
            self.alts = [a for a in (self.schema or ANY).expand() if "object" in a.kinds]
            if not self.alts:
                self.fail(pos, _schema_error(name, "$: an object is not allowed"))
                return
            self.keys = set()
            self.args_parts = []
            self.st = _X_INSIDE
            return
        key = name
        if key in self.keys:
            self.fail(pos, f"parameter {key!r} is given twice")
            return
        alive = [a for a in self.alts if not a.closed or key in a.properties]
        if not alive:
            self.fail(pos, _schema_error(self.name, f"$: key {key!r} is not allowed"))
            return
        self.alts = alive
        subs = [a.properties.get(key) or a.additional or ANY for a in alive]
        node = subs[0] if len(subs) == 1 else SchemaNode(alternatives=tuple(subs))
        self._value_begin(key, node)

    # -- values -------------------------------------------------------------------------------
    def _value_begin(self, key: str, node: SchemaNode) -> None:
        self.key = key
        self.keys.add(key)
        self.vnode = node
        kinds: set[str] = set()
        for alt in node.expand():
            kinds |= alt.kinds
        if self.schema is None:
            self.mode = "auto"
        elif kinds == {"string"}:
            self.mode = "string"
        elif "string" in kinds:
            self.mode = "auto"
        elif kinds and kinds <= {"boolean", "null"}:
            self.mode = "word"
            self.words = tuple(
                w
                for w, k in (("true", "boolean"), ("false", "boolean"), ("null", "null"), ("none", "null"))
                if k in kinds
            )
        else:  # numbers, objects, arrays (or nothing at all: the checker says so at once)
            self.mode = "json"
        head = ("{" if len(self.keys) == 1 else ", ") + json.dumps(key, ensure_ascii=False) + ": "
        if self.mode == "string":
            head += '"'
        self._delta(head)
        self.hold = ""
        self.vfirst = True
        self.vtext = []
        self.vunits = b""
        self.vleaves = []
        self.wphase = 0
        self.word = ""
        self.vlimit = 1 << 62
        self.vtracker = _Tracker((key,))
        if self.mode in ("json", "auto"):
            self.vtok = JsonStream(detail=True)
            self.vchecker = SchemaChecker(node) if self.schema is not None else None
        self.st = _X_VALUE

    def _value_text(self, s: str, i: int, base: int) -> int:
        n = len(s)
        work = self.hold + s[i:]
        wstart = base + i - len(self.hold)
        if self.vfirst:
            if work.startswith("\n"):
                work = work[1:]
                wstart += 1
            self.vfirst = False
            self.vstart = wstart
        k = -1
        tag = ""
        for t in _VALUE_ENDS:
            found = work.find(t)
            if found >= 0 and (k < 0 or found < k):
                k, tag = found, t
        if k >= 0:
            text = work[: k - 1] if k and work[k - 1] == "\n" else work[:k]
            self.hold = ""
            if text:
                self._release(text, wstart)
            if self.failed is not None:
                return n
            tag_end = wstart + k + len(tag) - 1
            self.vlimit = wstart + len(text)
            self.vend = tag_end
            self._value_end(tag_end)
            if self.failed is not None:
                return n
            if tag == _PARAM_CLOSE:
                self.st = _X_INSIDE
            elif tag == _PARAM_OPEN:
                self.st = _X_PNAME
                self.name_start = tag_end + 1
                self.units = b""
                self.text_parts = []
            else:
                self._function_end(tag_end)
            return tag_end + 1 - base
        cut = len(work)
        p = work.rfind("<", max(0, cut - _LONGEST_END + 1))
        if p >= 0 and any(t.startswith(work[p:]) for t in _VALUE_ENDS):
            cut = p
        if cut and work[cut - 1] == "\n":
            cut -= 1
        self.hold = work[cut:]
        if cut:
            self._release(work[:cut], wstart)
        return n

    def _release(self, text: str, start: int) -> None:
        """``text`` (at ``start``) is part of the value for sure."""
        self.vtext.append(text)
        mode = self.mode
        if mode == "string":
            self._string_piece(text, start)
        elif mode == "word":
            self._word_piece(text, start)
        else:
            self._json_events(self.vtok.feed(text) if self.vtok is not None else [])

    def _string_piece(self, text: str, start: int) -> None:
        enums = [a.enum_units for a in self.vnode.expand() if "string" in a.kinds]
        if enums and all(e is not None for e in enums):
            cands = tuple(u for e in enums if e is not None for u in e)
            old = self.vunits
            self.vunits, bad = prefix_failure(old, text, None, start, cands)
            if bad is not None:
                shown = _shown(old, text, start, bad)
                self._schema_fail(bad, f"{shown!r}... is not one of the allowed values")
                return
        self._delta(_json_string_body(text))

    def _schema_fail(self, pos: int, message: str) -> None:
        self.fail(pos, _schema_error(self.name, f"$.{self.key}: {message}"))

    def _word_piece(self, text: str, start: int) -> None:
        for k, c in enumerate(text):
            space = c in _WS_CHARS
            if self.wphase == 0:
                if space:
                    continue
                self.wphase = 1
            if self.wphase == 1:
                if space:
                    if self.word not in self.words:
                        self._word_fail(start + k, self.word)
                        return
                    self.wphase = 2
                    continue
                word = self.word + c.lower()
                if not any(w.startswith(word) for w in self.words):
                    self._word_fail(start + k, word)
                    return
                self.word = word
            elif not space:
                self._word_fail(start + k, self.word + " " + c)
                return

    def _word_fail(self, pos: int, seen: str) -> None:
        allowed = " or ".join(w for w in self.words if w != "none")
        self._schema_fail(pos, f"expected {allowed}, got {seen!r}")

    def _json_events(self, events: list[JsonEvent]) -> None:
        offset = self.vstart
        for ev in events:
            if self.mode != "json" and self.mode != "auto":
                return
            if self.mode == "auto" and ev[0] == STR_START and not self.vtracker.frames:
                self._json_failed(offset + ev[1], "a quoted text is a string")
                return
            if ev[0] == ERROR:
                self._json_failed(offset + ev[1], f"invalid JSON: {ev[2]}")
                return
            checker = self.vchecker
            if checker is not None:
                violation = checker.feed(ev)
                if violation is not None:
                    self._json_failed(offset + violation[0], violation[1])
                    return
            r = self.vtracker.on(ev)
            if r is not None and r[0] == "leaf":
                self.vleaves.append((r[1], r[2]))

    def _json_failed(self, pos: int, message: str) -> None:
        if self.mode == "auto":  # not JSON for the schema: the text is a string
            self.mode = "string"
            self.vtok = None
            self.vchecker = None
            self._delta('"')
            self._string_piece("".join(self.vtext), self.vstart)
            return
        if pos >= self.vlimit:
            pos = self.vend
        if message.startswith("invalid JSON"):
            self.fail(pos, f"parameter {self.key!r} of {self.name!r}: {message}")
        else:
            self.fail(
                pos,
                _schema_error(self.name, message.replace("$", "$." + self.key, 1)),
            )

    def _value_end(self, tag_end: int) -> None:
        key = self.key
        text = "".join(self.vtext)
        if self.mode in ("json", "auto"):
            tok = self.vtok
            assert tok is not None
            self._json_events(tok.end())
        if self.failed is not None:
            return
        if self.mode == "string":
            enums = [a.enum_units for a in self.vnode.expand() if "string" in a.kinds]
            if enums and all(e is not None for e in enums):
                if not any(utf16(text) in e for e in enums if e is not None):
                    self._schema_fail(tag_end, f"{text!r} is not one of the allowed values")
                    return
            self._delta('"')
            value: Any = text
        elif self.mode == "word":
            word = self.word
            if word not in self.words:
                self._word_fail(tag_end, word)
                return
            json_text = "null" if word == "none" else word
            self._delta(json_text)
            value = json.loads(json_text)
        else:
            json_text = text.strip(_WS_CHARS)
            self._delta(json_text)
            value = json.loads(json_text)
            for path, leaf in self.vleaves:
                if path != (key,):
                    self.out.append(ToolCallValue(self.index, path, leaf))
        self.out.append(ToolCallValue(self.index, (key,), value))
        self.vtok = None
        self.vchecker = None

    def _function_end(self, pos: int) -> None:
        if not self.started:
            self.fail(pos, "'</function>' with no function open")
            return
        keys = self.keys
        alive = [a for a in self.alts if all(r in keys for r in a.required)]
        if not alive:
            missing = sorted({r for a in self.alts for r in a.required if r not in keys})
            self.fail(
                pos,
                f"arguments do not match the schema of {self.name!r}: $: missing required key(s): "
                + ", ".join(map(repr, missing)),
            )
            return
        self._delta("}" if keys else "{}")
        self.end_call("".join(self.args_parts))
        self.st = _X_OUTSIDE

    def before_fail(self, position: int) -> None:
        pass

    def _at_close(self, reason: str | None) -> None:
        st = self.st
        if st == _X_OUTSIDE:
            if self.calls == 0:
                self.fail(self.log.end, f"{reason}: no tool call" if reason else "empty tool call")
            return
        where = {
            _X_TAG: "inside a tag",
            _X_NAME: "inside the function name",
            _X_INSIDE: "before '</function>'",
            _X_PNAME: "inside a parameter name",
            _X_VALUE: "inside a parameter value",
        }[st]
        if st == _X_TAG and not self.started:
            where = "inside '<function='"
        self.fail(self.log.end, f"{reason or 'the region ended'}: the tool call is not complete ({where})")
