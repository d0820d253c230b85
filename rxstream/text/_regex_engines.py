"""The streaming engines over regex rule lists: :class:`RegexReplacer` and
:class:`RegexStopMatcher` (the interfaces of :class:`~rxstream.Replacer` and
:class:`~rxstream.StopMatcher`), and the factories that pick an engine for compiled rules."""

from __future__ import annotations

from collections.abc import Sequence

from ._regex import RegexMatch, RegexScanner
from ._regex_rule import RegexStop
from ._regex_rule_sets import RegexReplaceRules, RegexStopRules, Replacement
from ._replacer import Replacer
from ._rules import ReplaceRules, StopRules
from ._stop_matcher import StopMatcher

__all__ = ["RegexReplacer", "RegexStopMatcher", "make_replacer", "make_stop_matcher"]


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
        context: str = "",
    ) -> None:
        if not isinstance(prompt, str):
            raise TypeError(f"{owner}: prompt must be a str, got {type(prompt).__name__}: {prompt!r}")
        self.rules = stops
        self.stops = stops.strings
        self.include_stop = bool(include_stop)
        self._scanner = RegexScanner(stops.regex, stops.budget, context=context)
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
        res = sc.feed(text, until=self._protect)
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
    context: str = "",
) -> StopMatcher | RegexStopMatcher:
    """A :class:`~rxstream.StopMatcher` or a :class:`RegexStopMatcher` for compiled rules
    (``context``: the text before the stream, for a regex's assertions; never matched)."""
    if isinstance(rules, RegexStopRules):
        return RegexStopMatcher(
            rules, include_stop, prompt=prompt, skip_initial=skip_initial, owner=owner, context=context
        )
    return StopMatcher(rules, include_stop, prompt=prompt, skip_initial=skip_initial, owner=owner)
