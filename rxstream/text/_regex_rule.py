"""A regular-expression rule (:class:`RegexRule`, made by :func:`rx`), a regex stop
(:class:`RegexStop`), and a rule list compiled once into one :class:`~._regex.RegexRules`."""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ._regex import DEFAULT_MAX_HOLD, RegexRules
from ._regex_cache import cached_rules
from ._regex_dialect import foreign_message, regex_only_construct

__all__ = ["HoldPolicy", "RegexRule", "RegexStop", "is_regex_rule", "rx"]

HoldPolicy: TypeAlias = Literal["release", "error"]


@dataclass(frozen=True)
class RegexRule:
    """A regular-expression rule with its options (build with :func:`rx`).

    Attributes:
        pattern: the compiled ``re.Pattern`` (or ``regex.Pattern``).
        max_hold: the longest match, in characters (the most text held for this rule).
        on_hold_limit: ``"release"`` (a match would be longer than ``max_hold``: the rule gives
            it up and the text is released) or ``"error"`` (the stream fails with
            :class:`~rxstream.text._regex.HoldLimitError`).
        shortest: the rule's match at a position is its shortest non-empty one (decided as soon
            as it matches), not its longest.
        allow_empty: the pattern may match the empty string; empty matches are never reported.
    """

    pattern: Any
    max_hold: int = DEFAULT_MAX_HOLD
    on_hold_limit: HoldPolicy = "release"
    shortest: bool = False
    allow_empty: bool = False

    @property
    def source(self) -> str:
        """The pattern's source text."""
        return str(self.pattern.pattern)

    def __repr__(self) -> str:
        flags = (
            f", flags={int(self.pattern.flags) & ~re.UNICODE}"
            if int(self.pattern.flags) & ~re.UNICODE
            else ""
        )
        extra = "" if self.max_hold == DEFAULT_MAX_HOLD else f", max_hold={self.max_hold}"
        if self.on_hold_limit != "release":
            extra += f", on_hold_limit={self.on_hold_limit!r}"
        if self.shortest:
            extra += ", shortest=True"
        if self.allow_empty:
            extra += ", allow_empty=True"
        return f"rx({self.source!r}{flags}{extra})"


@dataclass(frozen=True)
class RegexStop:
    """What ``Finish.stop`` carries when a regular-expression stop rule matched.

    Attributes:
        rule: the rule's pattern source.
        text: the text it matched (the decided leftmost-longest span).
    """

    rule: str
    text: str


def _is_pattern(obj: object) -> bool:
    if isinstance(obj, re.Pattern):
        return True
    return type(obj).__module__ in ("_regex", "regex", "regex._regex") and hasattr(obj, "flags")


def is_regex_rule(obj: object) -> bool:
    """Whether ``obj`` is a regex rule (:class:`RegexRule`, ``re.Pattern``, ``regex.Pattern``)."""
    return isinstance(obj, RegexRule) or _is_pattern(obj)


def rx(
    pattern: str | Any,
    flags: int = 0,
    *,
    max_hold: int = DEFAULT_MAX_HOLD,
    on_hold_limit: HoldPolicy = "release",
    shortest: bool = False,
    allow_empty: bool = False,
) -> RegexRule:
    r"""A regular-expression rule for ``stop``, ``replace``, ``hold_back`` (and ``redact``).

    >>> rx(r"\n\s*(?:User|Human):")
    rx('\\n\\s*(?:User|Human):')
    >>> rx(r"<b>.*?</b>", shortest=True)  # ends at the first </b>
    rx('<b>.*?</b>', shortest=True)

    Args:
        pattern: a pattern string (compiled with ``re`` and ``flags``), or a compiled
            ``re.Pattern`` / ``regex.Pattern`` (then ``flags`` must be 0).
        max_hold: the longest match in characters, hence the most text held for this rule.
        on_hold_limit: ``"release"`` or ``"error"`` (see :class:`RegexRule`).
        shortest: leftmost, then *shortest* non-empty match for this rule (what a lazy
            ``.*?`` means to ``re``), decided the moment it matches; the default is the longest.
        allow_empty: the pattern may match the empty string (``(?:^|<think>)``); empty matches
            are never reported, so the rule stands for its non-empty matches.

    Raises:
        ValueError: the pattern is invalid, uses a construct the streaming engine does not
            support (back-references, look-arounds, ...; SEMANTICS §7), can match the empty
            string (without ``allow_empty``) or only the empty string, or an option is out of
            range. TypeError: ``pattern`` is of another type.
    """
    if isinstance(pattern, str):
        try:
            compiled: Any = re.compile(pattern, flags)
        except re.error as exc:
            foreign = regex_only_construct(pattern)
            if foreign is not None:
                raise ValueError(f"rx: {foreign_message(pattern, foreign)}") from None
            raise ValueError(f"rx: invalid pattern {pattern!r}: {exc}") from None
    elif _is_pattern(pattern):
        if flags:
            raise ValueError("rx: flags apply to a pattern string; this pattern is compiled already")
        compiled = pattern
    else:
        raise TypeError(
            f"rx: pattern must be a str or a compiled pattern, got {type(pattern).__name__}: {pattern!r}"
        )
    if isinstance(max_hold, bool) or not isinstance(max_hold, int) or max_hold < 1:
        raise ValueError(f"rx: max_hold must be a positive int, got {max_hold!r}")
    if on_hold_limit not in ("release", "error"):
        raise ValueError(f"rx: on_hold_limit must be 'release' or 'error', got {on_hold_limit!r}")
    for name, value in (("shortest", shortest), ("allow_empty", allow_empty)):
        if not isinstance(value, bool):
            raise ValueError(f"rx: {name} must be a bool, got {value!r}")
    rule = RegexRule(compiled, max_hold, on_hold_limit, shortest, allow_empty)
    _check(rule, "rx")
    return rule


def _as_rule(obj: Any) -> RegexRule:
    return obj if isinstance(obj, RegexRule) else RegexRule(obj)


def _check(rule: RegexRule, owner: str) -> None:
    try:
        _cached([rule])
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{owner}: rule {rule.source!r}: {exc}") from None


def _key(rules: Sequence[str | RegexRule]) -> tuple[Any, ...]:
    """What a compiled rule set depends on: each rule's source, flags, engine and options."""
    out: list[Any] = []
    for r in rules:
        if isinstance(r, str):
            out.append(r)
        else:
            p = r.pattern
            out.append(
                (
                    type(p).__module__,
                    p.pattern,
                    int(p.flags),
                    r.max_hold,
                    r.on_hold_limit,
                    r.shortest,
                    r.allow_empty,
                )
            )
    return tuple(out)


def _compile(rules: Sequence[str | RegexRule], owner: str) -> RegexRules:
    """One :class:`RegexRules` over literal strings (escaped) and regular-expression rules,
    compiled once per distinct rule list and kept (:mod:`._regex_cache`)."""
    try:
        return _cached(rules)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{owner}: {_name_rule(exc, rules)}") from None


def _cached(rules: Sequence[str | RegexRule]) -> RegexRules:
    try:
        key = _key(rules)
        hash(key)
    except TypeError:  # a pattern object that cannot be a key: compiled each time
        return _build(rules)
    return cached_rules(key, lambda: _build(rules))


def _build(rules: Sequence[str | RegexRule]) -> RegexRules:
    engine: Any = re
    if any(isinstance(r, RegexRule) and not isinstance(r.pattern, re.Pattern) for r in rules):
        engine = importlib.import_module("regex")
    patterns: list[Any] = []
    holds: list[int] = []
    policies: list[HoldPolicy] = []
    shortest: list[bool] = []
    empty: list[bool] = []
    for r in rules:
        if isinstance(r, str):
            patterns.append(engine.compile(engine.escape(r)))
            holds.append(len(r))
            policies.append("release")
            shortest.append(False)
            empty.append(False)
        else:
            patterns.append(r.pattern)
            holds.append(r.max_hold)
            policies.append(r.on_hold_limit)
            shortest.append(r.shortest)
            empty.append(r.allow_empty)
    return RegexRules(patterns, max_hold=holds, on_hold_limit=policies, shortest=shortest, allow_empty=empty)


def _name_rule(exc: Exception, rules: Sequence[str | RegexRule]) -> str:
    text = str(exc)
    m = re.match(r"rule (\d+)", text)
    if m is not None and int(m.group(1)) < len(rules):
        r = rules[int(m.group(1))]
        return f"rule {r if isinstance(r, str) else r.source!r}: {text}"
    return text
