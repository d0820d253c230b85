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
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

__all__ = ["PatternTrie", "Scanner"]


class PatternTrie:
    """A trie over non-empty, distinct patterns; node 0 is the root.

    Attributes:
        patterns: the patterns, in the order given (their index is the match id).
        children: per node, the outgoing edges ``{char: node}``.
        terminal: per node, the index of the pattern that ends there, or -1.
        leaf: per node, True when no pattern continues past it.
        max_len: the length of the longest pattern.
    """

    __slots__ = ("children", "leaf", "max_len", "patterns", "skip", "terminal")

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

    def is_open(self, text: str) -> bool:
        """True when ``text`` is a non-empty proper prefix of some pattern."""
        node = 0
        for ch in text:
            nxt = self.children[node].get(ch)
            if nxt is None:
                return False
            node = nxt
        return bool(text) and not self.leaf[node]


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
