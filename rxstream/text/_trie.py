"""The pattern trie with Aho-Corasick links that the text scanners run on.

:class:`PatternTrie` holds non-empty, distinct patterns; :meth:`PatternTrie.links` adds the
failure links, the longest match ending at each node and the longest still-open prefix (built once,
in time linear in the size of the trie). The scanners that walk it are in :mod:`._scanners`.

Why our own automaton rather than a library: the maintained PyPI automata (``pyahocorasick``,
``ahocorasick-rs``) search a *whole* string; neither exposes the state between two calls, so a
pattern split across chunks ("<" "N" "L>") cannot be matched without rescanning, and neither can
say which suffix of the text is still the start of a pattern -- the one fact earliest emission
needs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

__all__ = ["PatternTrie"]


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


def _never(text: str, pos: int = 0) -> None:
    return None


def _class_escape(ch: str) -> str:
    return "\\" + ch if ch in "\\]^-[" else ch
