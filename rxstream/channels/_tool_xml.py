"""XML tool calls (:class:`XmlCallFormat`): ``<function=NAME>`` then ``<parameter=KEY>`` VALUE
``</parameter>`` ... then ``</function>``.

One newline after the opening tag and one before the closing tag are not part of the value; a
value also ends at ``<parameter=`` or ``</function>`` (a missing ``</parameter>``). A value becomes
JSON by its schema: a ``string`` parameter is a JSON string, streamed as it comes;
``boolean``/``null`` accept any letter case (``True``, ``None``); numbers, objects and arrays must
be JSON of their type; a parameter whose type allows strings and others, or that has no schema,
is that JSON when its text is a number, ``true``/``false``/``null``, an object or an array valid
for it, else the text as a string (a quoted text stays a string, quotes included). Non-string
values go out (delta and values) when their parameter ends. Positions of string values are where
their text is decided (held text included). The arguments' deltas are JSON generated from the
parameters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ._json_schema import ANY, SchemaChecker, SchemaNode, prefix_failure, utf16
from ._json_stream import ERROR, STR_START, JsonEvent, JsonStream
from ._segment import Segment
from ._tool_events import ToolCallDelta, ToolCallValue
from ._tool_formats import ToolCallFormat
from ._tool_region import WS_CHARS, Region, Tracker, schema_error, shown

if TYPE_CHECKING:
    from ._tool_parser import ToolCallParser

__all__ = ["XmlCallFormat", "XmlRegion"]


@dataclass(frozen=True)
class XmlCallFormat(ToolCallFormat):
    """Tool calls as ``<function=NAME><parameter=KEY>VALUE</parameter>...</function>`` (see the
    module docstring)."""

    name: str = "xml"

    def region(self, parser: ToolCallParser, segment: Segment | None) -> Region:
        return XmlRegion(parser, segment)

    def call_prefix(self, name: str) -> str | None:
        return f"<function={name}>\n"


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


def _json_string_body(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


class XmlRegion(Region):
    """A region of an :class:`XmlCallFormat`."""

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
        self.vtracker = Tracker()
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
                while i < n and s[i] in WS_CHARS:
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
                self.fail(pos, schema_error(name, "$: an object is not allowed"))
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
            self.fail(pos, schema_error(self.name, f"$: key {key!r} is not allowed"))
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
        self.vtracker = Tracker((key,))
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
                seen = shown(old, text, start, bad)
                self._schema_fail(bad, f"{seen!r}... is not one of the allowed values")
                return
        self._delta(_json_string_body(text))

    def _schema_fail(self, pos: int, message: str) -> None:
        self.fail(pos, schema_error(self.name, f"$.{self.key}: {message}"))

    def _word_piece(self, text: str, start: int) -> None:
        for k, c in enumerate(text):
            space = c in WS_CHARS
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
                schema_error(self.name, message.replace("$", "$." + self.key, 1)),
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
            json_text = text.strip(WS_CHARS)
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
