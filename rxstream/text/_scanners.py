"""The two resumable scanners over a :class:`~._trie.PatternTrie`: :class:`StopScanner`
(earliest-starting, then longest, match: ``stop``) and :class:`ReplaceScanner` (leftmost-longest,
non-overlapping replacement: ``replace``, ``hold_back``).

The scanners keep exactly the state a stream needs between chunks: the automaton node (whose
longest suffix that can still grow gives the first open position) and the earliest, longest
match completed so far.

Cost per character grows with neither the number nor the length of the patterns: a scanner
follows one trie edge per character (failure links included, amortised), and outside a partial
match it jumps ahead to the next character that can start a pattern with one compiled
character-class search (C speed). A failed partial match is never rescanned. The only rescan is
after a replacement decided while a longer pattern was still possible: the text after the match
(shorter than the longest pattern) is scanned again, once per match.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._trie import PatternTrie

__all__ = ["ReplaceScanner", "StopScanner"]


class StopScanner:
    """Finds the earliest-starting (then longest) pattern in a stream, in O(1) per character.

    An Aho-Corasick scan: each character follows one trie edge (or failure links, amortised
    O(1)), whatever the number or length of the patterns; outside a partial match it jumps to
    the next character that can start a pattern with one compiled search. The scanner keeps no
    text. After every character it knows:

    - :attr:`best`: the earliest-starting complete match so far, the longest one starting
      there (``(start, pattern_index)``, absolute positions), among matches that end after
      :attr:`protect`;
    - :attr:`open_start`: the first position whose remaining text is a non-empty proper prefix
      of a pattern (:attr:`pos` if none).

    The match is decided (:attr:`match` set, and nothing more is consumed) as soon as a best
    match exists and no position at or before its start is open, or at ``final``.

    Attributes:
        pos: how many characters were consumed.
        protect: matches that end at or before this absolute position are ignored.
    """

    __slots__ = ("_length", "_open", "_skip", "best", "match", "node", "pos", "protect", "trie")

    def __init__(self, trie: PatternTrie, *, protect: int = 0) -> None:
        self.trie = trie
        self._length = trie.links().length
        self._open = trie.links().open
        self._skip = trie.skip
        self.protect = protect
        self.pos = 0
        self.best: tuple[int, int] | None = None
        self.match: tuple[int, int] | None = None
        self.node = 0
        """The automaton state (0, the root, when no position is open and no match pending)."""

    @property
    def open_start(self) -> int:
        """The first open position (see the class docstring), or :attr:`pos`."""
        return self.pos - self._open[self.node]

    def best_end(self) -> int | None:
        """Where the best match so far ends, or None."""
        best = self.best
        return None if best is None else best[0] + self._length[best[1]]

    def feed(self, chunk: str, final: bool = False) -> None:
        """Consume ``chunk`` (up to the decided match); with ``final``, decide at the end."""
        if self.match is not None:
            return
        node = self.node
        if node == 0 and self._skip(chunk, 0) is None:
            self.pos += len(chunk)  # no character can start a pattern: nothing to follow
            if final and self.best is not None:
                self.match = self.best
            return
        trie = self.trie
        links = trie.links()
        children = trie.children
        fail = links.fail
        match = links.match
        opened = links.open
        length = self._length
        skip = trie.skip
        base = self.pos
        protect = self.protect
        best = self.best
        best_start = best[0] if best is not None else -1
        n = len(chunk)
        i = 0
        while i < n:
            if node == 0:
                m = skip(chunk, i)
                if m is None:
                    i = n
                    break
                i = m.start()
            ch = chunk[i]
            i += 1
            nxt = children[node].get(ch)
            while nxt is None and node:
                node = fail[node]
                nxt = children[node].get(ch)
            node = nxt or 0
            t = match[node]
            if t >= 0:
                end = base + i
                if end > protect:
                    start = end - length[t]
                    if best is None or start <= best_start:
                        best = (start, t)
                        best_start = start
            if best is not None:
                od = opened[node]
                if od == 0 or base + i - od > best_start:
                    self.match = best
                    break
        self.pos = base + i
        self.node = node
        self.best = best
        if final and self.match is None and best is not None:
            self.match = best

    def reset(self) -> None:
        """Forget all state."""
        self.pos = 0
        self.best = None
        self.match = None
        self.node = 0


class ReplaceScanner:
    """Resumable leftmost-longest replacement over a stream of text (SEMANTICS §2).

    The Aho-Corasick scan of :class:`StopScanner`, resumed after each match: ``feed`` returns the
    output for everything resolved (literal text and, per match, ``outputs[pattern_index]``) and
    holds the text from the first open position the batch scan visits. A failed partial match
    costs nothing extra (failure links); only when a match is decided while a longer pattern was
    still possible is the text after it (less than the longest pattern) scanned again from the
    root -- so the work is O(characters + matches x longest pattern), and a match consumes at
    least one character.

    Attributes:
        held: the input text held (from :attr:`resolved` on).
        resolved: how many input characters are resolved.
    """

    __slots__ = ("_best", "_node", "held", "outputs", "resolved", "trie")

    def __init__(self, trie: PatternTrie, outputs: Sequence[str]) -> None:
        if len(outputs) != len(trie.patterns):
            raise ValueError("one output per pattern is required")
        self.trie = trie
        self.outputs = tuple(outputs)
        trie.links()
        self.held = ""
        self.resolved = 0
        self._node = 0
        self._best: tuple[int, int] | None = None  # (start relative to resolved, pattern index)

    def feed(self, chunk: str, final: bool = False) -> str:
        """Consume ``chunk``; with ``final`` resolve the held text too. Return the new output."""
        held = self.held
        node = self._node
        trie = self.trie
        if not final and node == 0 and trie.skip(chunk, 0) is None:
            # Fast path: nothing held (root state) and no character of the chunk can start a pattern.
            self.resolved += len(chunk)
            return chunk
        s = held + chunk if held else chunk
        n = len(s)
        links = trie.links()
        children = trie.children
        fail = links.fail
        match = links.match
        opened = links.open
        length = links.length
        skip = trie.skip
        outputs = self.outputs
        out: list[str] = []
        c = 0  # resolved up to here (relative to s)
        i = len(held)  # next character to consume
        best = self._best
        best_start = best[0] if best is not None else -1
        while True:
            while i < n:
                if node == 0:
                    m = skip(s, i)
                    if m is None:
                        i = n
                        break
                    i = m.start()
                nxt = children[node].get(s[i])
                while nxt is None and node:
                    node = fail[node]
                    nxt = children[node].get(s[i])
                node = nxt or 0
                i += 1
                t = match[node]
                if t >= 0:
                    start = i - length[t]
                    if best is None or start <= best_start:
                        best = (start, t)
                        best_start = start
                if best is not None:
                    od = opened[node]
                    if od == 0 or i - od > best_start:
                        break  # decided: nothing at or before best_start can still grow
            else:
                if not (final and best is not None):
                    break
            if best is None:
                break  # (only when the skip ran off the end)
            # Output the literal text before the match, then its replacement; rescan after it.
            if best_start > c:
                out.append(s[c:best_start])
            out.append(outputs[best[1]])
            c = best_start + length[best[1]]
            i = c
            node = 0
            best = None
            best_start = -1
        if final:
            r = n
        else:
            r = i - opened[node]
            if best is not None and best_start < r:
                r = best_start
        if r > c:
            out.append(s[c:r])
        self.held = s[r:]
        self.resolved += r
        self._node = node
        self._best = None if best is None else (best_start - r, best[1])
        if final:
            self.held = ""
            self._node = 0
            self._best = None
        return "".join(out)

    def reset(self) -> None:
        """Forget all state."""
        self.held = ""
        self.resolved = 0
        self._node = 0
        self._best = None
