"""``JsonStream``: an incremental JSON tokenizer that reports each token the moment it is settled.

Feed it text in any chunking; each :meth:`JsonStream.feed` returns the events of the tokens that
the new text settles, with their character positions in the whole text fed so far. Nothing is
ever re-parsed: a token is read once, and the scanners jump over runs (string contents,
whitespace, digits) with compiled regular expressions and ``json``'s C string decoder, so the
cost is per token rather than per character (SEMANTICS §9).

**Settled.** An event is reported at the character that decides it and never before:

- a string (or key) at its closing quote;
- a number at the first character after it (``1`` could still become ``10``), or at
  :meth:`JsonStream.end` when it ends the text;
- ``true`` / ``false`` / ``null`` at their last letter;
- an object or array at its closing bracket.

**Events** are tuples whose first item is the kind (the constants below)::

    (OBJ_START, pos)  (OBJ_END, pos)  (ARR_START, pos)  (ARR_END, pos)
    (KEY, start, end, value, raw)      (STRING, start, end, value, raw)
    (NUMBER, start, end, value, raw)   (LITERAL, start, end, value)
    (ERROR, pos, message)

``start``/``end`` delimit the token (``end`` exclusive: for a string, the index after its closing
quote; for a number, the index of the character that settled it). ``raw`` is the text between a
string's quotes when it holds an escape (else None: the raw text is the value), or a number's
text. ``ERROR`` is the first character after which no continuation can be JSON (``pos`` is the
text's length when the text ended too early); nothing is reported after it.

With ``detail=True`` the stream also reports where each scalar starts and the parts of tokens
that span several feeds (for checking a schema as the text arrives)::

    (KEY_START, pos)  (STR_START, pos)  (NUM_START, pos)  (LIT_START, pos, value)
    (STR_PART, start, end, units, raw, pending)  (NUM_PART, start, end, raw)

A string or number that ends in the feed where it started gets no part events (its closing
event carries all of it). One that spans feeds gets a part at the end of each feed it is open
in, and the rest in a last part just before its ``KEY``/``STRING``/``NUMBER``; one cut short by
an error gets its valid text in a part before the ``ERROR``. A string part holds whole
characters and escapes, ``start`` to ``end``: ``units`` is their decoding with each
``\\uXXXX`` escape as one code point (an escaped surrogate pair split over two parts shows as two
lone surrogates: compare parts as UTF-16, see :mod:`._json_schema`), ``raw`` their text as
written (None when it is ``units``). ``pending`` is the start of an escape still open after
``end`` (``""`` if none); the next part begins with it.
"""

from __future__ import annotations

import json
import json.decoder
import re
from collections.abc import Callable
from typing import Any, Final, TypeAlias

__all__ = [
    "ARR_END",
    "ARR_START",
    "DEFAULT_MAX_DEPTH",
    "ERROR",
    "KEY",
    "KEY_START",
    "LITERAL",
    "LIT_START",
    "NUMBER",
    "NUM_PART",
    "NUM_START",
    "OBJ_END",
    "OBJ_START",
    "STRING",
    "STR_PART",
    "STR_START",
    "JsonEvent",
    "JsonStream",
    "decode_units",
    "loads_bounded",
    "nesting_depth",
]

OBJ_START: Final = 0
OBJ_END: Final = 1
ARR_START: Final = 2
ARR_END: Final = 3
KEY: Final = 4
STRING: Final = 5
NUMBER: Final = 6
LITERAL: Final = 7
ERROR: Final = 8
KEY_START: Final = 9
STR_START: Final = 10
NUM_START: Final = 11
LIT_START: Final = 12
STR_PART: Final = 13
NUM_PART: Final = 14

JsonEvent: TypeAlias = tuple[Any, ...]
"""One event: ``(kind, ...)``, see the module docstring."""

scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
"""``json``'s string decoder (C): ``(text, index after the opening quote, strict) -> (value, end)``."""

# parser states
_VALUE: Final = 0  # a value is due (top level, after ':' or after ',' in an array)
_VALUE_OR_END: Final = 1  # after '['
_KEY_OR_END: Final = 2  # after '{'
_KEY: Final = 3  # after ',' in an object
_COLON: Final = 4  # after a key
_AFTER: Final = 5  # after a value inside a container
_TOP: Final = 6  # after a top-level value
_STRING: Final = 7  # inside a string
_NUMBER: Final = 8  # inside a number
_LITERAL: Final = 9  # inside true / false / null
_FAILED: Final = 10
_ENDED: Final = 11

_WS_CHARS: Final = " \t\n\r"
_WS = re.compile(r"[ \t\n\r]*")
_PLAIN = re.compile(r'[^"\\\x00-\x1f]*')
_NUM = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_DIGITS = re.compile(r"[0-9]*")
_NUM_CHARS: Final = frozenset("0123456789.eE+-")
_NUM_FIRST: Final = frozenset("-0123456789")
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES: Final = frozenset('"\\/bfnrt')
_WORDS: Final = {"t": ("true", True), "f": ("false", False), "n": ("null", None)}

# number states: where the text of a number stands
_N_BEGIN: Final = 0
_N_MINUS: Final = 1  # "-"
_N_ZERO: Final = 2  # "0" / "-0"
_N_INT: Final = 3  # "12"
_N_DOT: Final = 4  # "1."
_N_FRAC: Final = 5  # "1.5"
_N_E: Final = 6  # "1e"
_N_ESIGN: Final = 7  # "1e+"
_N_EXP: Final = 8  # "1e5"
_N_COMPLETE: Final = frozenset({_N_ZERO, _N_INT, _N_FRAC, _N_EXP})
_N_DIGIT_NEXT: Final = {
    _N_BEGIN: _N_INT,
    _N_MINUS: _N_INT,
    _N_INT: _N_INT,
    _N_DOT: _N_FRAC,
    _N_FRAC: _N_FRAC,
    _N_E: _N_EXP,
    _N_ESIGN: _N_EXP,
    _N_EXP: _N_EXP,
}
_N_EXPECT: Final = {
    _N_BEGIN: "a digit or '-'",
    _N_MINUS: "a digit after '-'",
    _N_ZERO: "'.', 'e' or the end of the number after a leading 0",
    _N_INT: "a digit, '.', 'e' or the end of the number",
    _N_DOT: "a digit after '.'",
    _N_FRAC: "a digit, 'e' or the end of the number",
    _N_E: "a digit or a sign after 'e'",
    _N_ESIGN: "a digit in the exponent",
    _N_EXP: "a digit or the end of the number",
}


def decode_units(raw: str) -> str:
    """Decode the raw text of (part of) a JSON string: escapes resolved, a pair stays two units.

    ``raw`` must be whole characters and escapes (as in a ``STR_PART``).
    """
    return scanstring(raw + '"', 0, True)[0] if "\\" in raw else raw


def _describe_char(c: str) -> str:
    return repr(c)


DEFAULT_MAX_DEPTH: Final = 256
"""The default bound on nesting (:class:`JsonStream`'s ``max_depth``): far past any tool call's
arguments, well within what ``json`` and Python's recursion limit take."""


def nesting_depth(text: str) -> int:
    """The deepest nesting of objects and arrays in ``text`` (JSON or nearly), strings skipped: a
    linear scan at C speed, to check a text before ``json.loads`` recurses through it."""
    depth = deepest = 0
    for m in _BRACKETS.finditer(text):
        c = m.group()
        if c == "{" or c == "[":
            depth += 1
            deepest = max(deepest, depth)
        elif c == "}" or c == "]":
            depth -= 1
    return deepest


def loads_bounded(text: str, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """``json.loads(text)``, refusing nesting deeper than ``max_depth`` with a ``ValueError``
    (``json.JSONDecodeError`` for invalid JSON, as ``json.loads``) instead of a ``RecursionError``."""
    if nesting_depth(text) > max_depth:
        raise ValueError(f"objects and arrays nested deeper than {max_depth} levels")
    return json.loads(text)


_BRACKETS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]')


class JsonStream:
    """An incremental JSON tokenizer (see the module docstring for the events).

    Args:
        detail: also report where scalars start and the parts of tokens that span feeds.
        multiple: accept several top-level values one after another (whitespace between; and
            any of ``separators``), as JSON Lines do; otherwise text after the value is an error.
        separators: characters also allowed between top-level values (with ``multiple``).
        max_depth: the most objects and arrays open at once; the bracket that would open one
            more is an ``ERROR`` (the nesting is the text's choice: a bound keeps every consumer
            of the values, ``json.loads`` and comparisons included, within Python's recursion
            limit).
    """

    __slots__ = (
        "_count",
        "_detail",
        "_error",
        "_esc",
        "_lidx",
        "_lstart",
        "_lvalue",
        "_lword",
        "_max_depth",
        "_multiple",
        "_npart",
        "_nraw",
        "_nstart",
        "_nstate",
        "_parted",
        "_pcarry",
        "_pos",
        "_pstart",
        "_separators",
        "_sesc",
        "_skey",
        "_sraw",
        "_sstart",
        "_stack",
        "_state",
    )

    def __init__(
        self,
        *,
        detail: bool = False,
        multiple: bool = False,
        separators: str = "",
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> None:
        if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1:
            raise ValueError(f"JsonStream: max_depth must be a positive int, got {max_depth!r}")
        self._max_depth = max_depth
        self._detail = bool(detail)
        self._multiple = bool(multiple)
        self._separators = separators if multiple else ""
        self._stack: list[bool] = []  # True: object, False: array
        self._state = _VALUE
        self._pos = 0
        self._count = 0
        self._error: tuple[int, str] | None = None
        # string in progress
        self._sstart = 0
        self._skey = False
        self._sraw: list[str] = []
        self._sesc = False
        self._esc = 0  # 0: none, 1: after '\', 2..5: after '\u' and that many hex digits minus 2
        self._pcarry = ""
        self._pstart = 0
        self._parted = False
        # number in progress
        self._nstart = 0
        self._nstate = _N_BEGIN
        self._nraw: list[str] = []
        self._npart = 0
        # literal in progress
        self._lstart = 0
        self._lword = ""
        self._lvalue: Any = None
        self._lidx = 0

    # -- state --------------------------------------------------------------------------------
    @property
    def position(self) -> int:
        """How many characters were fed."""
        return self._pos

    @property
    def depth(self) -> int:
        """How many objects and arrays are open."""
        return len(self._stack)

    @property
    def error(self) -> tuple[int, str] | None:
        """``(position, message)`` of the error, once there is one."""
        return self._error

    @property
    def count(self) -> int:
        """How many top-level values were completed."""
        return self._count

    @property
    def complete(self) -> bool:
        """Whether the text so far is whole: at least one value, none open, no error."""
        return self._state == _TOP or (self._state == _ENDED and self._error is None and self._count > 0)

    # -- feeding ------------------------------------------------------------------------------
    def feed(self, text: str) -> list[JsonEvent]:
        """Read ``text`` (the next chunk); return the events it settles, in text order.

        1. A token left open by the last chunk (a string, number or literal) is read on.
        2. Then one step per token: each state's step reads the token at ``i`` and returns the
           next index and state, or a negative index when this chunk is done (the token is still
           open, or the text cannot be JSON).
        """
        state = self._state
        n = len(text)
        base = self._pos
        self._pos = base + n
        if n == 0 or state >= _FAILED:
            if state == _ENDED and n:
                raise ValueError("JsonStream: feed() after end()")
            return []
        out: list[JsonEvent] = []
        add = out.append
        s = text
        i = 0
        stack = self._stack
        if state >= _STRING:  # 1.
            i, state = self._resume(s, n, base, add, state)
            if i < 0:
                return out
        ws_match = _WS.match
        while i < n:  # 2.
            c = s[i]
            if c in _WS_CHARS:
                i += 1
                if i < n and s[i] in _WS_CHARS:
                    i = ws_match(s, i).end()  # type: ignore[union-attr]
                continue
            if state == _AFTER:
                i, state = self._after_value(c, i, base, add, stack)
            elif state <= _VALUE_OR_END:
                i, state = self._value(c, s, i, n, base, add, stack, state)
            elif state == _COLON:
                if c != ":":
                    self._fail(add, base + i, f"expected ':' after a key, got {_describe_char(c)}")
                    return out
                i, state = i + 1, _VALUE
            elif state == _KEY or state == _KEY_OR_END:
                i, state = self._key(c, s, i, n, base, add, stack, state)
            elif self._multiple:  # _TOP: after a complete top-level value
                if c in self._separators:
                    i += 1
                else:
                    state = _VALUE
            else:
                self._fail(add, base + i, f"unexpected {_describe_char(c)} after the JSON value")
                return out
            if i < 0:
                return out
        self._state = state
        return out

    def _resume(
        self, s: str, n: int, base: int, add: Callable[[JsonEvent], None], state: int
    ) -> tuple[int, int]:
        """Read on the token the last chunk left open: (the index after it, the state), or a
        negative index when this chunk is done."""
        stack = self._stack
        if state == _STRING:
            if self._esc == 0 and _PLAIN.match(s).end() == n:  # type: ignore[union-attr]
                # the whole chunk is plain string text (the common case in small chunks)
                self._sraw.append(s)
                if self._detail:
                    start = self._pstart
                    self._pstart = start + n
                    self._parted = True
                    add((STR_PART, start, start + n, s, None, ""))
                return -1, state
            i = self._scan_string(s, 0, n, base, add)
            if i < 0 or (i == n and self._state == _STRING):
                return -1, state
            return i, (_COLON if self._skey else (_AFTER if stack else self._top()))
        if state == _NUMBER:
            i = self._scan_number(s, 0, n, base, add)
            if i < 0 or self._state == _NUMBER:
                return -1, state
        else:
            i = self._scan_literal(s, 0, n, base, add)
            if i < 0 or self._state == _LITERAL:
                return -1, state
        return i, (_AFTER if stack else self._top())

    def _after_value(
        self, c: str, i: int, base: int, add: Callable[[JsonEvent], None], stack: list[bool]
    ) -> tuple[int, int]:
        """After a value inside a container: ``,`` or the container's closing bracket."""
        if c == ",":
            return i + 1, (_KEY if stack[-1] else _VALUE)
        if c == "}" and stack[-1]:
            stack.pop()
            add((OBJ_END, base + i))
        elif c == "]" and not stack[-1]:
            stack.pop()
            add((ARR_END, base + i))
        else:
            want = "',' or '}'" if stack[-1] else "',' or ']'"
            self._fail(add, base + i, f"expected {want}, got {_describe_char(c)}")
            return -1, _AFTER
        return i + 1, (_AFTER if stack else self._top())

    def _value(
        self,
        c: str,
        s: str,
        i: int,
        n: int,
        base: int,
        add: Callable[[JsonEvent], None],
        stack: list[bool],
        state: int,
    ) -> tuple[int, int]:
        """A value is due (or ``]`` right after ``[``): read it, or fail."""
        if c == '"':
            j = self._string_value(s, i, n, base, add)
        elif c == "{" or c == "[":
            if len(stack) >= self._max_depth:
                self._fail(add, base + i, f"objects and arrays nested deeper than {self._max_depth} levels")
                return -1, state
            stack.append(c == "{")
            add((OBJ_START if c == "{" else ARR_START, base + i))
            return i + 1, (_KEY_OR_END if c == "{" else _VALUE_OR_END)
        elif c in _NUM_FIRST:
            j = self._number_value(s, i, n, base, add)
        elif c in _WORDS:
            j = self._literal_value(c, s, i, n, base, add)
        elif c == "]" and state == _VALUE_OR_END:
            stack.pop()
            add((ARR_END, base + i))
            j = i + 1
        else:
            self._fail(add, base + i, f"expected a value, got {_describe_char(c)}")
            return -1, state
        return j, (_AFTER if stack else self._top())

    def _string_value(self, s: str, i: int, n: int, base: int, add: Callable[[JsonEvent], None]) -> int:
        """A string value at ``i`` (its opening quote): the index after it, or -1 when this chunk
        is done."""
        if self._detail:
            add((STR_START, base + i))
        m = _PLAIN.match(s, i + 1).end()  # type: ignore[union-attr]
        if m < n and s[m] == '"':
            add((STRING, base + i, base + m + 1, s[i + 1 : m], None))
            return m + 1
        if m < n and s[m] == "\\":
            try:
                value, j = scanstring(s, i + 1, True)
            except ValueError:
                pass
            else:
                add((STRING, base + i, base + j, value, s[i + 1 : j - 1]))
                return j
        j = self._begin_string(s, i, n, base, add, False)
        return -1 if j < 0 or self._state == _STRING else j

    def _number_value(self, s: str, i: int, n: int, base: int, add: Callable[[JsonEvent], None]) -> int:
        """A number at ``i``: the index after it, or -1 when this chunk is done."""
        if self._detail:
            add((NUM_START, base + i))
        mo = _NUM.match(s, i)
        if mo is not None:
            j = mo.end()
            if j < n and s[j] not in _NUM_CHARS:
                raw = s[i:j]
                try:
                    number: Any = float(raw) if mo.lastindex else int(raw)
                except ValueError as exc:  # more digits than int() takes
                    self._fail(add, base + i, f"number not representable: {exc}")
                    return -1
                add((NUMBER, base + i, base + j, number, raw))
                return j
        self._nstart = base + i
        self._nstate = _N_BEGIN
        self._nraw = []
        self._npart = base + i
        self._state = _NUMBER
        j = self._scan_number(s, i, n, base, add)
        return -1 if j < 0 or self._state == _NUMBER else j

    def _literal_value(
        self, c: str, s: str, i: int, n: int, base: int, add: Callable[[JsonEvent], None]
    ) -> int:
        """``true`` / ``false`` / ``null`` at ``i``: the index after it, or -1 when this chunk is
        done."""
        word, lit = _WORDS[c]
        if self._detail:
            add((LIT_START, base + i, lit))
        if s.startswith(word, i):
            add((LITERAL, base + i, base + i + len(word), lit))
            return i + len(word)
        self._lstart = base + i
        self._lword = word
        self._lvalue = lit
        self._lidx = 0
        self._state = _LITERAL
        j = self._scan_literal(s, i, n, base, add)
        return -1 if j < 0 or self._state == _LITERAL else j

    def _key(
        self,
        c: str,
        s: str,
        i: int,
        n: int,
        base: int,
        add: Callable[[JsonEvent], None],
        stack: list[bool],
        state: int,
    ) -> tuple[int, int]:
        """A key is due (or ``}`` right after ``{``): read it, or fail."""
        if c == '"':
            if self._detail:
                add((KEY_START, base + i))
            m = _PLAIN.match(s, i + 1).end()  # type: ignore[union-attr]
            if m < n and s[m] == '"':
                add((KEY, base + i, base + m + 1, s[i + 1 : m], None))
                return m + 1, _COLON
            j = self._begin_string(s, i, n, base, add, True)
            return (-1 if j < 0 or self._state == _STRING else j), _COLON
        if c == "}" and state == _KEY_OR_END:
            stack.pop()
            add((OBJ_END, base + i))
            return i + 1, (_AFTER if stack else self._top())
        want = "a key or '}'" if state == _KEY_OR_END else "a key"
        self._fail(add, base + i, f"expected {want}, got {_describe_char(c)}")
        return -1, state

    def end(self) -> list[JsonEvent]:
        """The text is over: settle a number that ends it, or report what is missing."""
        state = self._state
        if state >= _FAILED:
            if state == _FAILED:
                return []
            raise ValueError("JsonStream: end() called twice")
        out: list[JsonEvent] = []
        add = out.append
        pos = self._pos
        if state == _NUMBER:
            if self._nstate not in _N_COMPLETE:
                self._fail(add, pos, f"the text ends inside a number (expected {_N_EXPECT[self._nstate]})")
                return out
            self._settle_number(pos, add)
            if self._state == _FAILED:
                return out
            state = _AFTER if self._stack else self._top()
        elif state == _STRING:
            self._fail(add, pos, "the text ends inside a string")
            return out
        elif state == _LITERAL:
            self._fail(add, pos, f"the text ends inside {self._lword!r}")
            return out
        if self._stack:
            what = "an object" if self._stack[-1] else "an array"
            self._fail(add, pos, f"the text ends inside {what} ({len(self._stack)} open)")
            return out
        if state != _TOP and self._count == 0 and not self._multiple:
            self._fail(add, pos, "no JSON value in the text")
            return out
        self._state = _ENDED
        return out

    # -- helpers ------------------------------------------------------------------------------
    def _top(self) -> int:
        self._count += 1
        return _TOP

    def _fail(self, add: Callable[[JsonEvent], None], pos: int, message: str) -> None:
        self._error = (pos, message)
        self._state = _FAILED
        add((ERROR, pos, message))

    # strings ------------------------------------------------------------------------------
    def _begin_string(
        self, s: str, i: int, n: int, base: int, add: Callable[[JsonEvent], None], key: bool
    ) -> int:
        """Start the slow scan of a string whose opening quote is ``s[i]``."""
        self._sstart = base + i
        self._skey = key
        self._sraw = []
        self._sesc = False
        self._esc = 0
        self._pcarry = ""
        self._pstart = base + i + 1
        self._parted = False
        self._state = _STRING
        return self._scan_string(s, i + 1, n, base, add)

    def _scan_string(self, s: str, i: int, n: int, base: int, add: Callable[[JsonEvent], None]) -> int:
        """Scan string contents from ``s[i]``: the index after the closing quote, ``n`` when the
        text ends inside the string (the state stays ``_STRING``), or -1 after an error."""
        j = i  # where this feed's raw text of the string starts
        esc = self._esc
        esc_at = -1  # index in s of the backslash of the last escape begun in this feed
        plain = _PLAIN.match
        detail = self._detail
        while i < n:
            if esc == 0:
                m = plain(s, i).end()  # type: ignore[union-attr]
                if m >= n:
                    i = n
                    break
                c = s[m]
                if c == '"':
                    return self._close_string(s, j, m, base, add)
                if c == "\\":
                    self._sesc = True
                    esc = 1
                    esc_at = m
                    i = m + 1
                    continue
                if detail:
                    self._str_part(self._pcarry + s[j:m], "", add)
                self._fail(add, base + m, f"control character {c!r} in a string (it must be escaped)")
                return -1
            c = s[i]
            if esc == 1:
                if c == "u":
                    esc = 2
                elif c in _SIMPLE_ESCAPES:
                    esc = 0
                else:
                    self._escape_error(s, j, esc_at, i, add)
                    self._fail(add, base + i, f"invalid escape '\\{c}' in a string")
                    return -1
            elif c in _HEX:
                esc = esc + 1 if esc < 5 else 0
            else:
                self._escape_error(s, j, esc_at, i, add)
                self._fail(add, base + i, f"expected a hex digit in a \\u escape, got {c!r}")
                return -1
            i += 1
        # the text ended inside the string
        self._esc = esc
        self._sraw.append(s[j:n])
        if detail:
            carry = self._pcarry
            if esc == 0:
                self._str_part(carry + s[j:n], "", add)
            elif esc_at >= 0:
                self._str_part(carry + s[j:esc_at], s[esc_at:n], add)
            else:  # still inside the escape begun in an earlier feed
                self._str_part("", carry + s[j:n], add)
        return n

    def _escape_error(self, s: str, j: int, esc_at: int, i: int, add: Callable[[JsonEvent], None]) -> None:
        """Before an error at ``s[i]`` inside an escape: report the valid text before it."""
        if self._detail:
            if esc_at >= 0:
                self._str_part(self._pcarry + s[j:esc_at], s[esc_at:i], add)
            else:
                self._str_part("", self._pcarry + s[j:i], add)

    def _str_part(self, piece: str, carry: str, add: Callable[[JsonEvent], None]) -> None:
        """Report ``piece`` (whole characters and escapes) as a part, and ``carry`` (the start of
        an escape still open, which the next part begins with)."""
        self._pcarry = carry
        if piece or carry:
            start = self._pstart
            self._pstart = start + len(piece)
            self._parted = True
            units = decode_units(piece)
            add((STR_PART, start, start + len(piece), units, piece if "\\" in piece else None, carry))

    def _close_string(self, s: str, j: int, m: int, base: int, add: Callable[[JsonEvent], None]) -> int:
        if self._parted:
            self._str_part(self._pcarry + s[j:m], "", add)
        raw = "".join(self._sraw) + s[j:m] if self._sraw else s[j:m]
        self._sraw = []
        kind = KEY if self._skey else STRING
        if self._sesc:
            add((kind, self._sstart, base + m + 1, scanstring(raw + '"', 0, True)[0], raw))
        else:
            add((kind, self._sstart, base + m + 1, raw, None))
        self._state = _COLON if self._skey else _AFTER  # the caller sets the real next state
        return m + 1

    # numbers ------------------------------------------------------------------------------
    def _scan_number(self, s: str, i: int, n: int, base: int, add: Callable[[JsonEvent], None]) -> int:
        """Scan a number from ``s[i]`` (state in ``self._nstate``): the index of the character
        that ended it, ``n`` when the text ends inside it, or -1 after an error."""
        j = i
        st = self._nstate
        while i < n:
            c = s[i]
            if "0" <= c <= "9":
                if st == _N_ZERO:
                    return self._number_error(s, j, i, base, add, f"unexpected digit {c!r} after a leading 0")
                if st == _N_BEGIN or st == _N_MINUS:
                    st = _N_ZERO if c == "0" else _N_INT
                    i += 1
                    continue
                st = _N_DIGIT_NEXT[st]
                i = _DIGITS.match(s, i + 1).end()  # type: ignore[union-attr]
                continue
            if c == "-" and st == _N_BEGIN:
                st = _N_MINUS
            elif c == "." and (st == _N_ZERO or st == _N_INT):
                st = _N_DOT
            elif (c == "e" or c == "E") and st in (_N_ZERO, _N_INT, _N_FRAC):
                st = _N_E
            elif (c == "+" or c == "-") and st == _N_E:
                st = _N_ESIGN
            elif c in _NUM_CHARS:
                self._nstate = st
                return self._number_error(
                    s, j, i, base, add, f"unexpected {c!r} in a number (expected {_N_EXPECT[st]})"
                )
            else:  # the number ends here
                self._nstate = st
                if st not in _N_COMPLETE:
                    return self._number_error(
                        s, j, i, base, add, f"incomplete number before {c!r} (expected {_N_EXPECT[st]})"
                    )
                self._nraw.append(s[j:i])
                if self._npart != self._nstart:  # it spanned feeds: its last part first
                    self._emit_num_part(base + i, s[j:i], add)
                self._settle_number(base + i, add)
                return -1 if self._state == _FAILED else i
            i += 1
        self._nstate = st
        self._nraw.append(s[j:n])
        self._emit_num_part(base + n, s[j:n], add)
        return n

    def _emit_num_part(self, end: int, piece: str, add: Callable[[JsonEvent], None]) -> None:
        if self._detail and piece:
            add((NUM_PART, self._npart, end, piece))
        self._npart = end

    def _number_error(
        self, s: str, j: int, i: int, base: int, add: Callable[[JsonEvent], None], message: str
    ) -> int:
        self._emit_num_part(base + i, s[j:i], add)
        self._fail(add, base + i, message)
        return -1

    def _settle_number(self, end: int, add: Callable[[JsonEvent], None]) -> None:
        raw = "".join(self._nraw)
        self._nraw = []
        try:
            value: Any = float(raw) if any(c in raw for c in ".eE") else int(raw)
        except ValueError as exc:
            self._fail(add, self._nstart, f"number not representable: {exc}")
            return
        add((NUMBER, self._nstart, end, value, raw))
        self._state = _AFTER

    # literals -----------------------------------------------------------------------------
    def _scan_literal(self, s: str, i: int, n: int, base: int, add: Callable[[JsonEvent], None]) -> int:
        word = self._lword
        k = self._lidx
        while i < n and k < len(word):
            if s[i] != word[k]:
                self._fail(add, base + i, f"expected {word!r}, got {_describe_char(s[i])} after {word[:k]!r}")
                return -1
            i += 1
            k += 1
        self._lidx = k
        if k == len(word):
            add((LITERAL, self._lstart, base + i, self._lvalue))
            self._state = _AFTER
        return i
