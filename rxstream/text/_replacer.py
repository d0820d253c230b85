"""``Replacer``: streaming find/replace of many patterns at once, outside Rx (SEMANTICS §2)."""

from __future__ import annotations

from ._rules import ReplaceRules, Rules, replace_rules
from ._scanners import ReplaceScanner

__all__ = ["Replacer", "replace_text"]


class Replacer:
    """Streaming leftmost-longest replacement with earliest emission.

    >>> r = Replacer({"<NL>": "\\n"})
    >>> [r.feed(c) for c in ["Hi!<", "N", "L>x"]] + [r.flush()]
    ['Hi!', '', '\\nx', '']

    ``feed`` returns the output that is final; ``flush`` resolves what is still held (at the end
    of the input) and resets the replacer for reuse. ``rules`` may be compiled once with
    :func:`rxstream.text.replace_rules` and shared by many replacers (nothing is checked again).
    """

    __slots__ = ("_scanner", "rules")

    def __init__(self, rules: Rules | ReplaceRules, *, owner: str = "replace") -> None:
        compiled = replace_rules(rules, owner=owner)
        self.rules = compiled.pairs
        """The rules as ``(pattern, replacement)`` pairs (a pattern given twice keeps its first rule)."""
        self._scanner = ReplaceScanner(compiled.trie, compiled.replacements)

    @property
    def held(self) -> str:
        """The input text held back because it could still become a pattern."""
        return self._scanner.held

    @property
    def resolved(self) -> int:
        """How many input characters are resolved (all input minus :attr:`held`)."""
        return self._scanner.resolved

    def feed(self, text: str) -> str:
        """Consume ``text``; return the output that can no longer change."""
        return self._scanner.feed(text)

    def flush(self) -> str:
        """Resolve the held text as at the end of the input, return it, and reset."""
        out = self._scanner.feed("", final=True)
        self._scanner.reset()
        return out


def replace_text(text: str, rules: Rules) -> str:
    """Batch replace (SEMANTICS §2): leftmost-longest, non-overlapping, one pass.

    >>> replace_text("a<b>c", {"<b>": "B", "<": "&lt;"})
    'aBc'
    """
    r = Replacer(rules, owner="replace_text")
    return r.feed(text) + r.flush()
