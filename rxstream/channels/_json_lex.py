"""The lexer under :class:`~._json_stream.JsonStream` (an incremental JSON tokenizer that reports
each token the moment it is settled): the event kinds and parser states, and :class:`JsonLexer`,
the scanning of strings, numbers and literals (which may span feeds).

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
    "JsonLexer",
    "decode_units",
    "scanstring",
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


def _describe_char(c: str) -> str:
    return repr(c)


DEFAULT_MAX_DEPTH: Final = 256
"""The default bound on nesting (:class:`JsonStream`'s ``max_depth``): far past any tool call's
arguments, well within what ``json`` and Python's recursion limit take."""


def decode_units(raw: str) -> str:
    """Decode the raw text of (part of) a JSON string: escapes resolved, a pair stays two units.

    ``raw`` must be whole characters and escapes (as in a ``STR_PART``).
    """
    return scanstring(raw + '"', 0, True)[0] if "\\" in raw else raw


class JsonLexer:
    """A stream's state and its token scanners (:class:`~._json_stream.JsonStream` reads the
    structure on top)."""

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

    _count: int
    _detail: bool
    _error: tuple[int, str] | None
    _esc: int
    _lidx: int
    _lstart: int
    _lvalue: Any
    _lword: str
    _max_depth: int
    _multiple: bool
    _npart: int
    _nraw: list[str]
    _nstart: int
    _nstate: int
    _parted: bool
    _pcarry: str
    _pos: int
    _pstart: int
    _separators: str
    _sesc: bool
    _skey: bool
    _sraw: list[str]
    _sstart: int
    _stack: list[bool]
    _state: int

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
