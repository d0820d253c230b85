"""Rule sets for :mod:`rxstream.text._regex`: accepted pattern types, flags, and the batch reference.

A rule is a pattern string, a ``re.Pattern`` or a ``regex.Pattern`` (the third-party ``regex``
package, used through its ``.pattern`` and ``.flags``; never imported unless such a pattern is
given). One rule set uses one engine's character semantics: ``re``'s for strings and
``re.Pattern`` rules, ``regex``'s for ``regex.Pattern`` rules (their ``\\w``, ``\\b`` and case
folding differ from ``re``'s in places), so the two cannot be mixed.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Rule", "find_all_leftmost_longest", "normalize_rules"]

_parser: Any = importlib.import_module("re._parser")
_compiler: Any = importlib.import_module("re._compiler")

# regex flags that keep the pattern's meaning within what the engine implements: IGNORECASE,
# MULTILINE, DOTALL, VERBOSE, ASCII, UNICODE and VERSION0 (the default).
_REGEX_OK = 2 | 8 | 16 | 64 | 128 | 32 | 0x2000
_REGEX_FLAG_NAMES = {
    1: "TEMPLATE",
    4: "LOCALE",
    0x100: "VERSION1",
    0x200: "DEBUG",
    0x400: "REVERSE",
    0x800: "WORD",
    0x1000: "BESTMATCH",
    0x4000: "FULLCASE",
    0x8000: "ENHANCEMATCH",
    0x10000: "POSIX",
}


@dataclass(frozen=True)
class Rule:
    """One normalised rule: its source, its flags and the engine module (``re`` or ``regex``)."""

    pattern: str
    flags: int
    engine: Any

    def with_suffix(self, suffix: str) -> Any:
        """The rule's pattern followed by ``suffix`` (``(?:pattern)suffix``), compiled.

        With ``re`` the suffix is appended to the parse tree (so inline global flags such as a
        leading ``(?i)`` keep working); ``regex`` accepts inline flags anywhere, so the source is
        simply wrapped. Group numbers and names are those of the rule.
        """
        return _with_suffix(self, suffix)


@functools.lru_cache(maxsize=4096)
def _with_suffix(rule: Rule, suffix: str) -> Any:
    if rule.engine is re:
        tree = _parser.parse(rule.pattern, rule.flags)
        tree.data.extend(_parser.parse(suffix, 0).data)
        return _compiler.compile(tree, rule.flags)
    newline = "\n" if rule.flags & re.VERBOSE else ""
    return rule.engine.compile("(?:" + rule.pattern + newline + ")" + suffix, rule.flags)


def normalize_rules(rules: Sequence[Any]) -> list[Rule]:
    """Check the rule types and flags; see the module docstring. Raises TypeError/ValueError."""
    if isinstance(rules, (str, re.Pattern)):
        raise TypeError("rules must be a sequence of patterns, not a single pattern")
    out: list[Rule] = []
    for index, rule in enumerate(rules):
        if isinstance(rule, str):
            out.append(Rule(rule, 0, re))
        elif isinstance(rule, re.Pattern):
            if not isinstance(rule.pattern, str):
                raise ValueError(f"rule {index}: bytes patterns are not supported")
            out.append(Rule(rule.pattern, rule.flags, re))
        elif type(rule).__module__ in ("_regex", "regex", "regex._regex") and hasattr(rule, "flags"):
            out.append(_regex_rule(index, rule))
        else:
            raise TypeError(f"rule {index} must be a str, re.Pattern or regex.Pattern, got {rule!r}")
        if not out[-1].pattern:
            raise ValueError(f"rule {index}: the pattern is empty")
    if len({r.engine for r in out}) > 1:
        raise ValueError("re and regex patterns cannot be mixed in one rule set (their \\w, \\b differ)")
    return out


def _regex_rule(index: int, rule: Any) -> Rule:
    pattern = rule.pattern
    if not isinstance(pattern, str):
        raise ValueError(f"rule {index}: bytes patterns are not supported")
    flags = int(rule.flags)
    bad = [name for bit, name in _REGEX_FLAG_NAMES.items() if flags & bit and not _REGEX_OK & bit]
    if bad:
        raise ValueError(f"rule {index}: regex flag(s) {', '.join(bad)} not supported")
    return Rule(pattern, flags & (_REGEX_OK & ~0x2000), importlib.import_module("regex"))


def find_all_leftmost_longest(
    rules: Sequence[Any],
    text: str,
    *,
    max_hold: int | Sequence[int] | None = None,
    shortest: bool | Sequence[bool] = False,
) -> list[tuple[int, int, int]]:
    """The batch semantics, by brute force: ``(start, end, rule)`` of every match, in order.

    Scan left to right; at each position take each rule's non-empty match there -- its longest,
    or with ``shortest`` (one bool, or one per rule) its shortest -- and of those the longest
    (the first rule on a tie), jump past it; with no match there, move one character on.
    ``max_hold`` caps the length of a match (one int, or one per rule). Whether rule ``r`` matches exactly
    ``text[i:j]`` in context is asked of the rule's own engine:
    ``(?:pattern)(?<=\\A[\\s\\S]{j})`` matched at ``i`` in the whole text (the look-behind
    pins the end at ``j``; assertions see the real neighbours). O(n^2) matches per rule: for
    tests only.
    """
    normal = normalize_rules(rules)
    holds = [max_hold] * len(normal) if max_hold is None or isinstance(max_hold, int) else list(max_hold)
    shortest_of = [shortest] * len(normal) if isinstance(shortest, bool) else list(shortest)
    n = len(text)
    found: list[tuple[int, int, int]] = []
    ends: dict[tuple[int, int], Any] = {}
    i = 0
    while i < n:
        best: tuple[int, int, int] | None = None
        for r, rule in enumerate(normal):
            hold = holds[r]
            last = n if hold is None else min(n, i + hold)
            for j in range(i + 1, last + 1) if shortest_of[r] else range(last, i, -1):
                if best is not None and j <= best[1] and not shortest_of[r]:
                    break  # no longer than the best so far
                pinned = ends.get((r, j))
                if pinned is None:
                    pinned = ends[(r, j)] = rule.with_suffix(f"(?<=\\A[\\s\\S]{{{j}}})")
                if pinned.match(text, i) is not None:
                    if best is None or j > best[1]:
                        best = (i, j, r)
                    break
        if best is None:
            i += 1
        else:
            found.append(best)
            i = best[1]
    return found
