"""``StopMatcher``: stop strings over a stream of text, outside Rx (SEMANTICS §3)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from ._rules import StopRules, stop_rules
from ._scanners import StopScanner

__all__ = ["StopMatcher", "stop_text"]


class StopMatcher:
    """Finds the earliest-starting (then longest) stop string in a stream of text.

    ``feed`` returns the text that is safe to show now (SEMANTICS §3 "Streaming"); once a stop
    is decided, :attr:`stopped` is True, :attr:`stop_string` names it, and further input is
    ignored. ``flush`` resolves the end of the input.

    Args:
        stops: the stop strings (non-empty; duplicates are ignored), or :class:`StopRules` compiled
            once with :func:`rxstream.text.stop_rules` (shared by many matchers, not checked again).
        include_stop: keep the matched stop string at the end of the output.
        prompt: text that comes before the stream (context only): it is never output, and a
            stop string lying wholly inside it does not fire; one that starts in it and ends in
            the stream does, and cuts the output at the start of the stream.
        skip_initial: the first non-empty chunk is text that was already there (the first
            cumulative snapshot, say): it is output, but a stop string lying wholly inside it
            does not fire.

    >>> m = StopMatcher(["\\nUser:"])
    >>> [m.feed(c) for c in ["Hi", "!\\nU", "ser: x"]], m.stop_string
    (['Hi', '!', ''], '\\nUser:')
    """

    __slots__ = (
        "_buf",
        "_buf_off",
        "_emitted",
        "_first_pending",
        "_held_len",
        "_length",
        "_prompt_len",
        "_scanner",
        "include_stop",
        "stops",
    )

    def __init__(
        self,
        stops: str | Iterable[str] | StopRules,
        include_stop: bool = False,
        *,
        prompt: str = "",
        skip_initial: bool = False,
        owner: str = "stop",
    ) -> None:
        if not isinstance(prompt, str):
            raise TypeError(f"{owner}: prompt must be a str, got {type(prompt).__name__}: {prompt!r}")
        rules = stop_rules(stops, owner=owner)
        self.stops = rules.strings
        self.include_stop = bool(include_stop)
        self._length = rules.trie.links().length
        self._scanner = StopScanner(rules.trie, protect=len(prompt))
        self._prompt_len = len(prompt)
        # Stream text received but not output: parts of _buf, the first one from _buf_off on.
        self._buf: deque[str] = deque()
        self._buf_off = 0
        self._held_len = 0
        self._emitted = len(prompt)  # absolute position (prompt included) output up to
        self._first_pending = bool(skip_initial)
        if prompt:
            self._scanner.feed(prompt)

    @property
    def stopped(self) -> bool:
        """True once a stop string has been decided."""
        return self._scanner.match is not None

    @property
    def stop_string(self) -> str | None:
        """The stop string that matched, or None."""
        m = self._scanner.match
        return None if m is None else self.stops[m[1]]

    @property
    def stop_position(self) -> int | None:
        """Where the matched stop string starts, counted in characters of the stream (not the prompt).

        Negative when the stop string starts inside the prompt.
        """
        m = self._scanner.match
        return None if m is None else m[0] - self._prompt_len

    @property
    def emitted(self) -> int:
        """How many characters of the stream have been output."""
        return self._emitted - self._prompt_len

    @property
    def held(self) -> str:
        """Stream text received but not output (yet)."""
        if not self._held_len:
            return ""
        return "".join(self._buf)[self._buf_off :]

    @property
    def holding(self) -> bool:
        """True when some stream text is held (cheaper than ``bool(held)``)."""
        return self._held_len > 0

    def feed(self, text: str) -> str:
        """Consume ``text``; return what may be shown now ("" once stopped)."""
        sc = self._scanner
        if sc.match is not None:
            return ""
        if self._first_pending and text:
            self._first_pending = False
            sc.protect = sc.pos + len(text)
        before = sc.pos
        sc.feed(text)
        if not self._held_len and sc.node == 0 and sc.match is None:
            # Common case: nothing held before, nothing open or matched now: all of it goes out.
            self._emitted = sc.pos
            return text
        consumed = sc.pos - before
        if consumed:
            self._buf.append(text if consumed == len(text) else text[:consumed])
            self._held_len += consumed
        return self._emit(final=False)

    def flush(self) -> str:
        """Resolve the end of the input and return the rest of the output."""
        sc = self._scanner
        if sc.match is not None:
            return ""
        sc.feed("", final=True)
        return self._emit(final=True)

    def _emit(self, final: bool) -> str:
        sc = self._scanner
        m = sc.match
        if m is not None:
            end = m[0] + self._length[m[1]] if self.include_stop else m[0]
        elif final:
            end = sc.pos
        elif self.include_stop:
            best_end = sc.best_end()
            end = sc.pos if best_end is None else best_end
        else:
            best = sc.best
            end = sc.open_start
            if best is not None and best[0] < end:
                end = best[0]
        lo = self._emitted  # never before the end of the prompt
        if end <= lo:
            return ""
        self._emitted = end
        return self._take(end - lo)

    def _take(self, k: int) -> str:
        """Remove and return the first ``k`` held characters (copying only those)."""
        buf = self._buf
        self._held_len -= k
        off = self._buf_off
        first = buf[0]
        if off + k < len(first):
            self._buf_off = off + k
            return first[off : off + k]
        out: list[str] = []
        while k:
            first = buf[0]
            avail = len(first) - off
            if k < avail:
                out.append(first[off : off + k])
                off += k
                break
            out.append(first[off:] if off else first)
            buf.popleft()
            k -= avail
            off = 0
        self._buf_off = off
        return "".join(out)


def stop_text(text: str, stops: str | Iterable[str], include_stop: bool = False) -> tuple[str, str | None]:
    """Batch stop (SEMANTICS §3): cut ``text`` at the earliest (then longest) stop string.

    Returns ``(output, matched_stop_string_or_None)``.

    >>> stop_text("abc<|end|>def", ["<|end|>", "de"])
    ('abc', '<|end|>')
    """
    m = StopMatcher(stops, include_stop, owner="stop_text")
    out = m.feed(text)
    out += m.flush()
    return out, m.stop_string
