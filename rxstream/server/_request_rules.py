"""A request's text rules: the ``rxstream`` extension (replace and regex stops) and ``stop``,
checked and compiled within what one request may cost.

:func:`parse_extension` reads ``{"replace": ..., "stop_regex": [...]}``: each regex rule is
checked on its own (shape, length, ``max_hold``) and its automaton nodes counted from its parse
tree alone, so rules too large together are refused (400 naming the rule that crossed
``max_regex_nodes``) before anything is built. :func:`compile_rules` then compiles the request's
rule lists once (a list seen before comes warm from the cache), tries each regex set on sample
text within half the stream's budget (a set that blows up on ordinary text is a 400), and gives
each stream of it the limits' :class:`~rxstream.text.RegexBudget` (SEMANTICS §10).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..text import (
    RegexBudget,
    RegexBudgetError,
    RegexReplaceRules,
    RegexRule,
    RegexStopRules,
    ReplaceRules,
    StopRules,
    automaton_nodes,
    check_replacement,
    probe_budget,
    replace_rules_any,
    rx,
    stop_rules_any,
)
from ._errors import RequestError
from ._limits import ServerLimits

__all__ = ["compile_rules", "parse_extension"]

_PROPERTY = re.compile(r"\\[pP](?:\{|[A-Za-z])")


class _Rules:
    """A request's regex rules as they are read: the automaton nodes they take (``max_regex_nodes``),
    each rule with the field that gave it, and the engine they compile with: ``re``, or the
    ``regex`` module for every rule of a request where one uses a Unicode property class
    (``\\p{L}``: useful to redact), so that one rule set has one engine's semantics."""

    __slots__ = ("engine", "limits", "read", "used")

    def __init__(self, limits: ServerLimits, patterns: Sequence[Any]) -> None:
        self.limits = limits
        self.used = 0
        self.read: list[tuple[str, RegexRule]] = []
        self.engine: Any = re
        if any(isinstance(p, str) and _PROPERTY.search(p) for p in patterns):
            try:
                self.engine = importlib.import_module("regex")
            except ImportError:
                raise RequestError(
                    "rxstream: \\p{...} property classes need the regex package on the server "
                    "(pip install regex)",
                    param="rxstream",
                ) from None

    def rule(self, pattern: str, hold: int, where: str) -> RegexRule:
        """The rule, its nodes counted (400 past the limit). Nothing is built: the request's rule
        set is compiled once, by :func:`compile_rules` (a bad rule is named there)."""
        try:
            compiled: Any = self.engine.compile(pattern)
        except self.engine.error:
            return _checked(pattern, hold, where, self.engine)  # raises, saying why
        limit = self.limits.max_regex_nodes
        try:
            self.used += automaton_nodes([compiled], limit=limit - self.used)
        except ValueError as exc:
            if "pattern too large" not in str(exc):
                return _checked(compiled, hold, where, self.engine)  # an unsupported construct
            raise RequestError(
                f"{where}: the request's regex rules make more than {limit} automaton nodes "
                "together (counted repeats are expanded: {1,250} is 250 copies)",
                param=where,
            ) from None
        rule = RegexRule(compiled, hold)
        self.read.append((where, rule))
        return rule


def _checked(pattern: Any, hold: int, where: str, engine: Any) -> RegexRule:
    """``rx(pattern)``, its own check: a ``ValueError`` becomes a 400 naming ``where``."""
    try:
        return rx(pattern, max_hold=hold)
    except ValueError as exc:
        raise RequestError(f"{where}: {exc}"[:500], param=where) from None


def _regex_patterns(pairs: Sequence[Any], stops: Sequence[Any]) -> list[Any]:
    """The pattern strings of a request's regex rules (whatever their shape; checked later)."""
    found = [p.get("regex") for p in pairs if isinstance(p, Mapping)]
    found += [s.get("regex") if isinstance(s, Mapping) else s for s in stops]
    return found


def _regex_rule(raw: Any, where: str, what: str, rules: _Rules) -> tuple[RegexRule, Any]:
    """One regex rule: ``"pattern"`` or ``{"regex": "pattern", "max_hold": n, ...}``; 400 naming it."""
    limits = rules.limits
    extra: Any = None
    if isinstance(raw, str):
        pattern, hold = raw, limits.max_regex_hold
    elif isinstance(raw, Mapping) and isinstance(raw.get("regex"), str):
        allowed = {"regex", "max_hold", *([] if what == "stop" else ["replacement"])}
        unknown = set(raw) - allowed
        if unknown:
            raise RequestError(f"{where}: unknown fields {sorted(unknown)}", param=where)
        pattern = raw["regex"]
        hold = raw.get("max_hold", limits.max_regex_hold)
        if isinstance(hold, bool) or not isinstance(hold, int) or not 1 <= hold <= limits.max_regex_hold:
            raise RequestError(
                f"{where}: max_hold must be an integer from 1 to {limits.max_regex_hold}, got {hold!r}"[:300],
                param=where,
            )
        if what != "stop":
            extra = raw.get("replacement")
            if not isinstance(extra, str):
                raise RequestError(f"{where}: 'replacement' must be a string", param=where)
            if len(extra) > limits.max_replace_chars:
                raise RequestError(
                    f"{where}: replacements are limited to {limits.max_replace_chars} characters", param=where
                )
    else:
        form = '"pattern" or {"regex": "pattern"}' if what == "stop" else '{"regex": ..., "replacement": ...}'
        raise RequestError(f"{where}: a regex rule must be {form}, got {raw!r}"[:300], param=where)
    if not pattern:
        raise RequestError(f"{where}: the regex must be a non-empty string", param=where)
    if len(pattern) > limits.max_regex_chars:
        raise RequestError(f"{where}: a regex is limited to {limits.max_regex_chars} characters", param=where)
    rule = rules.rule(pattern, hold, where)
    if extra is not None:
        try:
            check_replacement(rule, extra)  # the template (\1, \g<name>)
        except ValueError as exc:
            raise RequestError(f"{where}: {exc}"[:500], param=where) from None
    return rule, extra


def parse_extension(
    body: Mapping[str, Any], limits: ServerLimits
) -> tuple[list[tuple[str | RegexRule, str]], list[RegexRule], list[tuple[str, RegexRule]]]:
    """The ``rxstream`` extension field: replace rules (literal pairs and regex objects), regex
    stops, and each regex rule with the field that gave it (to name a rule that fails to compile).

    ``{"replace": {"old": "new"} | [[old, new] | {"regex": ..., "replacement": ...}, ...],
    "stop_regex": ["pattern" | {"regex": ..., "max_hold": n}, ...]}``.
    """
    ext = body.get("rxstream")
    if ext is None:
        return [], [], []
    if not isinstance(ext, Mapping):
        raise RequestError(
            '\'rxstream\' must be an object like {"replace": {"old": "new"}}', param="rxstream"
        )
    unknown = set(ext) - {"replace", "stop_regex"}
    if unknown:
        raise RequestError(f"unknown 'rxstream' fields: {sorted(unknown)}", param="rxstream")
    raw_rules = ext.get("replace")
    pairs: list[Any]
    if isinstance(raw_rules, Mapping):
        pairs = list(raw_rules.items())
    elif isinstance(raw_rules, list):
        pairs = raw_rules
    elif raw_rules is None:
        pairs = []
    else:
        raise RequestError(
            "'rxstream.replace' must be an object or a list of [old, new] pairs", param="rxstream.replace"
        )
    if len(pairs) > limits.max_replace_rules:
        raise RequestError(
            f"at most {limits.max_replace_rules} replace rules are allowed", param="rxstream.replace"
        )
    raw_stops = ext.get("stop_regex")
    if raw_stops is None:
        raw_stops = []
    elif not isinstance(raw_stops, list):
        raise RequestError("'rxstream.stop_regex' must be a list of regexes", param="rxstream.stop_regex")
    regex_count = len(raw_stops) + sum(isinstance(p, Mapping) for p in pairs)
    if regex_count > limits.max_regex_rules:
        raise RequestError(
            f"at most {limits.max_regex_rules} regex rules are allowed (stop_regex and replace), "
            f"got {regex_count}",
            param="rxstream",
        )
    rules: list[tuple[str | RegexRule, str]] = []
    read = _Rules(limits, _regex_patterns(pairs, raw_stops))
    for index, pair in enumerate(pairs):
        if isinstance(pair, Mapping):
            rule, replacement = _regex_rule(pair, f"rxstream.replace[{index}]", "replace", read)
            rules.append((rule, replacement))
            continue
        if not (isinstance(pair, list | tuple) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            raise RequestError(
                f"a replace rule must be [old, new] strings or a regex object, got {pair!r}"[:300],
                param="rxstream.replace",
            )
        old, new = pair
        if not old:
            raise RequestError("a replace pattern must be a non-empty string", param="rxstream.replace")
        if len(old) > limits.max_replace_chars or len(new) > limits.max_replace_chars:
            raise RequestError(
                f"replace patterns and replacements are limited to {limits.max_replace_chars} characters",
                param="rxstream.replace",
            )
        rules.append((old, new))
    stops = [_regex_rule(r, f"rxstream.stop_regex[{i}]", "stop", read)[0] for i, r in enumerate(raw_stops)]
    return rules, stops, read.read


def compile_rules(
    stops: tuple[str, ...],
    replace: list[tuple[str | RegexRule, str]],
    regex_stops: list[RegexRule],
    limits: ServerLimits,
    read: Sequence[tuple[str, RegexRule]] = (),
) -> tuple[StopRules | RegexStopRules, ReplaceRules | RegexReplaceRules]:
    """Compile the request's rules (a failure names the rule: 400). A rule set seen before comes
    from the cache, warm; a set that blows up on sample text is refused; each stream of it may
    build at most the limits' DFA states and CPU time."""
    budget = RegexBudget(limits.max_regex_states, limits.max_regex_seconds)
    try:
        compiled = (
            stop_rules_any([*stops, *regex_stops], owner="stop", budget=budget),
            replace_rules_any(replace, owner="rxstream.replace", budget=budget),
        )
    except ValueError as exc:
        for where, rule in read:  # the first rule that fails on its own is the one to name
            _checked(rule.pattern, rule.max_hold, where, None)
        raise RequestError(str(exc)[:500], param="rxstream") from None
    # on the sample (a few hundred characters) ordinary sets need a few dozen states and a few
    # ms: half the stream's budget
    trial = RegexBudget(max(limits.max_regex_states // 4, 1), limits.max_regex_seconds / 2)
    for rules in compiled:
        if isinstance(rules, RegexStopRules | RegexReplaceRules):
            try:
                probe_budget(rules.regex, trial)
            except RegexBudgetError as exc:
                raise RequestError(
                    f"the request's rules on a sample text: {exc}"[:500],
                    param="rxstream",
                    code="rules_too_costly",
                ) from None
    return compiled
