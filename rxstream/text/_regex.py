"""Streaming leftmost-longest matching of regular expressions (the engine behind regex rules).

The literal scanners of :mod:`rxstream._automaton` hold back exactly the text that could still
become a pattern; this module keeps that promise for regular expressions.

**Semantics (batch).** Rules are regular expressions. Scan the text left to right; at each
position take the *longest* non-empty match of any rule (the first rule on a tie in length), jump
past it; with no match there, move one character on (POSIX leftmost-longest, non-overlapping;
:func:`find_all_leftmost_longest` is the brute-force reference). So ``ab|abcd`` on ``abcd``
matches ``abcd`` where Python's ``re`` (first alternative wins) gives ``ab``, and lazy
quantifiers (``*?``, ``+?``, ``??``, ``{m,n}?``) mean the same as greedy ones. A rule may match at
most ``max_hold`` characters (see below). Rules that can match the empty string are rejected.

**Per-rule modes.** ``shortest=True``: the rule's match at a position is its *shortest* non-empty
one (leftmost, then shortest -- what lazy quantifiers mean to a backtracking engine when the
match must end at the first place it can, ``<b>.*?</b>`` up to the *first* ``</b>``); across rules
the longest of the rules' matches at the leftmost position still wins (the first rule on a tie).
The run of a shortest rule is decided the moment it matches, so nothing is held for it after
that. ``allow_empty=True``: the rule may match the empty string, but empty matches are never
reported -- the rule stands for its non-empty matches (``(?:^|<think>)`` matches ``<think>``
anywhere; ``^<think>`` only at the start of the stream). A rule that matches *only* the empty
string is rejected. :attr:`RegexRules.empty` says where a rule's empty match would be (the start
and/or end of the stream, or elsewhere), for callers that give it a meaning of their own.

**Streaming.** :class:`RegexScanner` is fed chunks and reports each match the moment no
continuation of the stream (including its end) could change it, and how many characters are
*released*: every character before that point is decided (plain text, or inside a reported
match). Text is held from the earliest start position whose run is still *alive* -- could still
match, or extend its match -- and from nowhere else, so the hold-back is minimal. ``regex``'s
``partial=True`` cannot give this: ``regex.compile("abcd|ab").match("abc", partial=True)`` returns
a complete ``ab`` although one more ``d`` changes the answer.

**Engine.** Patterns are parsed by Python's own parser (``re._parser``), turned into a Thompson
NFA over character classes (:mod:`rxstream.text._regex_syntax`, :mod:`rxstream.text._regex_alphabet`), and
run through a DFA built lazily, with a bounded state cache, and an exact liveness test
(:mod:`rxstream.text._regex_dfa`). One combined DFA serves all rules; a *run* is the DFA walk from one
start position, and each character advances each live run one step (a dictionary lookup once the
transition is cached). Runs that are in the same state and have no match yet have the same
future, so a later one only *follows* the earliest: they are stepped as one (``[^<]*<a>`` starts
a run at every character of plain text, and costs one step per character, not one per run) and
part only where a hold limit or a match decided elsewhere treats them differently. Outside any
run a compiled character-class search jumps to the next character that can start a match, at C
speed.

**Why not interegular** (the MIT-licensed regex-to-FSM library outlines used): its own parser
re-implements Python's syntax only in part (no ``\\b``, ``^``, ``$``, ASCII flag; look-arounds
"not correctly handled" by its own README), it builds the whole DFA eagerly (6 s and 8193 states
for ``(a|b)*a(a|b){12}``, measured with 0.3.3), and its last release is from January 2024.
Parsing with the standard library keeps the accepted syntax exactly Python's at no cost in
dependencies, and a lazy DFA bounds construction for every pattern.

**Supported:** literals, classes (ranges, negation, ``\\d \\w \\s`` and their negations, any
Unicode), ``.``, alternation, groups (capturing, named, non-capturing), ``* + ? {m,n}`` and their
lazy forms, the flags IGNORECASE, DOTALL, MULTILINE, VERBOSE, ASCII (global or scoped), and the
zero-width ``\\A``, ``^`` (start of the stream; with MULTILINE also after ``"\\n"``), ``\\Z``
(end of the stream, known only at :meth:`RegexScanner.flush`), ``$`` with MULTILINE (before
``"\\n"`` or at the end), ``\\b``, ``\\B`` -- each decided from the previous and the next
character, exactly as ``re`` (or ``regex``) decides it. **Rejected** with ``ValueError`` naming
the construct: back-references, look-ahead and look-behind, conditionals, atomic groups,
possessive quantifiers, ``$`` without MULTILINE (it also matches before a final newline: two
characters of look-ahead), LOCALE, bytes patterns, and rules that match the empty string (unless
``allow_empty``).

**Hold limit.** A run of an unbounded pattern (``.*``, ``[^\\n]+``) stays alive as long as the
text fits it; every live run costs one step per character. ``max_hold`` (per rule, default
:data:`DEFAULT_MAX_HOLD` = 256) caps a rule's match length, hence the characters held for it and
the live runs per character: work is at most ``(max_hold + 1)`` steps per character (linear in
the text, whatever the pattern -- ``(a+)+``, ``(a|a)*b``, ``(.*a){20}`` included). 256 covers stop
markers, role tags, keys and lines with room to spare, and keeps the worst case (every position
a live run) to a few hundred dictionary lookups per character. ``on_hold_limit`` says what
happens when a match could grow past it: ``"release"`` (default) -- matches longer than
``max_hold`` do not exist (the batch semantics above with that cap; the oldest run gives the rule
up and its text is released as soon as nothing else holds it); ``"error"`` -- :class:`HoldLimitError`
is raised from :meth:`RegexScanner.feed` when a rule's run is still alive at ``max_hold + 1``
characters.

**Groups.** The scanner decides spans, not groups. :meth:`RegexRules.rematch` gets the groups
of a reported match by matching the rule's own compiled pattern (``re`` or ``regex``) against the
decided span alone, pinned at both ends, with one character of real context on each side (so
assertions see the true neighbours); where several parses of the span exist, groups are those
the engine's backtracking picks.
"""

from __future__ import annotations

from typing import Any

from ._regex_budget import RegexBudget, RegexBudgetError, stepper
from ._regex_compile import (
    DEFAULT_MAX_HOLD,
    HoldLimitError,
    RegexMatch,
    RegexRules,
    ScanResult,
    automaton_nodes,
    empty_matches,
)
from ._regex_dfa import DEAD, State
from ._regex_rules import find_all_leftmost_longest

__all__ = [
    "DEFAULT_MAX_HOLD",
    "HoldLimitError",
    "RegexMatch",
    "RegexRules",
    "RegexScanner",
    "ScanResult",
    "automaton_nodes",
    "empty_matches",
    "find_all_leftmost_longest",
]


class RegexScanner:
    """Streaming leftmost-longest matcher over a :class:`RegexRules` (see the module docstring).

    Attributes:
        pos: characters fed so far.
        released: characters decided so far (text before it is plain or in a reported match).
        steps: DFA steps taken (for complexity tests: at most ``(max(max_hold) + 1) * pos``).
    """

    def __init__(self, rules: RegexRules, budget: RegexBudget | None = None, *, context: str = "") -> None:
        """``context``: the text just before the stream (its last character is what ``^``, ``\\A``
        and ``\\b`` see before the first character; it is never part of a match)."""
        self.rules = rules
        self.budget = budget
        """What this stream may spend building the automaton (:class:`RegexBudget`); past it
        :meth:`feed` raises :class:`RegexBudgetError`."""
        self._step, self.meter = stepper(rules.dfa, budget)
        self.pos = 0
        self.released = 0
        self.steps = 0
        self._buf = context[-1:]  # the stream from _base on: one character of context, then the held text
        self._base = -len(self._buf)
        # [start, state, best end, best rule, limit, later starts in the same state or None]
        self._runs: list[list[Any]] = []
        self._init: dict[str, State] = {}
        self._resets = rules.dfa.resets
        self._done = False
        self._follow = True  # runs in one state with no match yet are stepped as one (tests turn it off)

    @property
    def held(self) -> str:
        """The text not yet released."""
        return self._buf[self.released - self._base :]

    def feed(self, chunk: str, *, until: int | None = None) -> ScanResult:
        """Consume ``chunk``; return the matches it decided and the released count.

        ``until``: stop reading at the first decided match that ends after that position (a stop
        matcher needs only its first match: reading on would cost the whole chunk again each time
        a router re-feeds the rest in its next state); the scanner is then finished.
        """
        if self._done:
            raise ValueError("the scanner was flushed (or failed)")
        if not self._runs and chunk and self.rules.skip(chunk, 0) is None:
            # nothing open and no character here can start a match: all of it is decided
            self.pos += len(chunk)
            self.released = self.pos
            self._buf = chunk[-1]
            self._base = self.pos - 1
            return ScanResult([], self.pos)
        found: list[RegexMatch] = []
        if chunk:
            try:
                self._scan(chunk, found, until)
            except (HoldLimitError, RegexBudgetError):
                self._done = True  # the state is partly updated: no further use
                raise
        return ScanResult(found, self.released)

    def flush(self) -> ScanResult:
        """End of stream: decide every pending run (``\\Z`` and ``$`` hold here)."""
        found: list[RegexMatch] = []
        if not self._done:
            self._done = True
            dfa = self.rules.dfa
            for run in self._runs:
                if run[1] is not DEAD:
                    rule = dfa.accept_at_end(run[1])
                    if rule >= 0:
                        run[2], run[3] = self.pos, rule
                    run[1] = DEAD
            self._runs = self._decide(self._runs, self._buf, found)
            self.released = self.pos
            self._buf = self._buf[-1:]
            self._base = self.pos - len(self._buf)
        return ScanResult(found, self.released)

    def _scan(self, chunk: str, found: list[RegexMatch], until: int | None = None) -> None:
        dfa = self.rules.dfa
        if dfa.resets != self._resets:
            self._init.clear()
            self._resets = dfa.resets
        step = self._step
        skip = self.rules.skip
        init_after = self._init
        first_limit = self.rules.limits[0][0]
        runs = self._runs
        text = self._buf + chunk
        tb = self._base
        i = len(self._buf)
        n = len(text)
        steps = 0
        follow = self._follow
        while i < n:
            if not runs:
                m = skip(text, i)
                if m is None:
                    break
                i = m.start()
            ch = text[i]
            p = tb + i
            groups: dict[State, list[Any]] = {}
            if runs:
                steps += len(runs)
                keep = []
                split: list[list[Any]] = []
                for run in runs:
                    st = run[1]
                    if st is not DEAD:
                        got = st.trans.get(ch)
                        if got is None:
                            got = step(st, ch)
                        st, acc = got
                        if acc >= 0:
                            run[2] = p
                            run[3] = acc
                        if p >= run[4] and st is not DEAD:
                            limited = self._limit(run, st, p + 1)
                            if run[5] and limited is not st:  # the later starts go on unlimited
                                follower = _follower(run, run[5], st, first_limit)
                                run[5] = None
                                if st.final:
                                    if st.done >= 0:
                                        follower[2] = p + 1
                                        follower[3] = st.done
                                    follower[1] = DEAD
                                if follower[1] is not DEAD or follower[2] >= 0:
                                    split.append(follower)
                            st = limited
                        if st.final:  # nothing more can come of this run
                            if st.done >= 0:
                                run[2] = p + 1
                                run[3] = st.done
                            elif run[2] < 0:
                                continue
                            st = DEAD
                        run[1] = st
                        if follow and run[2] < 0 and st is not DEAD:
                            head = groups.get(st)
                            if head is not None:  # the same future as an earlier run: follow it
                                head[5] = sorted([*(head[5] or ()), run[0], *(run[5] or ())])
                                continue
                            groups[st] = run
                    keep.append(run)
                if split:
                    keep = sorted(keep + split, key=_start)
                runs = keep
            prev = text[i - 1] if i else ""
            init = init_after.get(prev)
            if init is None:
                init = self._initial(prev)
            got = init.trans.get(ch)
            if got is None:
                got = step(init, ch)
            steps += 1
            st = got[0]
            if st is not DEAD:  # a run starts here (it is at most 1 <= max_hold long)
                if not st.final:
                    head = groups.get(st)
                    if head is None:
                        runs.append([p, st, -1, -1, p + first_limit, None])
                    elif head[5] is None:
                        head[5] = [p]
                    else:
                        head[5].append(p)
                elif st.done >= 0:
                    runs.append([p, DEAD, p + 1, st.done, p + first_limit, None])
            i += 1
            if runs and runs[0][1] is DEAD:
                runs = self._decide(runs, text, found)
                if until is not None and found and found[-1].end > until:
                    self._done = True  # the first match the caller needs: read no further
                    n = i
        self._scanned(text, tb, n, runs, steps)

    def _scanned(self, text: str, tb: int, n: int, runs: list[list[Any]], steps: int) -> None:
        """After a scan that read ``text[:n]`` (``text`` starts at ``tb``): the new position, the
        open runs, what is released and the text to keep."""
        self.steps += steps
        self.pos = tb + n
        self._runs = runs
        self.released = runs[0][0] if runs else self.pos
        keep_from = max(self.released - 1 - tb, 0)
        self._buf = text[keep_from:]
        self._base = tb + keep_from

    def _initial(self, prev: str) -> State:
        dfa = self.rules.dfa
        ctx = 0 if not prev else dfa.alphabet.ctx[dfa.alphabet.class_of(prev)]
        st = dfa.initial(ctx)
        if len(self._init) < 4096:
            self._init[prev] = st
        return st

    def _limit(self, run: list[Any], st: State, length_end: int) -> State:
        """Apply the hold limits a run of ``length_end - start`` characters has passed."""
        length = length_end - run[0]
        mask = 0
        nxt = None
        for hold, rules in self.rules.limits:
            if hold < length:
                mask |= rules
            elif nxt is None:
                nxt = hold
        errors = mask & self.rules.hold_errors
        if errors:
            for r in range(len(self.rules.rules)):
                if errors >> r & 1 and self.rules.dfa.alive_for(st, r):
                    raise HoldLimitError(
                        f"rule {r} ({self.rules.rules[r].pattern!r}) could match more than "
                        f"max_hold={self.rules.max_hold[r]} characters"
                    )
        run[4] = (run[0] + nxt) if nxt is not None else 1 << 62
        return self.rules.dfa.without_rules(st, mask)

    def _decide(self, runs: list[list[Any]], text: str, found: list[RegexMatch]) -> list[list[Any]]:
        """Report the matches of the dead runs at the front; drop the runs they cover."""
        tb = self._base
        first_limit = self.rules.limits[0][0]
        while runs and runs[0][1] is DEAD:
            start, _, end, rule, _, _ = runs[0]
            if end < 0:  # no match (nor for the starts that follow it: the same future)
                runs = runs[1:]
                continue
            before = text[start - tb - 1] if start > 0 else ""
            after = text[end - tb] if end - tb < len(text) else ""
            found.append(RegexMatch(rule, start, end, text[start - tb : end - tb], before, after))
            kept = [r for r in runs if r[0] >= end]
            # a covered run's later starts past the match go on, with its state and its match
            followers = [
                _follower(r, later, r[1], first_limit)
                for r in runs[1:]
                if r[0] < end and r[5]
                for later in [[m for m in r[5] if m >= end]]
                if later
            ]
            runs = sorted(kept + followers, key=_start) if followers else kept
        return runs


def _start(run: list[Any]) -> int:
    return int(run[0])


def _follower(run: list[Any], starts: list[int], state: State, first_limit: int) -> list[Any]:
    """A run for ``starts`` (ascending), which followed ``run`` in ``state``: the first of them leads."""
    return [starts[0], state, run[2], run[3], starts[0] + first_limit, starts[1:] or None]
