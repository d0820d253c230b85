"""Replace rules and stop strings: validated once, compiled once (shared by operators, engines and
the compat layer).

:func:`replace_rules` and :func:`stop_rules` check what a user gave and compile it into
:class:`ReplaceRules` / :class:`StopRules`: the normalized patterns and the automaton over them.
Both are immutable and can be shared by any number of streams (each :class:`~rxstream.Replacer` or
:class:`~rxstream.StopMatcher` built from them keeps its own scanner state); engines and operators
accept them where they accept raw rules, and then check nothing again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ._trie import PatternTrie

__all__ = [
    "ReplaceRules",
    "Rules",
    "StopRules",
    "normalize_rules",
    "normalize_stops",
    "replace_rules",
    "stop_rules",
]

Rules = Mapping[str, str] | Iterable[tuple[str, str]]
"""Replace rules: a mapping ``{pattern: replacement}`` or ``(pattern, replacement)`` pairs."""


def normalize_rules(rules: Rules, *, owner: str = "replace") -> tuple[tuple[str, str], ...]:
    """Check rules and return them as pairs; a pattern given twice keeps its first rule.

    Raises:
        TypeError: ``rules`` is not a mapping or iterable of pairs, or an item is not a ``str``.
        ValueError: a pattern is empty.
    """
    if isinstance(rules, str | bytes):
        raise TypeError(f"{owner}: rules must be a mapping or (pattern, replacement) pairs, got {rules!r}")
    items: Iterable[object]
    if isinstance(rules, Mapping):
        items = rules.items()
    else:
        try:
            items = list(rules)
        except TypeError:
            raise TypeError(
                f"{owner}: rules must be a mapping or (pattern, replacement) pairs, got {rules!r}"
            ) from None
    seen: dict[str, str] = {}
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise TypeError(f"{owner}: each rule must be a (pattern, replacement) pair, got {item!r}")
        pattern, replacement = item
        if not isinstance(pattern, str):
            raise TypeError(f"{owner}: pattern must be a str, got {type(pattern).__name__}: {pattern!r}")
        if not pattern:
            raise ValueError(f"{owner}: pattern must be non-empty, got {pattern!r}")
        if not isinstance(replacement, str):
            raise TypeError(
                f"{owner}: replacement for {pattern!r} must be a str, "
                f"got {type(replacement).__name__}: {replacement!r}"
            )
        seen.setdefault(pattern, replacement)
    return tuple(seen.items())


def normalize_stops(
    stops: str | Iterable[str], *, owner: str = "stop", what: str = "stop string"
) -> tuple[str, ...]:
    """Check stop strings (one ``str`` or several) and return them without duplicates.

    Raises:
        TypeError: a stop string is not a ``str``.
        ValueError: a stop string is empty.
    """
    if isinstance(stops, str):
        stops = (stops,)
    try:
        items = list(stops)
    except TypeError:
        raise TypeError(f"{owner}: {what}s must be a str or an iterable of str, got {stops!r}") from None
    out: dict[str, None] = {}
    for s in items:
        if not isinstance(s, str):
            raise TypeError(f"{owner}: {what} must be a str, got {type(s).__name__}: {s!r}")
        if not s:
            raise ValueError(f"{owner}: {what} must be non-empty, got {s!r}")
        out.setdefault(s)
    return tuple(out)


class ReplaceRules:
    """Normalized replace rules and their automaton (build with :func:`replace_rules`).

    Attributes:
        pairs: ``(pattern, replacement)`` pairs, a pattern given twice keeping its first rule.
        trie: the automaton over the patterns (read-only, links built).
    """

    __slots__ = ("pairs", "trie")

    def __init__(self, pairs: tuple[tuple[str, str], ...], trie: PatternTrie) -> None:
        self.pairs = pairs
        self.trie = trie
        trie.links()  # built now, so that streams sharing the trie never build it concurrently

    @property
    def replacements(self) -> tuple[str, ...]:
        """The replacement of each pattern, in the order of :attr:`pairs`."""
        return tuple(r for _, r in self.pairs)

    def __repr__(self) -> str:
        return f"ReplaceRules({dict(self.pairs)!r})"


class StopRules:
    """Normalized stop strings (or patterns) and their automaton (build with :func:`stop_rules`).

    Attributes:
        strings: the strings, without duplicates, in the order first given.
        trie: the automaton over them (read-only, links built).
    """

    __slots__ = ("strings", "trie")

    def __init__(self, strings: tuple[str, ...], trie: PatternTrie) -> None:
        self.strings = strings
        self.trie = trie
        trie.links()

    def echo(self) -> ReplaceRules:
        """Rules that replace each string by itself (what ``hold_back`` runs), on the same trie."""
        return ReplaceRules(tuple((s, s) for s in self.strings), self.trie)

    def __repr__(self) -> str:
        return f"StopRules({self.strings!r})"


def replace_rules(rules: Rules | ReplaceRules, *, owner: str = "replace") -> ReplaceRules:
    """Check ``rules`` (see :func:`normalize_rules`) and compile them; compiled rules pass as they are."""
    if isinstance(rules, ReplaceRules):
        return rules
    pairs = normalize_rules(rules, owner=owner)
    return ReplaceRules(pairs, PatternTrie([p for p, _ in pairs]))


def stop_rules(
    stops: str | Iterable[str] | StopRules, *, owner: str = "stop", what: str = "stop string"
) -> StopRules:
    """Check stop strings (see :func:`normalize_stops`) and compile them; compiled ones pass as they are."""
    if isinstance(stops, StopRules):
        return stops
    strings = normalize_stops(stops, owner=owner, what=what)
    return StopRules(strings, PatternTrie(strings))
