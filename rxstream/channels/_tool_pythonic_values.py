"""The values of pythonic tool calls' keyword arguments (:class:`PythonicValues`: Python literals
read as they stream, written as JSON text, and followed as JSON events by the schema checker and
the path tracker); :mod:`._tool_pythonic` reads the list of calls around them.

Literals: strings in single or double quotes (escapes ``\\n \\t \\r \\\\ \\' \\" \\a \\b \\f \\v``,
``\\xHH``, ``\\uHHHH``, ``\\UHHHHHHHH``, octal ``\\ooo``, a backslash before a line break; an
unknown escape keeps its backslash, as Python does), numbers in JSON's grammar (``-`` allowed,
``1.5e3``), ``True``/``False``/``None``, lists and tuples (JSON arrays), dicts with string keys
(JSON objects). Anything else -- a name, a call, an operator, an f-string or another prefixed
string, ``(x)`` without a comma, triple-quoted or adjacent strings -- is ruled out at its first
character that no literal continues.
"""

from __future__ import annotations

import json
import re
from abc import abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from ._json_schema import SchemaChecker
from ._json_stream import (
    ARR_END,
    ARR_START,
    DEFAULT_MAX_DEPTH,
    KEY,
    KEY_START,
    LIT_START,
    LITERAL,
    NUM_PART,
    NUM_START,
    NUMBER,
    OBJ_END,
    OBJ_START,
    STR_PART,
    STR_START,
    STRING,
    JsonEvent,
)
from ._segment import Segment
from ._tool_events import ToolCallDelta, ToolCallValue
from ._tool_region import WS_CHARS, Region, Tracker, schema_error

if TYPE_CHECKING:
    from ._tool_parser import ToolCallParser

__all__ = ["Frame", "PythonicValues", "json_body"]  # and the states and frame kinds

# states of the value reader (the call reader's own states are below 10)
P_VALUE: Final = 10  # a value is due (after '=', ':', '[', '(' or ',' in a list)
P_AFTER: Final = 11  # after a value: ',' or the container's closing bracket
P_STRING: Final = 12
P_ESCAPE: Final = 13  # after a backslash in a string
P_HEX: Final = 14  # the digits of \x, \u, \U
P_OCT: Final = 15  # the digits of an octal escape
P_NUMBER: Final = 16
P_WORD: Final = 17  # True, False, None
P_DKEY: Final = 18  # a dict key (a string) or '}' is due
P_COLON: Final = 19  # after a dict key

F_ARGS: Final = 0  # the call's arguments: (key=value, ...)
F_LIST: Final = 1
F_TUPLE: Final = 2
F_DICT: Final = 3
CLOSERS: Final = ")])}"  # by frame kind

MAX_DEPTH: Final = DEFAULT_MAX_DEPTH
"""The most containers open at once, the arguments' parentheses included (as JSON's bound)."""

DIGITS: Final = "0123456789"
HEX_DIGITS: Final = "0123456789abcdefABCDEF"
WORDS: Final = {"True": ("true", True), "False": ("false", False), "None": ("null", None)}
SIMPLE_ESCAPES: Final = dict(zip("ntr'\"abfv", "\n\t\r'\"\x07\b\f\v", strict=True))
HEX_LENGTHS: Final = {"x": 2, "u": 4, "U": 8}
RUNS: Final = {q: re.compile(rf"[^{q}\\\n\r]+") for q in "'\""}
"""A string's plain characters, up to its quote, a backslash or a line break."""

_SURROGATE = re.compile("[\ud800-\udfff]")

# the number grammar (JSON's): state -> which characters lead where; complete states
_NUM_MOVES: Final[dict[int, tuple[tuple[str, int], ...]]] = {
    1: (("0", 2), ("123456789", 3)),  # after '-'
    2: ((".", 4), ("eE", 6)),  # a leading 0
    3: ((DIGITS, 3), (".", 4), ("eE", 6)),
    4: ((DIGITS, 5),),  # after '.'
    5: ((DIGITS, 5), ("eE", 6)),
    6: (("+-", 7), (DIGITS, 8)),  # after 'e'
    7: ((DIGITS, 8),),
    8: ((DIGITS, 8),),
}
_NUM_DONE: Final = frozenset((2, 3, 5, 8))

Step = Callable[[str, int, int], int]
"""A state's reader: ``(text, index, base) -> the next index`` (``base``: the text's offset)."""


def json_body(units: str) -> str:
    """``units`` as the inside of a JSON string (lone surrogates escaped)."""
    body = json.dumps(units, ensure_ascii=False)[1:-1]
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", body) if _SURROGATE.search(body) else body


class Frame:
    """An open container: the arguments, a list, a tuple or a dict."""

    __slots__ = ("comma", "count", "kind")

    def __init__(self, kind: int) -> None:
        self.kind = kind
        self.count = 0  # members begun
        self.comma = False  # a ',' after the last member


class PythonicValues(Region):
    """The value reader: one call's arguments as JSON text, events and settled values."""

    def __init__(self, parser: ToolCallParser, segment: Segment | None) -> None:
        super().__init__(parser, segment)
        self.st = 0
        self.stack: list[Frame] = []
        self.close_ok = False  # the container may close here (after '[', '(', ',')
        self.checker: SchemaChecker | None = None
        self.tracker = Tracker()
        self.parts: list[str] = []  # the arguments' JSON text
        self.jlen = 0
        self.cstart = 0  # where the top-level container in progress starts in that text
        self.quote = "'"
        self.is_key = False
        self.sstart = 0
        self.body: list[str] = []
        self.esc = ""
        self.esc_digits = ""
        self.esc_last = 0
        self.tstart = 0
        self.token = ""
        self.nstate = 0
        self.steps: dict[int, Step] = {}  # each state's reader (the subclass lists them)

    @abstractmethod
    def _call_done(self, pos: int) -> None:
        """The call's ``)`` at ``pos`` (its arguments are complete)."""

    @abstractmethod
    def _after_arg_comma(self) -> None:
        """A ``,`` after an argument: the next keyword (or ``)``) is due."""

    # -- output ---------------------------------------------------------------------------------
    def _delta(self, text: str) -> None:
        self.parts.append(text)
        self.jlen += len(text)
        self.out.append(ToolCallDelta(self.index, text))

    def _check(self, ev: JsonEvent) -> bool:
        checker = self.checker
        if checker is not None:
            violation = checker.feed(ev)
            if violation is not None:
                self.fail(violation[0], schema_error(self.name, violation[1]))
                return False
        return True

    def _emit(self, ev: JsonEvent, delta: str = "") -> bool:
        """Check ``ev``, send ``delta``, follow the paths (a settled value is sent); False when
        the call failed."""
        if not self._check(ev):
            return False
        if delta:
            self._delta(delta)
        r = self.tracker.on(ev)
        if r is None:
            return True
        what, where, value, _ = r
        if what == "leaf":
            self.out.append(ToolCallValue(self.index, where, value))
        elif what == "open":
            if where == 1:
                self.cstart = self.jlen - len(delta)
        elif where == 1:
            text = "".join(self.parts)[self.cstart :]
            self.out.append(ToolCallValue(self.index, self.tracker.path(), json.loads(text)))
        return True

    def _piece(self, units: str, start: int, raw: str | None = None) -> bool:
        """More of a string (decoded ``units``, written at ``start``; ``raw``: its JSON spelling
        when that is not ``units``): checked, then sent."""
        checker = self.checker
        if checker is not None:
            violation = checker.feed((STR_PART, start, start + len(raw or units), units, raw, ""))
            if violation is not None:
                if raw is None and violation[0] > start:
                    self._body(units[: violation[0] - start])
                self.fail(violation[0], schema_error(self.name, violation[1]))
                return False
        self._body(units)
        return True

    def _body(self, units: str) -> None:
        piece = json_body(units)
        self.body.append(piece)
        self._delta(piece)

    # -- values -----------------------------------------------------------------------------------
    def _on_value(self, text: str, i: int, base: int) -> int:
        c = text[i]
        pos = base + i
        if c in WS_CHARS:
            return i + 1
        top = self.stack[-1]
        if self.close_ok and c == CLOSERS[top.kind]:
            self._close(pos)
            return i + 1
        if top.kind == F_LIST or top.kind == F_TUPLE:
            if top.count:
                self._delta(", ")
            top.count += 1
            top.comma = False
        self.tstart = pos
        self.token = c
        if c == "'" or c == '"':
            self.quote = c
            self.is_key = False
            self.sstart = pos
            self.body = []
            if self._emit((STR_START, pos), '"'):
                self.st = P_STRING
        elif c == "-" or c in DIGITS:
            self.nstate = 1 if c == "-" else 2 if c == "0" else 3
            if self._emit((NUM_START, pos)):
                self.st = P_NUMBER
        elif c in "TFN":
            if self._emit((LIT_START, pos, WORDS[{"T": "True", "F": "False", "N": "None"}[c]][1])):
                self.st = P_WORD
        elif c in "[({":
            self._open(c, pos)
        else:
            self.fail(pos, self._not_a_value(c))
        return i + 1

    def _not_a_value(self, c: str) -> str:
        what = "a name, a call or a prefixed string" if c.isidentifier() else "not a literal"
        return f"expected a string, number, True/False/None, list, tuple or dict, got {c!r} ({what})"

    def _open(self, c: str, pos: int) -> None:
        if len(self.stack) >= MAX_DEPTH:
            self.fail(pos, f"nesting deeper than {MAX_DEPTH} levels")
            return
        kind = F_LIST if c == "[" else F_TUPLE if c == "(" else F_DICT
        ev = (OBJ_START, pos) if kind == F_DICT else (ARR_START, pos)
        if self._emit(ev, "{" if kind == F_DICT else "["):
            self.stack.append(Frame(kind))
            self.st = P_DKEY if kind == F_DICT else P_VALUE
            self.close_ok = True

    def _close(self, pos: int) -> None:
        top = self.stack[-1]
        kind = top.kind
        if kind == F_TUPLE and top.count == 1 and not top.comma:
            self.fail(pos, "a value in parentheses is not a tuple (a tuple of one is written (x,))")
            return
        is_obj = kind == F_DICT or kind == F_ARGS
        if not self._emit((OBJ_END, pos) if is_obj else (ARR_END, pos), "}" if is_obj else "]"):
            return
        self.stack.pop()
        self.close_ok = False
        if kind == F_ARGS:
            self._call_done(pos)
        else:
            self.st = P_AFTER

    def _on_after(self, text: str, i: int, base: int) -> int:
        c = text[i]
        pos = base + i
        if c in WS_CHARS:
            return i + 1
        top = self.stack[-1]
        closer = CLOSERS[top.kind]
        if c == ",":
            top.comma = True
            self.close_ok = True
            if top.kind == F_ARGS:
                self._after_arg_comma()
            else:
                self.st = P_DKEY if top.kind == F_DICT else P_VALUE
        elif c == closer:
            self._close(pos)
        else:
            self.fail(pos, f"expected ',' or {closer!r} after the value, got {c!r}")
        return i + 1

    def _on_dict_key(self, text: str, i: int, base: int) -> int:
        c = text[i]
        pos = base + i
        if c in WS_CHARS:
            return i + 1
        if c == "}":
            self._close(pos)
            return i + 1
        if c != "'" and c != '"':
            self.fail(pos, f"a dict key must be a string, got {c!r}")
            return i + 1
        top = self.stack[-1]
        if top.count:
            self._delta(", ")
        top.count += 1
        top.comma = False
        self.quote = c
        self.is_key = True
        self.sstart = pos
        self.body = []
        if self._emit((KEY_START, pos), '"'):
            self.st = P_STRING
        return i + 1

    def _on_colon(self, text: str, i: int, base: int) -> int:
        c = text[i]
        if c in WS_CHARS:
            return i + 1
        if c != ":":
            self.fail(base + i, f"expected ':' after the dict key, got {c!r}")
            return i + 1
        self._delta(": ")
        self.st = P_VALUE
        self.close_ok = False
        return i + 1

    # -- strings ------------------------------------------------------------------------------
    def _on_string(self, text: str, i: int, base: int) -> int:
        m = RUNS[self.quote].match(text, i)
        if m is not None:
            if not self._piece(m.group(), base + i):
                return len(text)
            i = m.end()
            if i == len(text):
                return i
        c = text[i]
        pos = base + i
        if c == self.quote:
            self._string_end(pos)
        elif c == "\\":
            self.st = P_ESCAPE
        else:
            self.fail(pos, "a line break inside a string (a quoted string ends on its line)")
        return i + 1

    def _string_end(self, pos: int) -> None:
        value = json.loads('"' + "".join(self.body) + '"')
        if self.is_key:
            if self._emit((KEY, self.sstart, pos + 1, value, None), '"'):
                self.st = P_COLON
        elif self._emit((STRING, self.sstart, pos + 1, value, None), '"'):
            self.st = P_AFTER

    def _on_escape(self, text: str, i: int, base: int) -> int:
        c = text[i]
        pos = base + i
        self.st = P_STRING
        if c in SIMPLE_ESCAPES:
            self._piece(SIMPLE_ESCAPES[c], pos)
        elif c == "\\":
            self._piece("\\", pos - 1, "\\\\")
        elif c == "\n":
            pass  # a line continues: nothing
        elif c in HEX_LENGTHS:
            self.esc = c
            self.esc_digits = ""
            self.st = P_HEX
        elif c in "01234567":
            self.esc_digits = c
            self.esc_last = pos
            self.st = P_OCT
        elif c == "N":
            self.fail(pos, "named escapes (\\N{...}) are not supported")
        elif self._piece("\\", pos - 1, "\\\\"):  # an unknown escape keeps its backslash
            self._piece(c, pos)
        return i + 1

    def _on_hex(self, text: str, i: int, base: int) -> int:
        c = text[i]
        pos = base + i
        if c not in HEX_DIGITS:
            self.fail(pos, f"\\{self.esc} needs {HEX_LENGTHS[self.esc]} hex digits, got {c!r}")
            return i + 1
        self.esc_digits += c
        if len(self.esc_digits) == HEX_LENGTHS[self.esc]:
            code = int(self.esc_digits, 16)
            if code > 0x10FFFF:
                self.fail(pos, f"\\U{self.esc_digits} is not a code point")
                return i + 1
            self.st = P_STRING
            self._piece(chr(code), pos)
        return i + 1

    def _on_oct(self, text: str, i: int, base: int) -> int:
        c = text[i]
        if c in "01234567" and len(self.esc_digits) < 3:
            self.esc_digits += c
            self.esc_last = base + i
            if len(self.esc_digits) < 3:
                return i + 1
            i += 1
        self.st = P_STRING
        self._piece(chr(int(self.esc_digits, 8)), self.esc_last)
        return i  # the character after the escape is read as a string's

    # -- numbers and words ----------------------------------------------------------------------
    def _on_number(self, text: str, i: int, base: int) -> int:
        c = text[i]
        pos = base + i
        moved = next((to for chars, to in _NUM_MOVES[self.nstate] if c in chars), 0)
        if moved:
            if c in "eE":  # an exponent may rule a whole number out: the checker sees the digits
                if not self._check((NUM_PART, self.tstart, pos + 1, self.token + c)):
                    return i + 1
            elif self.nstate >= 6 and not self._check((NUM_PART, pos, pos + 1, c)):
                return i + 1
            self.token += c
            self.nstate = moved
            return i + 1
        if self.nstate not in _NUM_DONE:
            self.fail(pos, f"{self.token + c!r} is not a number")
            return i + 1
        raw = self.token
        try:
            value = json.loads(raw)
        except ValueError:  # more digits than an int may have
            self.fail(self.tstart, f"the number {raw[:20]}... is too long")
            return i + 1
        if self._emit((NUMBER, self.tstart, pos, value, raw), raw):
            self.st = P_AFTER
        return i  # the character after the number is read again

    def _on_word(self, text: str, i: int, base: int) -> int:
        c = text[i]
        pos = base + i
        word = self.token + c
        if word in WORDS:
            json_text, value = WORDS[word]
            if self._emit((LITERAL, self.tstart, pos + 1, value), json_text):
                self.st = P_AFTER
        elif any(w.startswith(word) for w in WORDS):
            self.token = word
        else:
            self.fail(pos, f"{word!r}... is not a literal (a name or an expression)")
        return i + 1
