"""Pythonic tool calls (:class:`PythonicCallFormat`): a Python list of calls with keyword
arguments, ``[get_weather(city='Paris', days=3), get_time(tz="UTC")]`` (what Llama 4 writes, and
vLLM's ``pythonic`` parser reads).

- A call starts (:class:`~._tool_events.ToolCallStart`) at the ``(`` after its name; with tools
  given, a name is ruled out at its first character that no tool's name continues.
- Its arguments stream as the JSON text of the arguments object (the Python literals written
  as JSON: ``'x'`` -> ``"x"``, ``True``/``False``/``None`` -> ``true``/``false``/``null``,
  tuples and lists -> arrays, dicts -> objects), each value sent
  (:class:`~._tool_events.ToolCallValue`) when it is settled, checked against the tool's
  schema as it arrives; the call ends at its ``)``.
- Only keyword arguments with literal values (:mod:`._tool_pythonic_values`): a positional
  argument, a call, a name, an operator or an f-string is an invalid call at its first
  character that rules the call out.
- ``name_capture``: when the region's opening delimiter has that capture (an ``rx`` opener that
  matched ``[NAME(``), the region's text starts inside the first call's arguments.
"""

from __future__ import annotations

import json
import keyword
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ._json_schema import SchemaChecker
from ._json_stream import KEY, KEY_START, OBJ_START, STR_PART
from ._segment import Segment
from ._tool_events import ToolCallEvent
from ._tool_formats import ToolCallFormat
from ._tool_pythonic_values import (
    F_ARGS,
    P_AFTER,
    P_COLON,
    P_DKEY,
    P_ESCAPE,
    P_HEX,
    P_NUMBER,
    P_OCT,
    P_STRING,
    P_VALUE,
    P_WORD,
    Frame,
    PythonicValues,
)
from ._tool_region import WS_CHARS, Region, Tracker

if TYPE_CHECKING:
    from ._tool_parser import ToolCallParser

__all__ = ["PythonicCallFormat", "PythonicRegion"]

S_LIST: Final = 0  # before the list's '['
S_CALL: Final = 1  # a call's name or ']' is due (after '[' or ',')
S_NAME: Final = 2  # in a name
S_PAREN: Final = 3  # after the name: '('
S_KEY_OR_END: Final = 4  # a keyword or ')' is due
S_KEY: Final = 5  # in a keyword
S_EQ: Final = 6  # after the keyword: '='
S_NEXT: Final = 7  # after a call: ',' or ']'
S_DONE: Final = 8  # after the list: whitespace only

_IDENT_START: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_IDENT: Final = _IDENT_START | frozenset("0123456789")
_VALUE_START: Final = frozenset("'\"-0123456789[({")


@dataclass(frozen=True)
class PythonicCallFormat(ToolCallFormat):
    """Tool calls written as a Python list of calls (see the module docstring).

    Attributes:
        name: the format's name (what ``tool_calls(format=...)`` takes).
        name_capture: the capture of a region's opening delimiter that holds the first call's
            name (the delimiter then ends with its ``(``).
    """

    name: str = "pythonic"
    name_capture: str = "name"

    def region(self, parser: ToolCallParser, segment: Segment | None) -> Region:
        return PythonicRegion(parser, self, segment)

    def call_prefix(self, name: str) -> str | None:
        return f"[{name}("


class PythonicRegion(PythonicValues):
    """A region of a :class:`PythonicCallFormat`."""

    def __init__(self, parser: ToolCallParser, fmt: PythonicCallFormat, segment: Segment | None) -> None:
        super().__init__(parser, segment)
        captures = segment.captures if segment is not None else {}
        self.bare_name: str | None = captures.get(fmt.name_capture) if fmt.name_capture in captures else None
        self.st = S_LIST
        self.keys: set[str] = set()
        self.kparted = 0  # the keyword's characters the checker has seen
        self.steps.update(
            {
                P_VALUE: self._on_value,
                P_AFTER: self._on_after,
                P_STRING: self._on_string,
                P_ESCAPE: self._on_escape,
                P_HEX: self._on_hex,
                P_OCT: self._on_oct,
                P_NUMBER: self._on_number,
                P_WORD: self._on_word,
                P_DKEY: self._on_dict_key,
                P_COLON: self._on_colon,
                S_LIST: self._on_list,
                S_CALL: self._on_call,
                S_NAME: self._on_name,
                S_PAREN: self._on_paren,
                S_KEY_OR_END: self._on_key_or_end,
                S_KEY: self._on_key,
                S_EQ: self._on_eq,
                S_NEXT: self._on_next,
                S_DONE: self._on_done,
            }
        )

    def begin(self) -> list[ToolCallEvent | Segment]:
        out: list[ToolCallEvent | Segment] = []
        self.out = out
        name = self.bare_name
        if name is None:
            return out
        tools = self.p.tools
        if tools is not None and name not in tools:
            self.fail(0, self.unknown_name(name))
        else:
            self.token = name
            self._open_call(0)
        return out

    # -- reading ------------------------------------------------------------------------------
    def _read(self, text: str, base: int) -> None:
        i, n = 0, len(text)
        steps = self.steps
        while i < n and self.failed is None:
            i = steps[self.st](text, i, base)
        if self.failed is None and self.st == S_KEY:
            self._key_part()

    def _at_close(self, reason: str | None) -> None:
        if self.st == S_DONE:
            return
        end = self.log.end
        if self.bare_name is None and not self.log.text().strip(WS_CHARS):
            self.fail(end, f"{reason}: no tool call" if reason else "empty tool call")
            return
        where = (
            "inside a string"
            if P_STRING <= self.st < P_STRING + 4
            else "before the list of calls was complete"
        )
        self.fail(end, f"{reason or 'the region ended'} {where}")

    # -- the list and the names ---------------------------------------------------------------
    def _on_list(self, text: str, i: int, base: int) -> int:
        c = text[i]
        if c == "[":
            self.st = S_CALL
        elif c not in WS_CHARS:
            self.fail(base + i, f"expected '[' (a list of calls), got {c!r}")
        return i + 1

    def _on_call(self, text: str, i: int, base: int) -> int:
        c = text[i]
        pos = base + i
        if c in WS_CHARS:
            pass
        elif c == "]":
            self.st = S_DONE
        elif c in _IDENT_START:
            self.token = ""
            self.tstart = pos
            self.st = S_NAME
            return i  # read as the name's
        else:
            self.fail(pos, f"expected a tool name, got {c!r}")
        return i + 1

    def _on_name(self, text: str, i: int, base: int) -> int:
        c = text[i]
        pos = base + i
        tools = self.p.tools
        if c in _IDENT:
            name = self.token + c
            if tools is not None and not any(t.startswith(name) for t in tools):
                self.fail(pos, self.unknown_name(name + "..."))
            self.token = name
            return i + 1
        if tools is not None and self.token not in tools:
            self.fail(pos, self.unknown_name(self.token))
        elif c == "(":
            self._open_call(pos)
        elif c in WS_CHARS:
            self.st = S_PAREN
        else:
            self.fail(pos, f"expected '(' after the tool name, got {c!r}")
        return i + 1

    def _on_paren(self, text: str, i: int, base: int) -> int:
        c = text[i]
        if c == "(":
            self._open_call(base + i)
        elif c not in WS_CHARS:
            self.fail(base + i, f"expected '(' after the tool name, got {c!r}")
        return i + 1

    def _open_call(self, pos: int) -> None:
        self.calls += 1
        self.start_call(self.token)
        schema = self.tool_schema(self.token)
        self.checker = SchemaChecker(schema) if schema is not None else None
        self.tracker = Tracker()
        self.parts = []
        self.jlen = 0
        self.keys = set()
        self.stack = [Frame(F_ARGS)]
        if self._emit((OBJ_START, pos), "{"):
            self.st = S_KEY_OR_END

    def _call_done(self, pos: int) -> None:
        self.end_call("".join(self.parts))
        self.st = S_NEXT

    def _after_arg_comma(self) -> None:
        self.st = S_KEY_OR_END

    def _on_next(self, text: str, i: int, base: int) -> int:
        c = text[i]
        if c == ",":
            self.st = S_CALL
        elif c == "]":
            self.st = S_DONE
        elif c not in WS_CHARS:
            self.fail(base + i, f"expected ',' or ']' after the call, got {c!r}")
        return i + 1

    def _on_done(self, text: str, i: int, base: int) -> int:
        c = text[i]
        if c not in WS_CHARS:
            self.fail(base + i, f"text after the list of calls: {c!r}")
        return i + 1

    # -- the keywords -------------------------------------------------------------------------
    def _on_key_or_end(self, text: str, i: int, base: int) -> int:
        c = text[i]
        pos = base + i
        if c in WS_CHARS:
            return i + 1
        if c == ")":
            self._close(pos)
        elif c in _IDENT_START:
            self.token = c
            self.tstart = pos
            self.kparted = 0
            if self._check((KEY_START, pos)):
                self.st = S_KEY
        elif c in _VALUE_START:
            self.fail(pos, "a positional argument: the arguments must be keyword arguments (name=value)")
        else:
            self.fail(pos, f"expected a keyword argument or ')', got {c!r}")
        return i + 1

    def _key_part(self) -> bool:
        """The keyword's characters not yet seen by the checker."""
        rest = self.token[self.kparted :]
        if not rest:
            return True
        start = self.tstart + self.kparted
        self.kparted = len(self.token)
        return self._check((STR_PART, start, start + len(rest), rest, None, ""))

    def _on_key(self, text: str, i: int, base: int) -> int:
        j = i
        n = len(text)
        while j < n and text[j] in _IDENT:
            j += 1
        self.token += text[i:j]
        if j == n:
            return j
        c = text[j]
        pos = base + j
        key = self.token
        if not self._key_part():  # a key no schema allows is ruled out before what follows it
            return j + 1
        if c not in WS_CHARS and c != "=":
            what = "a positional argument" if c in ",)" else "an expression"
            self.fail(pos, f"{what} ({key!r} followed by {c!r}): the arguments must be name=value")
        elif keyword.iskeyword(key):
            self.fail(pos, f"{key!r} is a Python keyword, not an argument name")
        elif key in self.keys:
            self.fail(pos, f"keyword argument {key!r} repeated")
        elif self._check((KEY, self.tstart - 1, pos + 1, key, None)):
            self.tracker.on((KEY, self.tstart - 1, pos + 1, key, None))
            top = self.stack[-1]
            self._delta((", " if top.count else "") + json.dumps(key) + ": ")
            top.count += 1
            self.keys.add(key)
            self.st = P_VALUE if c == "=" else S_EQ
            self.close_ok = False
        return j + 1

    def _on_eq(self, text: str, i: int, base: int) -> int:
        c = text[i]
        if c == "=":
            self.st = P_VALUE
        elif c not in WS_CHARS:
            self.fail(base + i, f"expected '=' after {self.token!r}, got {c!r}")
        return i + 1
