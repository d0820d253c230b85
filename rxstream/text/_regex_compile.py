"""A rule list compiled for streaming: :class:`RegexRules` (one lazy DFA over every rule, hold
limits, shortest and empty-match choices), the match and scan-result types, and the rule-size
and empty-match queries (see :mod:`._regex` for the semantics)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

from ._regex_alphabet import EDGE, Alphabet, _intervals
from ._regex_dfa import Dfa
from ._regex_rules import Rule, normalize_rules
from ._regex_syntax import A_BOUND_U, ASSERT, CHAR, Nfa, count_nodes, parse_rule

__all__ = [
    "DEFAULT_MAX_HOLD",
    "HoldLimitError",
    "RegexMatch",
    "RegexRules",
    "ScanResult",
    "automaton_nodes",
    "empty_matches",
]

DEFAULT_MAX_HOLD = 256


class HoldLimitError(RuntimeError):
    """A rule's match could grow past its ``max_hold`` (with ``on_hold_limit="error"``)."""


class RegexMatch(NamedTuple):
    """A decided match: ``text`` is the stream's ``[start, end)``, ``rule`` the rule's index.

    ``before`` and ``after`` are the characters just outside the span ("" at the stream's edges),
    kept for :meth:`RegexRules.rematch`.
    """

    rule: int
    start: int
    end: int
    text: str
    before: str
    after: str


class ScanResult(NamedTuple):
    """What a feed decided: new ``matches`` and ``released``, the count of decided characters."""

    matches: list[RegexMatch]
    released: int


class RegexRules:
    """A compiled rule set (see the module docstring); share it between scanners.

    Args:
        rules: pattern strings, ``re.Pattern`` or ``regex.Pattern`` objects.
        max_hold: the longest match per rule (one int for all, or one per rule).
        on_hold_limit: ``"release"`` or ``"error"`` (one for all, or one per rule).
        max_states: the bound on cached DFA states.
        shortest: a rule's match at a position is its shortest non-empty one, decided the moment
            it matches (one bool for all, or one per rule); otherwise its longest.
        allow_empty: the rule may match the empty string; such matches are never reported, so
            the rule stands for its non-empty matches (one bool for all, or one per rule).

    Attributes:
        empty: per rule, where it matches the empty string, as ``(at_start, at_end)`` pairs
            (``at_start``: no character before it; ``at_end``: none after it); empty when it
            never does.
    """

    def __init__(
        self,
        rules: Sequence[Any],
        *,
        max_hold: int | Sequence[int] = DEFAULT_MAX_HOLD,
        on_hold_limit: Literal["release", "error"] | Sequence[Literal["release", "error"]] = "release",
        max_states: int = 10_000,
        shortest: bool | Sequence[bool] = False,
        allow_empty: bool | Sequence[bool] = False,
    ) -> None:
        self.sources: list[Any] = list(rules)
        self.rules: list[Rule] = normalize_rules(rules)
        if not self.rules:
            raise ValueError("at least one rule is required")
        holds = [max_hold] * len(self.rules) if isinstance(max_hold, int) else list(max_hold)
        if len(holds) != len(self.rules) or any(not isinstance(h, int) or h < 1 for h in holds):
            raise ValueError("max_hold must be a positive int, or one per rule")
        shortest_of = _per_rule(shortest, len(self.rules), "shortest")
        empty_ok = _per_rule(allow_empty, len(self.rules), "allow_empty")
        self.shortest: tuple[bool, ...] = shortest_of
        self.allow_empty: tuple[bool, ...] = empty_ok
        policies = (
            [on_hold_limit] * len(self.rules) if isinstance(on_hold_limit, str) else list(on_hold_limit)
        )
        if len(policies) != len(self.rules) or any(p not in ("release", "error") for p in policies):
            raise ValueError(
                f"on_hold_limit must be 'release' or 'error' (or one per rule), got {on_hold_limit!r}"
            )
        self.max_hold: tuple[int, ...] = tuple(holds)
        self.on_hold_limit = on_hold_limit
        self.hold_errors = sum(1 << r for r, p in enumerate(policies) if p == "error")
        """The rules whose hold limit raises :class:`HoldLimitError` (a bit mask)."""
        nfa = Nfa()
        for index, rule in enumerate(self.rules):
            parse_rule(nfa, index, rule.pattern, rule.flags, rule.engine)
        engine = self.rules[0].engine
        words = any(k == ASSERT and nfa.arg[n] >= A_BOUND_U for n, k in enumerate(nfa.kind))
        shortest_mask = sum(1 << r for r, s in enumerate(shortest_of) if s)
        self.dfa = Dfa(nfa, Alphabet(engine, nfa.leaves, words), max_states, shortest_mask)
        self.empty: tuple[frozenset[tuple[bool, bool]], ...] = tuple(
            frozenset((p == EDGE, x == EDGE) for p, x in self.dfa.empty_contexts(start))
            for start in nfa.starts
        )
        for index, start in enumerate(nfa.starts):
            if self.empty[index] and not empty_ok[index]:
                raise ValueError(
                    f"rule {index} ({self.rules[index].pattern!r}) can match the empty string "
                    "(allow_empty=True lets it, reporting only its non-empty matches)"
                )
            if self.empty[index] and not self.dfa.consumes(start):
                raise ValueError(
                    f"rule {index} ({self.rules[index].pattern!r}) matches only the empty string"
                )
        # (length, rules that may not grow past it), by length: applied to a run older than length
        limits: dict[int, int] = {}
        for index, hold in enumerate(holds):
            limits[hold] = limits.get(hold, 0) | 1 << index
        self.limits: list[tuple[int, int]] = sorted(limits.items())
        ranges = sorted({iv for n in self.dfa.first_nodes() for iv in _leaf_ivs(engine, nfa, n)})
        source = "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges)
        self.skip: Callable[[str, int], Any] = engine.compile("[" + source + "]").search if source else _never
        self._pinned: dict[tuple[int, bool], Any] = {}

    def rematch(self, match: RegexMatch) -> Any:
        """The ``re.Match`` (or ``regex.Match``) of ``match``'s rule over exactly its span.

        It is matched in the string ``match.before + match.text + match.after``, so its offsets
        are shifted by ``len(match.before)``; ``.group()``, ``.groups()``, ``.groupdict()`` and
        ``.expand()`` are those of the span. None only if the engine disagrees with the scanner.
        """
        tail = bool(match.after)
        pinned = self._pinned.get((match.rule, tail))
        if pinned is None:
            suffix = "(?=[\\s\\S]\\Z)" if tail else "\\Z"
            pinned = self._pinned[(match.rule, tail)] = self.rules[match.rule].with_suffix(suffix)
        return pinned.match(match.before + match.text + match.after, len(match.before))


def automaton_nodes(rules: Sequence[Any], limit: int | None = None) -> int:
    """How many NFA nodes ``rules`` (pattern strings, ``re.Pattern`` or ``regex.Pattern``) make,
    parsed only (no automaton is built: cheap, and bounded by ``limit``).

    Raises:
        ValueError: a pattern the engine does not support, or more than ``limit`` nodes.
    """
    total = 0
    for rule in normalize_rules(rules):
        total += count_nodes(rule.pattern, rule.flags, rule.engine)
        if limit is not None and total > limit:
            raise ValueError(
                f"pattern too large: more than {limit} automaton nodes "
                "(counted repeats are expanded: {1,250} is 250 copies)"
            )
    return total


def empty_matches(rule: Any) -> frozenset[tuple[bool, bool]]:
    """Where ``rule`` (a pattern string, ``re.Pattern`` or ``regex.Pattern``) matches the empty
    string: ``(at_start, at_end)`` pairs as in :attr:`RegexRules.empty`; raises ValueError for
    what the engine does not support."""
    (normal,) = normalize_rules([rule])
    nfa = Nfa()
    parse_rule(nfa, 0, normal.pattern, normal.flags, normal.engine)
    words = any(k == ASSERT and nfa.arg[n] >= A_BOUND_U for n, k in enumerate(nfa.kind))
    dfa = Dfa(nfa, Alphabet(normal.engine, nfa.leaves, words))
    return frozenset((p == EDGE, x == EDGE) for p, x in dfa.empty_contexts(nfa.starts[0]))


def _per_rule(value: bool | Sequence[bool], count: int, name: str) -> tuple[bool, ...]:
    values: list[Any] = (
        [value] * count if isinstance(value, bool) or not isinstance(value, Sequence) else list(value)
    )
    if len(values) != count or any(not isinstance(v, bool) for v in values):
        raise ValueError(f"{name} must be a bool, or one per rule")
    return tuple(values)


def _leaf_ivs(engine: Any, nfa: Nfa, node: int) -> tuple[tuple[int, int], ...]:
    assert nfa.kind[node] == CHAR
    return _intervals(engine, *nfa.leaves[nfa.arg[node]])


def _never(text: str, pos: int = 0) -> None:
    return None
