"""Compiled rule lists that hold a regular expression: :class:`RegexReplaceRules` and
:class:`RegexStopRules`, and :func:`replace_rules_any` / :func:`stop_rules_any`, which compile a list
into those or into the literal rules."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from ._regex import RegexRules
from ._regex_budget import RegexBudget
from ._regex_rule import RegexRule, _as_rule, _compile, is_regex_rule
from ._rules import ReplaceRules, StopRules, replace_rules, stop_rules

__all__ = [
    "RegexReplaceRules",
    "RegexStopRules",
    "Replacement",
    "check_replacement",
    "replace_rules_any",
    "stop_rules_any",
]

Replacement: TypeAlias = "str | Callable[[Any], str]"


class RegexReplaceRules:
    """Replace rules with at least one regular expression, compiled once (see the module docstring).

    Attributes:
        pairs: ``(rule, replacement)`` pairs: a rule is a literal ``str`` or a :class:`RegexRule`;
            a replacement a ``str`` (for a regular expression a template: ``\\1``, ``\\g<name>``),
            a callable ``match -> str``, or None (the matched text itself).
        regex: the compiled rule set.
        budget: what one stream of these rules may spend building the automaton
            (:class:`~rxstream.text.RegexBudget`; None: no bound).
    """

    __slots__ = ("_kinds", "budget", "pairs", "regex")

    def __init__(
        self,
        pairs: tuple[tuple[str | RegexRule, Replacement | None], ...],
        regex: RegexRules,
        budget: RegexBudget | None = None,
    ) -> None:
        self.pairs = pairs
        self.regex = regex
        self.budget = budget
        kinds: list[int] = []  # 0: the text itself, 1: a fixed string, 2: a template, 3: a callable
        for rule, rep in pairs:
            if rep is None:
                kinds.append(0)
            elif isinstance(rep, str):
                kinds.append(2 if isinstance(rule, RegexRule) and "\\" in rep else 1)
            else:
                kinds.append(3)
        self._kinds = tuple(kinds)

    @property
    def replacements(self) -> tuple[Replacement | None, ...]:
        """The replacement of each rule, in the order of :attr:`pairs`."""
        return tuple(r for _, r in self.pairs)

    def __repr__(self) -> str:
        return f"RegexReplaceRules({list(self.pairs)!r})"


class RegexStopRules:
    """Stop rules with at least one regular expression, compiled once.

    Attributes:
        strings: the rules, literal ``str`` or :class:`RegexRule`, without duplicates, in order.
        regex: the compiled rule set.
        budget: what one stream of these rules may spend building the automaton
            (:class:`~rxstream.text.RegexBudget`; None: no bound).
    """

    __slots__ = ("budget", "regex", "strings")

    def __init__(
        self, strings: tuple[str | RegexRule, ...], regex: RegexRules, budget: RegexBudget | None = None
    ) -> None:
        self.strings = strings
        self.regex = regex
        self.budget = budget

    def echo(self) -> RegexReplaceRules:
        """Rules that replace each match by itself (what ``hold_back`` runs), on the same rule set."""
        return RegexReplaceRules(tuple((s, None) for s in self.strings), self.regex, self.budget)

    def __repr__(self) -> str:
        return f"RegexStopRules({list(self.strings)!r})"


def _check_template(rule: RegexRule, template: str, owner: str) -> None:
    if not isinstance(rule.pattern, re.Pattern):
        return  # regex's templates are checked when used
    check: Any = getattr(re, "_compile_template", None)
    try:
        if check is not None:  # Python >= 3.12
            check(rule.pattern, template)
        else:
            re._compile_repl(template, rule.pattern)  # type: ignore[attr-defined]
    except (re.error, IndexError) as exc:
        raise ValueError(f"{owner}: replacement {template!r} for {rule.source!r}: {exc}") from None


def check_replacement(rule: RegexRule, template: str, *, owner: str = "replacement") -> None:
    """Check a replacement template (``\\1``, ``\\g<name>``) against ``rule``'s groups without
    compiling a rule set (``ValueError`` naming the template and the rule)."""
    _check_template(rule, template, owner)


def replace_rules_any(
    rules: Any, *, owner: str = "replace", budget: RegexBudget | None = None
) -> ReplaceRules | RegexReplaceRules:
    """Compile replace rules: literal ones as :class:`ReplaceRules`; with a regex, :class:`RegexReplaceRules`.

    Rules are a mapping or ``(rule, replacement)`` pairs; a rule is a non-empty ``str`` or a
    regular expression (:func:`rx`, ``re.Pattern``, ``regex.Pattern``); a replacement is a ``str``
    or (for any rule) a callable ``match -> str``. A rule given twice keeps its first replacement.
    ``budget`` bounds what each stream of regex rules may spend building their automaton
    (:class:`~rxstream.text.RegexBudget`); the compiled rule set itself is shared by every list
    of the same rules (a cache keyed by their sources).
    """
    if isinstance(rules, RegexReplaceRules):
        return rules if budget is None else RegexReplaceRules(rules.pairs, rules.regex, budget)
    if isinstance(rules, ReplaceRules):
        return rules
    if isinstance(rules, str | bytes) or is_regex_rule(rules):
        return replace_rules(rules, owner=owner)  # raises the usual TypeError
    items: list[Any]
    if isinstance(rules, Mapping):
        items = list(rules.items())
    else:
        try:
            items = list(rules)
        except TypeError:
            return replace_rules(rules, owner=owner)
    if not any(
        isinstance(it, tuple | list) and len(it) == 2 and (is_regex_rule(it[0]) or callable(it[1]))
        for it in items
    ):
        return replace_rules(items, owner=owner)
    seen: dict[Any, Replacement] = {}
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise TypeError(f"{owner}: each rule must be a (pattern, replacement) pair, got {item!r}")
        pattern, rep = item
        if is_regex_rule(pattern):
            pattern = _as_rule(pattern)
        elif not isinstance(pattern, str):
            raise TypeError(
                f"{owner}: a rule must be a str or a regular expression, "
                f"got {type(pattern).__name__}: {pattern!r}"
            )
        elif not pattern:
            raise ValueError(f"{owner}: pattern must be non-empty, got {pattern!r}")
        if not isinstance(rep, str) and not callable(rep):
            raise TypeError(
                f"{owner}: replacement for {pattern!r} must be a str or a callable, "
                f"got {type(rep).__name__}: {rep!r}"
            )
        if isinstance(pattern, RegexRule) and isinstance(rep, str) and "\\" in rep:
            _check_template(pattern, rep, owner)
        seen.setdefault(pattern, rep)
    pairs = tuple(seen.items())
    return RegexReplaceRules(pairs, _compile([p for p, _ in pairs], owner), budget)


def stop_rules_any(
    stops: Any, *, owner: str = "stop", what: str = "stop string", budget: RegexBudget | None = None
) -> StopRules | RegexStopRules:
    """Compile stop rules: literal strings as :class:`StopRules`; with a regex, :class:`RegexStopRules`
    (``budget``: as for :func:`replace_rules_any`)."""
    if isinstance(stops, RegexStopRules):
        return stops if budget is None else RegexStopRules(stops.strings, stops.regex, budget)
    if isinstance(stops, StopRules):
        return stops
    if is_regex_rule(stops):
        stops = [stops]
    if isinstance(stops, str):
        return stop_rules(stops, owner=owner, what=what)
    try:
        items = list(stops)
    except TypeError:
        return stop_rules(stops, owner=owner, what=what)
    if not any(is_regex_rule(s) for s in items):
        return stop_rules(items, owner=owner, what=what)
    out: dict[str | RegexRule, None] = {}
    for s in items:
        if is_regex_rule(s):
            out.setdefault(_as_rule(s))
            continue
        if not isinstance(s, str):
            raise TypeError(
                f"{owner}: {what} must be a str or a regular expression, got {type(s).__name__}: {s!r}"
            )
        if not s:
            raise ValueError(f"{owner}: {what} must be non-empty, got {s!r}")
        out.setdefault(s)
    strings = tuple(out)
    return RegexStopRules(strings, _compile(strings, owner), budget)
