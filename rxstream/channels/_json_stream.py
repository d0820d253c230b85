"""``JsonStream``: an incremental JSON tokenizer that reports each token the moment it is settled.

Feed it text in any chunking; each :meth:`JsonStream.feed` returns the events of the tokens that
the new text settles, with their character positions in the whole text fed so far. Nothing is
ever re-parsed: a token is read once, and the scanners jump over runs (string contents,
whitespace, digits) with compiled regular expressions and ``json``'s C string decoder, so the
cost is per token rather than per character (SEMANTICS §9). The events, and when each is
settled, are described in :mod:`._json_lex` (the lexer under the stream).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._json_bounded import loads_bounded, nesting_depth
from ._json_lex import (
    _AFTER,
    _COLON,
    _ENDED,
    _FAILED,
    _KEY,
    _KEY_OR_END,
    _LITERAL,
    _N_BEGIN,
    _N_COMPLETE,
    _N_EXPECT,
    _NUM,
    _NUM_CHARS,
    _NUM_FIRST,
    _NUMBER,
    _PLAIN,
    _STRING,
    _TOP,
    _VALUE,
    _VALUE_OR_END,
    _WORDS,
    _WS,
    _WS_CHARS,
    ARR_END,
    ARR_START,
    DEFAULT_MAX_DEPTH,
    ERROR,
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
    JsonLexer,
    _describe_char,
    decode_units,
    scanstring,
)

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


class JsonStream(JsonLexer):
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

    __slots__ = ()

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
