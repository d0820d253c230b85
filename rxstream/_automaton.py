"""The multi-pattern automaton shared by ``replace``, ``hold_back`` and ``stop``.

One trie over all patterns plus a resumable leftmost-longest scanner.

Why our own automaton rather than a library: the maintained PyPI automata (``pyahocorasick``,
``ahocorasick-rs``) search a *whole* string; neither exposes the state between two calls, so a
pattern split across chunks ("<" "N" "L>") cannot be matched without rescanning, and neither can
say which suffix of the text is still the start of a pattern -- the one fact earliest emission
needs. The scanner below keeps exactly that state: the held text (the first open position
onwards), its trie node, and the longest pattern completed there so far.

Cost per character does not grow with the number of patterns: the scanner follows one trie edge
(a dict lookup) per character, and outside a partial match it jumps ahead to the next character
that can start a pattern with one compiled character-class search (C speed). When a partial match
fails, the scan restarts one character after its start (leftmost-longest semantics require it),
so a character can be looked at again at most ``max_len`` times -- a bound set by the patterns'
length, never by their number.

``stop`` needs no restart (it ends at its first match), so it uses :class:`StopScanner`: the same
trie with Aho-Corasick failure links, one step per character (amortised) whatever the patterns'
number or length, in both ``include_stop`` modes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

__all__ = ["PatternTrie", "Scanner", "StopScanner"]


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


class Scanner:
    """Resumable leftmost-longest scan over a stream of text (SEMANTICS §2 and §3).

    ``feed`` consumes text and returns the output for everything that is resolved: literal text
    and, for each match, ``outputs[pattern_index]``. Text from the first *open* position (a
    position whose remaining text is a proper prefix of a pattern) is held until it resolves.

    With ``halt=True`` the scan stops at the first match: :attr:`match` becomes
    ``(start, pattern_index)`` (absolute input positions), the output covers the text before
    the match plus ``outputs[pattern_index]``, and nothing more is consumed.

    Attributes:
        resolved: absolute input position up to which the input is resolved (the start of the
            held text).
        match: ``(start, pattern_index)`` of the first match in ``halt`` mode, else None.
        protect: matches that end at or before this absolute position are ignored (text that
            was already there, such as a prompt).
    """

    __slots__ = (
        "_best",
        "_best_len",
        "_node",
        "halt",
        "held",
        "match",
        "outputs",
        "protect",
        "resolved",
        "trie",
    )

    def __init__(self, trie: PatternTrie, outputs: Sequence[str], *, halt: bool = False,
                 protect: int = 0) -> None:
        if len(outputs) != len(trie.patterns):
            raise ValueError("one output per pattern is required")
        self.trie = trie
        self.outputs = tuple(outputs)
        self.halt = halt
        self.protect = protect
        self.held = ""
        self.resolved = 0
        self.match: tuple[int, int] | None = None
        self._node = 0
        self._best = -1
        self._best_len = 0

    def feed(self, chunk: str, final: bool = False) -> str:
        """Consume ``chunk``; with ``final`` resolve the held text too. Return the new output."""
        if self.match is not None:
            return ""
        held = self.held
        s = held + chunk if held else chunk
        n = len(s)
        if not final and self._node == 0 and not held:
            # Fast path: nothing held and no character of the chunk can start a pattern.
            if self.trie.skip(s, 0) is None:
                self.resolved += n
                return s
        trie = self.trie
        children = trie.children
        terminal = trie.terminal
        leaf = trie.leaf
        skip = trie.skip
        outputs = self.outputs
        base = self.resolved
        protect = self.protect - base  # relative: a match must end after this
        out: list[str] = []
        c = 0
        j = len(held)
        node = self._node
        best = self._best
        best_end = self._best_len
        while True:
            if node == 0:
                m = skip(s, c)
                if m is None:
                    if c < n:
                        out.append(s[c:])
                    c = n
                    j = n
                    break
                k = m.start()
                if k > c:
                    out.append(s[c:k])
                    c = k
                j = c
            # Walk the trie from c; stop at a leaf (nothing longer can match here) or a dead end.
            while j < n:
                nxt = children[node].get(s[j])
                if nxt is None:
                    break
                node = nxt
                j += 1
                t = terminal[node]
                if t >= 0 and j > protect:
                    best = t
                    best_end = j
                    if leaf[node]:
                        break
            else:
                if not final:
                    break  # out of input inside a partial match: hold s[c:]
            # Position c is resolved: the longest pattern completed there, or one literal character.
            if best >= 0:
                out.append(outputs[best])
                if self.halt:
                    self.match = (base + c, best)
                    c = best_end
                    node = 0
                    best = -1
                    break
                c = best_end
            else:
                out.append(s[c])
                c += 1
            node = 0
            best = -1
            j = c
        self.held = s[c:]
        self._node = node
        self._best = best
        self._best_len = best_end - c if best >= 0 else 0
        self.resolved = base + c
        return "".join(out)

    def reset(self) -> None:
        """Forget all state (held text, positions, match)."""
        self.held = ""
        self.resolved = 0
        self.match = None
        self._node = 0
        self._best = -1
        self._best_len = 0
