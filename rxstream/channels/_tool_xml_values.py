"""The values of XML tool calls' parameters (:class:`XmlValues`, the half of the XML reader that
turns each parameter's text into JSON by its schema; :mod:`._tool_xml` reads the tags), and the
tags themselves (:class:`XmlSyntax`)."""

from __future__ import annotations

import json
from abc import abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ._json_schema import ANY, SchemaChecker, SchemaNode, prefix_failure, utf16
from ._json_stream import ERROR, STR_START, JsonEvent, JsonStream
from ._segment import Segment
from ._tool_events import ToolCallDelta, ToolCallValue
from ._tool_region import WS_CHARS, Region, Tracker, schema_error, shown

if TYPE_CHECKING:
    from ._tool_parser import ToolCallParser

__all__ = [
    "X_BEFORE_VALUE",
    "X_INSIDE",
    "X_NAME",
    "X_OUTSIDE",
    "X_PNAME",
    "X_TAG",
    "X_VALUE",
    "XmlSyntax",
    "XmlValues",
]

X_OUTSIDE: Final = 0  # between functions: whitespace, then <function= (or the name)
X_TAG: Final = 1  # reading one of the tags in self.tags
X_NAME: Final = 2  # the function name, up to its end ('>')
X_INSIDE: Final = 3  # inside a function: whitespace, then <parameter= or </function>
X_PNAME: Final = 4  # a parameter name, up to its end ('>')
X_VALUE: Final = 5  # a parameter value, up to its end tag
X_BEFORE_VALUE: Final = 6  # whitespace, then the value's opening tag


@dataclass(frozen=True)
class XmlSyntax:
    """The tags of an XML tool-call syntax; the defaults are the ``xml`` format's
    ``<function=NAME>`` ``<parameter=KEY>`` VALUE ``</parameter>`` ... ``</function>``.

    Attributes:
        call_open: the tag before a function's name; ``""``: the name opens the region's text
            (then the region holds one call, which ends with the region: ``call_close`` is ``""``).
        name_end: what ends the function's name (``">"``); ``"\n"``: the name is a line, which
            also ends where a tag starts, or with the region.
        call_close: the tag that ends a function (``""``: the region's end).
        key_open: the tag before a parameter's name.
        key_end: what ends a parameter's name (``">"``, or a closing tag such as ``</key>``).
        value_open: the tag before a parameter's value (``""``: the value follows the name's end).
        value_close: the tag after a parameter's value.
    """

    call_open: str = "<function="
    name_end: str = ">"
    call_close: str = "</function>"
    key_open: str = "<parameter="
    key_end: str = ">"
    value_open: str = ""
    value_close: str = "</parameter>"

    def __post_init__(self) -> None:
        if not (self.name_end and self.key_open and self.key_end and self.value_close):
            raise ValueError("XmlSyntax: name_end, key_open, key_end and value_close must not be empty")
        if (self.call_open == "") != (self.call_close == ""):
            raise ValueError("XmlSyntax: a call without an opening tag ends with its region, and only then")
        if not all(t.startswith("<") for t in self.value_ends):
            raise ValueError("XmlSyntax: the tags that can end a value must start with '<'")
        tags = [t for t in self.tags() if t]
        if len(set(tags)) != len(tags):
            raise ValueError(f"XmlSyntax: its tags must differ, got {tags}")

    def tags(self) -> tuple[str, ...]:
        return (
            self.call_open,
            self.call_close,
            self.key_open,
            self.key_end,
            self.value_open,
            self.value_close,
        )

    @property
    def value_ends(self) -> tuple[str, ...]:
        """What ends a value: its closing tag, the next parameter's tag, the function's end."""
        return tuple(t for t in (self.value_close, self.key_open, self.call_close) if t)


def json_string_body(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


class XmlValues(Region):
    """A parameter value in progress, and the arguments' JSON text built from the values."""

    def __init__(self, parser: ToolCallParser, segment: Segment | None, syntax: XmlSyntax) -> None:
        super().__init__(parser, segment)
        self.syn = syntax
        self.value_ends = syntax.value_ends
        self.longest_end = max(len(t) for t in self.value_ends)
        self.st = X_OUTSIDE
        self.name_start = 0
        self.units = b""
        self.text_parts: list[str] = []
        self.schema: SchemaNode | None = None
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

    @abstractmethod
    def _function_end(self, pos: int) -> None:
        """The function ends at ``pos`` (its closing tag, or the region's end)."""

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
        self.st = X_BEFORE_VALUE if self.syn.value_open else X_VALUE

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
        for t in self.value_ends:
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
            if tag == self.syn.value_close:
                self.st = X_INSIDE
            elif tag == self.syn.key_open:
                self.st = X_PNAME
                self.name_start = tag_end + 1
                self.units = b""
                self.text_parts = []
            else:
                self._function_end(tag_end)
            return tag_end + 1 - base
        cut = len(work)
        p = work.rfind("<", max(0, cut - self.longest_end + 1))
        if p >= 0 and any(t.startswith(work[p:]) for t in self.value_ends):
            cut = p
        if cut and work[cut - 1] == "\n":
            cut -= 1
        self.hold = work[cut:]
        if cut:
            self._release(work[:cut], wstart)
        return n

    def _value_to_the_end(self) -> None:
        """The region ended inside a value of a call that ends with its region: the text held is
        the value's (less one newline before the end), and the call ends."""
        end = self.log.end
        held = self.hold
        text = held[:-1] if held.endswith("\n") else held
        if self.vfirst:
            self.vfirst = False
            self.vstart = end
        self.hold = ""
        if text:
            self._release(text, end - len(held))
        if self.failed is not None:
            return
        self.vlimit = end - len(held) + len(text)
        self.vend = end
        self._value_end(end)
        if self.failed is None:
            self._function_end(end)

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
        self._delta(json_string_body(text))

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
