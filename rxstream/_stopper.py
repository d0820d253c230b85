"""``StopMatcher``: stop strings over a stream of text, outside Rx (SEMANTICS §3)."""

from __future__ import annotations

from collections.abc import Iterable

from ._automaton import PatternTrie, Scanner
from ._rules import normalize_stops

__all__ = ["StopMatcher", "stop_text"]


class StopMatcher:
    """Finds the earliest-starting (then longest) stop string in a stream of text.

    ``feed`` returns the text that is safe to show now (SEMANTICS §3 "Streaming"); once a stop
    is decided, :attr:`stopped` is True, :attr:`stop_string` names it, and further input is
    ignored. ``flush`` resolves the end of the input.

    Args:
        stops: the stop strings (non-empty; duplicates are ignored).
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

    __slots__ = ("_emitted", "_first_pending", "_probe", "_prompt_len", "_scanner", "include_stop",
                 "stops")

    def __init__(self, stops: str | Iterable[str], include_stop: bool = False, *, prompt: str = "",
                 skip_initial: bool = False, owner: str = "stop") -> None:
        if not isinstance(prompt, str):
            raise TypeError(f"{owner}: prompt must be a str, got {type(prompt).__name__}: {prompt!r}")
        self.stops = normalize_stops(stops, owner=owner)
        self.include_stop = bool(include_stop)
        trie = PatternTrie(self.stops)
        outputs = self.stops if self.include_stop else ("",) * len(self.stops)
        self._scanner = Scanner(trie, outputs, halt=True, protect=len(prompt))
        self._probe = Scanner(trie, outputs, halt=True)
        self._prompt_len = len(prompt)
        self._emitted = 0
        self._first_pending = bool(skip_initial)
        if prompt:
            self._scanner.feed(prompt)
            self._emitted = self._scanner.resolved

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
        sc = self._scanner
        held = sc.held
        start = max(self._emitted, self._prompt_len) - sc.resolved
        return held[start:] if start > 0 else held

    def feed(self, text: str) -> str:
        """Consume ``text``; return what may be shown now ("" once stopped)."""
        sc = self._scanner
        if sc.match is not None:
            return ""
        if self._first_pending and text:
            self._first_pending = False
            sc.protect = sc.resolved + len(sc.held) + len(text)
        old = sc.resolved
        if not self.include_stop and old >= self._prompt_len:
            # Common case: the output is exactly the newly resolved input (the stop string, if
            # one matched, is not part of it).
            out = sc.feed(text)
            m = sc.match
            self._emitted = sc.resolved if m is None else m[0]
            return out
        return self._emit(old, sc.feed(text), final=False)

    def flush(self) -> str:
        """Resolve the end of the input and return the rest of the output."""
        sc = self._scanner
        if sc.match is not None:
            return ""
        old = sc.resolved
        return self._emit(old, sc.feed("", final=True), final=True)

    def _emit(self, old: int, out: str, final: bool) -> str:
        sc = self._scanner
        if sc.match is not None:
            start, index = sc.match
            end = start + len(self.stops[index]) if self.include_stop else start
        else:
            end = sc.resolved
            held = sc.held
            if self.include_stop and held and not final:
                # Everything up to the end of the earliest stop already in the held text may go out.
                probe = self._probe
                probe.reset()
                probe.protect = sc.protect - sc.resolved
                probe.feed(held, final=True)
                limit = len(held)
                if probe.match is not None:
                    limit = probe.match[0] + len(self.stops[probe.match[1]])
                out += held[:limit]
                end += limit
        lo = max(self._emitted, self._prompt_len)
        if end <= lo:
            return ""
        self._emitted = end
        return out[lo - old:] if lo > old else out


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
