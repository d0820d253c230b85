"""XML tool calls (:class:`XmlCallFormat`): ``<function=NAME>`` then ``<parameter=KEY>`` VALUE
``</parameter>`` ... then ``</function>``; other tags by an :class:`XmlSyntax` (a name on the
region's first line, ``<key>KEY</key><value>VALUE</value>`` parameters, the call ending with its
region).

One newline after the opening tag and one before the closing tag are not part of the value; a
value also ends at the next parameter's tag or the function's end (a missing closing tag). A
value becomes JSON by its schema: a ``string`` parameter is a JSON string, streamed as it comes;
``boolean``/``null`` accept any letter case (``True``, ``None``); numbers, objects and arrays must
be JSON of their type; a parameter whose type allows strings and others, or that has no schema,
is that JSON when its text is a number, ``true``/``false``/``null``, an object or an array valid
for it, else the text as a string (a quoted text stays a string, quotes included). Non-string
values go out (delta and values) when their parameter ends. Positions of string values are where
their text is decided (held text included). The arguments' deltas are JSON generated from the
parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ._json_schema import ANY, SchemaNode, prefix_failure, utf16
from ._segment import Segment
from ._tool_formats import ToolCallFormat
from ._tool_region import WS_CHARS, Region, schema_error, shown
from ._tool_xml_values import (
    X_BEFORE_VALUE,
    X_INSIDE,
    X_NAME,
    X_OUTSIDE,
    X_PNAME,
    X_TAG,
    X_VALUE,
    XmlSyntax,
    XmlValues,
)

if TYPE_CHECKING:
    from ._tool_parser import ToolCallParser

__all__ = ["XmlCallFormat", "XmlRegion", "XmlSyntax"]


@dataclass(frozen=True)
class XmlCallFormat(ToolCallFormat):
    """Tool calls as ``<function=NAME><parameter=KEY>VALUE</parameter>...</function>``, or in the
    tags of another ``syntax`` (see the module docstring)."""

    name: str = "xml"
    syntax: XmlSyntax = field(default_factory=XmlSyntax)

    def region(self, parser: ToolCallParser, segment: Segment | None) -> Region:
        return XmlRegion(parser, segment, self.syntax)

    def call_prefix(self, name: str) -> str | None:
        head = self.syntax.call_open + name + self.syntax.name_end
        return head if head.endswith("\n") else head + "\n"


class XmlRegion(XmlValues):
    """A region of an :class:`XmlCallFormat`: the tags and names (:class:`XmlValues`: the values)."""

    def __init__(self, parser: ToolCallParser, segment: Segment | None, syntax: XmlSyntax) -> None:
        super().__init__(parser, segment, syntax)
        self.tags: tuple[str, ...] = ()
        self.tag_k = 0
        self.alts: list[SchemaNode] = []
        self.resume = X_OUTSIDE  # the state after a name's closing tag

    # -- reading ------------------------------------------------------------------------------
    def _read(self, s: str, base: int) -> None:
        syn = self.syn
        i = 0
        n = len(s)
        while i < n and self.failed is None:
            st = self.st
            if st == X_OUTSIDE or st == X_INSIDE or st == X_BEFORE_VALUE:
                while i < n and s[i] in WS_CHARS:
                    i += 1
                if i == n:
                    return
                if st == X_OUTSIDE and not syn.call_open:
                    self._name_begin(X_NAME, base + i)
                    continue
                if st == X_OUTSIDE:
                    self.tags = (syn.call_open,)
                elif st == X_INSIDE:
                    self.tags = (syn.key_open, syn.call_close) if syn.call_close else (syn.key_open,)
                else:
                    self.tags = (syn.value_open,)
                self.tag_k = 0
                self.st = X_TAG
            elif st == X_TAG:
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
            elif st == X_NAME or st == X_PNAME:
                i = self._name_text(s, i, base, st == X_NAME)
            else:
                i = self._value_text(s, i, base)

    def _name_text(self, s: str, i: int, base: int, function: bool) -> int:
        """Read a name from ``s[i]`` on; where it stops."""
        end = self.syn.name_end if function else self.syn.key_end
        stops = end[0] + "\n<"
        n = len(s)
        j = i
        while j < n and s[j] not in stops:
            j += 1
        piece = s[i:j]
        if piece:
            self.text_parts.append(piece)
            self._name_piece(piece, base + i, function)
            if self.failed is not None:
                return n
        if j == n:
            return n
        c = s[j]
        if c == end[0] and len(end) == 1:  # '>' (or the end of the name's line)
            self._name_end(base + j, function)
            return j + 1
        if c == end[0]:  # the name's closing tag: it is decided here; read the tag
            self._name_end(base + j, function)
            if self.failed is None:
                self.resume = self.st
                self.tags = (end,)
                self.tag_k = 0
                self.st = X_TAG
            return j
        if c == "<" and function and end == "\n":  # a name on its line also ends where a tag starts
            self._name_end(base + j, function)
            return j
        what = "function" if function else "parameter"
        self.fail(base + j, f"expected {end!r} to end the {what} name, got {c!r}")
        return n

    def _name_begin(self, state: int, start: int) -> None:
        self.st = state
        self.name_start = start
        self.units = b""
        self.text_parts = []

    def _tag_done(self, tag: str, pos: int) -> None:
        syn = self.syn
        if tag == syn.call_open:
            self._name_begin(X_NAME, pos + 1)
        elif tag == syn.key_open:
            self._name_begin(X_PNAME, pos + 1)
        elif tag == syn.key_end or tag == syn.name_end:
            self.st = self.resume
        elif tag == syn.value_open:
            self.st = X_VALUE
        else:
            self._function_end(pos)

    def _name_piece(self, piece: str, start: int, function: bool) -> None:
        if function:
            cands = self.name_candidates()
            if cands is None:
                return
            old = self.units
            self.units, bad = prefix_failure(old, piece, None, start, cands)
            if bad is not None:
                self.fail(bad, self.unknown_name(shown(old, piece, start, bad) + "..."))
            return
        closed = [a for a in self.alts if a.closed]
        if len(closed) < len(self.alts) or not closed:
            return  # any name will do
        given = {utf16(k) for k in self.keys}  # a parameter may come once
        cands = tuple(k for a in closed for k in a.key_units if k not in given)
        old = self.units
        self.units, bad = prefix_failure(old, piece, None, start, cands)
        if bad is not None:
            seen = shown(old, piece, start, bad)
            self.fail(bad, schema_error(self.name, f"$: key {seen + '...'!r} is not allowed"))

    def _name_end(self, pos: int, function: bool) -> None:
        name = "".join(self.text_parts)
        if function:
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
                self.fail(pos, schema_error(name, "$: an object is not allowed"))
                return
            self.keys = set()
            self.args_parts = []
            self.st = X_INSIDE
            return
        key = name
        if key in self.keys:
            self.fail(pos, f"parameter {key!r} is given twice")
            return
        alive = [a for a in self.alts if not a.closed or key in a.properties]
        if not alive:
            self.fail(pos, schema_error(self.name, f"$: key {key!r} is not allowed"))
            return
        self.alts = alive
        subs = [a.properties.get(key) or a.additional or ANY for a in alive]
        node = subs[0] if len(subs) == 1 else SchemaNode(alternatives=tuple(subs))
        self._value_begin(key, node)

    # -- values -------------------------------------------------------------------------------
    def _function_end(self, pos: int) -> None:
        if not self.started:
            self.fail(pos, f"{self.syn.call_close!r} with no function open")
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
        self.st = X_OUTSIDE

    def before_fail(self, position: int) -> None:
        pass

    def _at_close(self, reason: str | None) -> None:
        st = self.st
        syn = self.syn
        if st == X_OUTSIDE:
            if self.calls == 0:
                self.fail(self.log.end, f"{reason}: no tool call" if reason else "empty tool call")
            return
        if reason is None and not syn.call_close and st in (X_NAME, X_INSIDE, X_VALUE):
            self._call_to_the_end(st)  # the call ends with its region
            return
        where = {
            X_TAG: "inside a tag",
            X_NAME: "inside the function name",
            X_INSIDE: f"before {syn.call_close!r}" if syn.call_close else "after a parameter",
            X_PNAME: "inside a parameter name",
            X_VALUE: "inside a parameter value",
            X_BEFORE_VALUE: f"before {syn.value_open!r}",
        }[st]
        if st == X_TAG and not self.started:
            where = f"inside {syn.call_open!r}"
        self.fail(self.log.end, f"{reason or 'the region ended'}: the tool call is not complete ({where})")

    def _call_to_the_end(self, st: int) -> None:
        end = self.log.end
        if st == X_NAME:
            self._name_end(end, True)
            if self.failed is None:
                self._function_end(end)
        elif st == X_INSIDE:
            self._function_end(end)
        else:
            self._value_to_the_end()
