"""Regular-expression rules beside literal ones, for replace, hold_back and stop (SEMANTICS §7).

A rule list may mix literal strings with regular expressions: a compiled ``re.Pattern`` or
``regex.Pattern`` as it is, or :func:`rx` (a pattern with options: ``max_hold``,
``on_hold_limit``, ``shortest``, ``allow_empty``). As soon as one rule of a list is a regular
expression, the whole list runs on one :class:`~rxstream.text._regex.RegexScanner`, the literal
strings as escaped patterns, so one leftmost-longest order holds across all rules (leftmost, then
longest, then the first rule in the list). A list of literal strings alone keeps the literal
engine (:mod:`._scanners`).

- :func:`replace_rules_any` / :func:`stop_rules_any` compile a rule list into the literal
  :class:`~._rules.ReplaceRules` / :class:`~._rules.StopRules`, or into
  :class:`RegexReplaceRules` / :class:`RegexStopRules` when a regular expression is present.
- :class:`RegexReplacer` and :class:`RegexStopMatcher` are the streaming engines over those, with
  the interface of :class:`~rxstream.Replacer` and :class:`~rxstream.StopMatcher`.
- A stop by a regular expression is reported as a :class:`RegexStop` (the rule and the text it
  matched); a stop by a literal string as the string.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ._regex import DEFAULT_MAX_HOLD, RegexMatch, RegexRules, RegexScanner
from ._regex_budget import RegexBudget
from ._regex_cache import cached_rules
from ._regex_dialect import foreign_message, regex_only_construct
from ._replacer import Replacer
from ._rules import ReplaceRules, StopRules, replace_rules, stop_rules
from ._stop_matcher import StopMatcher

__all__ = [
    "RegexReplaceRules",
    "RegexReplacer",
    "RegexRule",
    "RegexStop",
    "RegexStopMatcher",
    "RegexStopRules",
    "check_replacement",
    "is_regex_rule",
    "make_replacer",
    "make_stop_matcher",
    "replace_rules_any",
    "rx",
    "stop_rules_any",
]

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


class RegexReplacer:
    """Streaming leftmost-longest replacement over :class:`RegexReplaceRules` (the interface of
    :class:`~rxstream.Replacer`).

    Args:
        rules: the compiled rules.
        replacements: per-stream replacements (one per rule) instead of the rules' own.
    """

    __slots__ = ("_kinds", "_off", "_pending", "_reps", "_scanner", "rules")

    def __init__(
        self, rules: RegexReplaceRules, *, replacements: Sequence[Replacement | None] | None = None
    ) -> None:
        self.rules = rules
        self._reps = tuple(rules.replacements if replacements is None else replacements)
        if len(self._reps) != len(rules.pairs):
            raise ValueError("one replacement per rule is required")
        self._kinds = (
            rules._kinds
            if replacements is None
            else RegexReplaceRules(
                tuple(zip((p for p, _ in rules.pairs), self._reps, strict=True)), rules.regex
            )._kinds
        )
        self._scanner = RegexScanner(rules.regex, rules.budget)
        self._pending = ""  # input from position _off (everything before it is output)
        self._off = 0

    @property
    def held(self) -> str:
        """The input text held back because it could still become (part of) a match."""
        return self._pending

    @property
    def resolved(self) -> int:
        """How many input characters are resolved."""
        return self._off

    def feed(self, text: str) -> str:
        """Consume ``text``; return the output that can no longer change."""
        if not text:
            return ""
        res = self._scanner.feed(text)
        if not res.matches and not self._pending and res.released == self._scanner.pos:
            self._off = res.released
            return text
        self._pending += text
        return self._emit(res.matches, res.released)

    def flush(self) -> str:
        """Resolve the held text as at the end of the input, return it, and reset."""
        res = self._scanner.flush()
        out = self._emit(res.matches, res.released)
        self._scanner = RegexScanner(self.rules.regex, self.rules.budget)
        self._pending = ""
        self._off = 0
        return out

    def _emit(self, matches: list[RegexMatch], released: int) -> str:
        off = self._off
        pending = self._pending
        pos = off
        out: list[str] = []
        for m in matches:
            if m.start > pos:
                out.append(pending[pos - off : m.start - off])
            out.append(self._replace(m))
            pos = m.end
        if released > pos:
            out.append(pending[pos - off : released - off])
            pos = released
        self._pending = pending[pos - off :]
        self._off = pos
        return "".join(out)

    def _replace(self, m: RegexMatch) -> str:
        kind = self._kinds[m.rule]
        if kind == 0:
            return m.text
        rep = self._reps[m.rule]
        if kind == 1:
            return rep  # type: ignore[return-value]
        match = self.rules.regex.rematch(m)
        if match is None:  # pragma: no cover - the engines agree on every supported construct
            raise RuntimeError(f"rule {m.rule}: the pattern does not re-match its decided span {m.text!r}")
        if kind == 2:
            return str(match.expand(rep))
        value = rep(match)  # type: ignore[operator,misc]
        if not isinstance(value, str):
            raise TypeError(
                f"replacement for {self.rules.pairs[m.rule][0]!r} returned "
                f"{type(value).__name__}, expected str"
            )
        return value


class RegexStopMatcher:
    """Stop rules with regular expressions over a stream of text (the interface of
    :class:`~rxstream.StopMatcher`; the stop is the first match: leftmost, then longest -- a
    rule with ``shortest=True`` offering its shortest match there).

    With ``include_stop``, text is held from the start of a possible stop until it is decided.
    A match lying wholly inside ``prompt`` (or the first chunk, with ``skip_initial``) does not
    fire.
    """

    __slots__ = (
        "_first_pending",
        "_match",
        "_off",
        "_pending",
        "_prompt_len",
        "_protect",
        "_scanner",
        "include_stop",
        "rules",
        "stops",
    )

    def __init__(
        self,
        stops: RegexStopRules,
        include_stop: bool = False,
        *,
        prompt: str = "",
        skip_initial: bool = False,
        owner: str = "stop",
    ) -> None:
        if not isinstance(prompt, str):
            raise TypeError(f"{owner}: prompt must be a str, got {type(prompt).__name__}: {prompt!r}")
        self.rules = stops
        self.stops = stops.strings
        self.include_stop = bool(include_stop)
        self._scanner = RegexScanner(stops.regex, stops.budget)
        self._prompt_len = len(prompt)
        self._protect = len(prompt)
        self._match: RegexMatch | None = None
        self._pending = ""
        self._off = len(prompt)
        self._first_pending = bool(skip_initial)
        if prompt:
            self._check(self._scanner.feed(prompt).matches)

    @property
    def stopped(self) -> bool:
        """True once a stop has been decided."""
        return self._match is not None

    @property
    def stop_string(self) -> str | RegexStop | None:
        """The literal stop string that matched, a :class:`RegexStop`, or None."""
        m = self._match
        if m is None:
            return None
        rule = self.stops[m.rule]
        return rule if isinstance(rule, str) else RegexStop(rule.source, m.text)

    @property
    def stop_position(self) -> int | None:
        """Where the stop starts, in characters of the stream (negative inside the prompt)."""
        m = self._match
        return None if m is None else m.start - self._prompt_len

    @property
    def emitted(self) -> int:
        """How many characters of the stream have been output."""
        return self._off - self._prompt_len

    @property
    def held(self) -> str:
        """Stream text received but not output (yet)."""
        return self._pending

    @property
    def holding(self) -> bool:
        """True when some stream text is held."""
        return bool(self._pending)

    def _check(self, matches: list[RegexMatch]) -> None:
        for m in matches:
            if m.end > self._protect:
                self._match = m
                return

    def feed(self, text: str) -> str:
        """Consume ``text``; return what may be shown now ("" once stopped)."""
        if self._match is not None or not text:
            return ""
        sc = self._scanner
        if self._first_pending:
            self._first_pending = False
            self._protect = sc.pos + len(text)
        res = sc.feed(text)
        if res.matches:
            self._check(res.matches)
        elif not self._pending and res.released == sc.pos:
            self._off = sc.pos
            return text
        self._pending += text
        return self._emit(res.released)

    def flush(self) -> str:
        """Resolve the end of the input and return the rest of the output."""
        if self._match is not None:
            return ""
        res = self._scanner.flush()
        self._check(res.matches)
        return self._emit(res.released)

    def _emit(self, released: int) -> str:
        m = self._match
        end = released if m is None else (m.end if self.include_stop else m.start)
        lo = self._off
        if end <= lo:
            if m is not None:
                self._pending = ""
            return ""
        out = self._pending[: end - lo]
        self._pending = "" if m is not None else self._pending[end - lo :]
        self._off = end
        return out


def make_replacer(rules: ReplaceRules | RegexReplaceRules) -> Replacer | RegexReplacer:
    """A :class:`~rxstream.Replacer` or a :class:`RegexReplacer` for compiled rules."""
    if isinstance(rules, RegexReplaceRules):
        return RegexReplacer(rules)
    return Replacer(rules)


def make_stop_matcher(
    rules: StopRules | RegexStopRules,
    include_stop: bool = False,
    *,
    prompt: str = "",
    skip_initial: bool = False,
    owner: str = "stop",
) -> StopMatcher | RegexStopMatcher:
    """A :class:`~rxstream.StopMatcher` or a :class:`RegexStopMatcher` for compiled rules."""
    if isinstance(rules, RegexStopRules):
        return RegexStopMatcher(rules, include_stop, prompt=prompt, skip_initial=skip_initial, owner=owner)
    return StopMatcher(rules, include_stop, prompt=prompt, skip_initial=skip_initial, owner=owner)
