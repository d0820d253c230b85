"""The multi-pattern automaton shared by ``replace``, ``hold_back`` and ``stop``.

One trie over all patterns, with Aho-Corasick failure links, and two resumable scanners:
:class:`StopScanner` (earliest-starting, then longest, match: ``stop``) and
:class:`ReplaceScanner` (leftmost-longest, non-overlapping replacement: ``replace``,
``hold_back``).

Why our own automaton rather than a library: the maintained PyPI automata (``pyahocorasick``,
``ahocorasick-rs``) search a *whole* string; neither exposes the state between two calls, so a
pattern split across chunks ("<" "N" "L>") cannot be matched without rescanning, and neither can
say which suffix of the text is still the start of a pattern -- the one fact earliest emission
needs. The scanners below keep exactly that state: the automaton node (whose longest suffix that
can still grow gives the first open position) and the earliest, longest match completed so far.

Cost per character grows with neither the number nor the length of the patterns: a scanner
follows one trie edge per character (failure links included, amortised), and outside a partial
match it jumps ahead to the next character that can start a pattern with one compiled
character-class search (C speed). A failed partial match is never rescanned. The only rescan is
after a replacement decided while a longer pattern was still possible: the text after the match
(shorter than the longest pattern) is scanned again, once per match.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

__all__ = ["PatternTrie", "ReplaceScanner", "StopScanner"]


class PatternTrie:
    """A trie over non-empty, distinct patterns; node 0 is the root.

    Attributes:
        patterns: the patterns, in the order given (their index is the match id).
        children: per node, the outgoing edges ``{char: node}``.
        terminal: per node, the index of the pattern that ends there, or -1.
        leaf: per node, True when no pattern continues past it.
        max_len: the length of the longest pattern.
    """

    __slots__ = ("_links", "children", "leaf", "max_len", "patterns", "skip", "terminal")

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns: tuple[str, ...] = tuple(patterns)
        children: list[dict[str, int]] = [{}]
        terminal: list[int] = [-1]
        for index, pattern in enumerate(self.patterns):
            if not isinstance(pattern, str) or not pattern:
                raise ValueError(f"pattern {index} must be a non-empty str, got {pattern!r}")
            node = 0
            for ch in pattern:
                nxt = children[node].get(ch)
                if nxt is None:
                    nxt = len(children)
                    children[node][ch] = nxt
                    children.append({})
                    terminal.append(-1)
                node = nxt
            if terminal[node] >= 0:
                raise ValueError(f"pattern {pattern!r} is given twice")
            terminal[node] = index
        self.children = children
        self.terminal = terminal
        self.leaf = [not edges for edges in children]
        self.max_len = max((len(p) for p in self.patterns), default=0)
        first = sorted(children[0])
        # search(text, pos) finds the next position that can start a pattern.
        self.skip: Callable[[str, int], re.Match[str] | None]
        if first:
            self.skip = re.compile("[" + "".join(_class_escape(c) for c in first) + "]").search
        else:
            self.skip = _never
        self._links: _Links | None = None

    def links(self) -> _Links:
        """The Aho-Corasick links of this trie (built on first use, in time linear in its size)."""
        if self._links is None:
            self._links = _Links(self)
        return self._links

    def is_open(self, text: str) -> bool:
        """True when ``text`` is a non-empty proper prefix of some pattern."""
        node = 0
        for ch in text:
            nxt = self.children[node].get(ch)
            if nxt is None:
                return False
            node = nxt
        return bool(text) and not self.leaf[node]


class _Links:
    """Aho-Corasick links over a :class:`PatternTrie`, for :class:`StopScanner`.

    Attributes:
        fail: per node, the node of its longest proper suffix that is also a node (root: 0).
        match: per node, the pattern index of the longest pattern that is a suffix of the node's
            text (the earliest-starting match ending here), or -1.
        open: per node, the length of the longest suffix of the node's text that is a non-empty
            proper prefix of a pattern (a node with children), or 0.
        length: per pattern index, its length.
    """

    __slots__ = ("fail", "length", "match", "open")

    def __init__(self, trie: PatternTrie) -> None:
        children = trie.children
        size = len(children)
        fail = [0] * size
        depth = [0] * size
        match = [-1] * size
        opened = [0] * size
        order: list[int] = []
        queue = list(children[0].values())
        for node in queue:
            depth[node] = 1
        head = 0
        while head < len(queue):  # breadth-first: a node's fail link is shallower than the node
            node = queue[head]
            head += 1
            order.append(node)
            for ch, nxt in children[node].items():
                depth[nxt] = depth[node] + 1
                f = fail[node]
                while True:
                    target = children[f].get(ch)
                    if target is not None and target != nxt:
                        fail[nxt] = target
                        break
                    if f == 0:
                        fail[nxt] = 0
                        break
                    f = fail[f]
                queue.append(nxt)
        for node in order:
            t = trie.terminal[node]
            match[node] = t if t >= 0 else match[fail[node]]
            opened[node] = depth[node] if children[node] else opened[fail[node]]
        self.fail = fail
        self.match = match
        self.open = opened
        self.length = [len(p) for p in trie.patterns]


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


def _never(text: str, pos: int = 0) -> None:
    return None


def _class_escape(ch: str) -> str:
    return "\\" + ch if ch in "\\]^-[" else ch


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
