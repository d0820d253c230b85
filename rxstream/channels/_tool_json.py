"""JSON tool calls (:class:`JsonCallFormat`): ``{"name": ..., "arguments": {...}}`` objects,
one after another or in a list, or a region that is the arguments object alone (its name in the
opening delimiter).

- The call object: ``"name"`` and the arguments (under any of ``arguments_keys``; other keys
  are ignored; several objects one after another are several calls, separated by whitespace or
  one of ``separators``). When the arguments come before the name, their deltas and values are
  held until the name is known (and checked against that tool's schema then). A call without
  arguments has ``{}``.
- ``listed``: one JSON list of such objects per region; ``lists``: either, value by value (a
  list of call objects, or call objects one after another).
- ``opening_json``: the opening delimiter's text from its first ``{`` or ``[`` on is the start
  of the JSON (a delimiter that matches the beginning of a call written bare, without a tag):
  the region's text, and its positions, start there.
- ``name_capture``: the region's text is the arguments object; the name is that capture of the
  region's opening delimiter (less ``name_prefix`` when that is how the tool is known).

The arguments' deltas are the model's own text of the arguments value, as written (sent as it
arrives, up to the last character known to be valid).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._json_schema import SchemaChecker, prefix_failure
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
from ._tool_events import ToolCallDelta, ToolCallEvent, ToolCallValue
from ._tool_formats import ToolCallFormat
from ._tool_region import WS_CHARS, Region, Tracker, schema_error, shown

if TYPE_CHECKING:
    from ._tool_parser import ToolCallParser

__all__ = ["JsonCallFormat", "JsonRegion"]


@dataclass(frozen=True)
class JsonCallFormat(ToolCallFormat):
    """Tool calls written as JSON (see the module docstring).

    Attributes:
        name: the format's name (what ``tool_calls(format=...)`` takes).
        listed: a region is one JSON list of call objects.
        lists: a top-level value may be a JSON list of call objects as well as one call object.
        opening_json: the opening delimiter's text from its first ``{`` or ``[`` on is JSON.
        multiple: a region may hold several call objects one after another.
        separators: characters that may also separate those objects (besides whitespace).
        arguments_keys: the keys of a call object that hold its arguments.
        forced_key: the key a forced call's prompt opens the arguments with.
        name_capture: the region is the arguments object alone; the tool's name is this capture
            of its opening delimiter.
        name_prefix: dropped from a captured name that starts with it, unless a tool has the
            whole name.
    """

    name: str = "json"
    listed: bool = False
    lists: bool = False
    opening_json: bool = False
    multiple: bool = True
    separators: str = ""
    arguments_keys: tuple[str, ...] = ("arguments", "parameters")
    forced_key: str = "arguments"
    name_capture: str | None = None
    name_prefix: str = ""

    def region(self, parser: ToolCallParser, segment: Segment | None) -> Region:
        return JsonRegion(parser, self, segment)

    def call_prefix(self, name: str) -> str | None:
        if self.name_capture is not None:
            return None  # the name is in the opening delimiter: the family writes it
        quoted = json.dumps(name)
        return ("[" if self.listed else "") + f'{{"name": {quoted}, "{self.forced_key}": '


class JsonRegion(Region):
    """A region of a :class:`JsonCallFormat`."""

    def __init__(self, parser: ToolCallParser, fmt: JsonCallFormat, segment: Segment | None) -> None:
        super().__init__(parser, segment)
        self.fmt = fmt
        self.tok = JsonStream(detail=True, multiple=fmt.multiple, separators=fmt.separators)
        self.depth = 0
        self.args_only = fmt.name_capture is not None
        self.call_depth = 2 if fmt.listed else 1
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
        self.tracker = Tracker()
        self.cstart = 0
        self.ending: str | None = None

    def begin(self) -> list[ToolCallEvent | Segment]:
        out: list[ToolCallEvent | Segment] = []
        self.out = out
        capture = self.fmt.name_capture
        if capture is None:
            if self.fmt.opening_json and self.segment is not None:
                self._read_opening(self.segment.text)
            return out
        seg = self.segment
        name = seg.captures.get(capture, "") if seg is not None else ""
        tools = self.p.tools
        prefix = self.fmt.name_prefix
        if prefix and name.startswith(prefix) and (tools is None or name not in tools):
            name = name[len(prefix) :]
        if not name:
            self.fail(0, f"no tool name in the opening delimiter (its {capture!r} capture)")
        elif tools is not None and name not in tools:
            self.fail(0, self.unknown_name(name))
        else:
            self._begin_call()
            self._name_known(name)
        return out

    def _read_opening(self, text: str) -> None:
        """Read the JSON that the opening delimiter's text starts (``opening_json``)."""
        starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
        if not starts:
            return
        cut = min(starts)
        self.open_text = text[:cut]
        base = self.log.end
        self.log.append(text[cut:])
        self._read(text[cut:], base)

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
        self.tracker = Tracker()
        self.name = ""

    # -- reading ------------------------------------------------------------------------------
    def _read(self, text: str, base: int) -> None:
        self._events(self.tok.feed(text))
        if self.failed is None and self.started and self.args_start >= 0:
            self._flush(self.log.end)

    def _at_close(self, reason: str | None) -> None:
        if not self.log.text().strip(WS_CHARS) and (self.args_only or self.calls == 0):
            what = "arguments" if self.args_only else "tool call"
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
        if self.args_only:
            if d == 0:
                if k != OBJ_START:
                    self.fail(pos, "the arguments must be a JSON object")
                    return
                self._args_begin(ev)
                return
        elif d < self.call_depth:
            if d == 0 and k == ARR_START and self.fmt.lists:
                self.call_depth = 2  # this value is a list of calls
                self.depth = 1
                return
            if self.fmt.listed and d == 0:
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
        if d == 0 and self.call_depth == 2 and self.fmt.lists:
            self.call_depth = 1  # a list of calls ended: the next value may be either
        elif d == self.call_depth - 1 and not self.args_only:
            self._call_end(pos)
        elif d == self.call_depth:
            self.field = None

    def _key(self, ev: JsonEvent) -> None:
        key = ev[3]
        if key == "name":
            field = "name"
        elif key in self.fmt.arguments_keys:
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
            seen = shown(old, (piece if raw is None else raw) + pending, start, bad)
            self.fail(bad, self.unknown_name(seen + "..."))

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
                self.fail(violation[0], schema_error(self.name, violation[1]))
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
            if self.args_only:
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
                        self.fail(pos, schema_error(self.name, violation[1]))
                        return
            self.args_parts = ["{}"]
            self.out.append(ToolCallDelta(self.index, "{}"))
        self.end_call("".join(self.args_parts))
