"""A lazily built DFA over the NFA of :mod:`rxstream.text._regex_syntax`, with one character of context.

A DFA state is a set of NFA *kernel* nodes (character tests, assertions and finals reached by
plain epsilon moves) plus the context of the previous character. Assertions are left pending in
the kernel and resolved when the next character (or the end of the stream) is known, so a step
on character ``c`` first follows the assertions that hold between the previous character and
``c`` -- which also says whether the run *matched just before* ``c`` -- and then moves over ``c``.
That is exactly one character of look-behind and look-ahead: ``^``, ``$`` (MULTILINE), ``\\A``,
``\\Z``, ``\\b``, ``\\B``.

States are built on demand (subset construction, one transition at a time) and cached, per class
and per character. Past ``max_states`` cached states the whole cache is dropped and rebuilt as
the text needs it (what RE2 does): memory stays bounded, results do not change, and the cost per
character stays bounded by one subset step (at most the NFA's size) -- so a pattern like
``(a|b)*a(a|b){20}`` costs nothing at construction and at most ``max_states`` states at a time.

Every state is checked for *liveness* when it is created: whether some continuation of the text
(including the end of the stream) still leads to a match. That is decided exactly, once per
NFA node and context, by a backward search over (node, previous context, next context) at
construction (linear in the NFA's size). Dead sets become the one :data:`DEAD` state, and a
state that can neither grow its match nor depend on the next character for it is marked
:attr:`State.final` (with the rule it matches, if any), so a run ends the moment nothing more can
come of it -- which is what makes the scanner's hold-back minimal.

**Shortest rules** (``shortest_mask``): once a run has matched such a rule (a non-empty match:
the initial states, before any character, never accept), the rule's character tests are dropped
from the state, so the rule's language loses every string that extends one of its matches -- its
longest match is then the original rule's shortest one, and the run is decided at once. Initial
states are kept apart from the states reached after characters (a flag in the key) for this, and
because an empty match is never reported.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._regex_alphabet import AWORD, CTX_COUNT, EDGE, NL, UWORD, Alphabet
from ._regex_syntax import (
    A_BEGIN_LINE,
    A_BEGIN_TEXT,
    A_BOUND_A,
    A_BOUND_U,
    A_END_LINE,
    A_END_TEXT,
    A_NBOUND_A,
    A_NBOUND_U,
    ASSERT,
    CHAR,
    FINAL,
    SPLIT,
    Nfa,
)

__all__ = ["DEAD", "Dfa", "State"]

#: How many characters one state caches transitions for (its per-class cache is complete).
_CHAR_CACHE = 4096


def _holds(kind: int, prev: int, nxt: int) -> bool:
    """Whether the assertion ``kind`` holds between contexts ``prev`` and ``nxt``."""
    if kind == A_BEGIN_TEXT:
        return prev == EDGE
    if kind == A_BEGIN_LINE:
        return prev in (EDGE, NL)
    if kind == A_END_TEXT:
        return nxt == EDGE
    if kind == A_END_LINE:
        return nxt in (EDGE, NL)
    words = (AWORD,) if kind in (A_BOUND_A, A_NBOUND_A) else (AWORD, UWORD)
    boundary = (prev in words) != (nxt in words)
    if kind in (A_BOUND_U, A_BOUND_A):
        return boundary
    assert kind in (A_NBOUND_U, A_NBOUND_A)
    return not boundary and not (prev == EDGE and nxt == EDGE)  # \B never matches in ""


_HOLDS = [[[_holds(k, p, n) for n in range(CTX_COUNT)] for p in range(CTX_COUNT)] for k in range(8)]


class State:
    """A DFA state: kernel NFA nodes and the previous character's context.

    ``trans`` caches, per character, ``(next state, rule that matched just before it or -1)``.
    """

    __slots__ = ("by_class", "ctx", "done", "final", "initial", "kernel", "pre", "restricted", "trans")

    def __init__(self, kernel: tuple[int, ...], ctx: int, initial: bool = False) -> None:
        self.kernel = kernel
        self.ctx = ctx
        self.initial = initial
        """A run's state before its first character (it accepts nothing: no empty matches)."""
        self.final = True
        """Nothing can change any more: no longer match is possible, and whether the text so far
        matches does not depend on the next character (it is :attr:`done`)."""
        self.done = -1
        """When :attr:`final`: the rule that matches the text so far, or -1."""
        self.trans: dict[str, tuple[State, int]] = {}
        self.by_class: dict[int, tuple[State, int]] = {}
        self.pre: list[tuple[tuple[int, ...], int] | None] = [None] * CTX_COUNT
        self.restricted: dict[int, State] = {}


DEAD = State((), EDGE)
"""The state from which nothing can match any more (final, done = -1)."""


class Dfa:
    """The lazy DFA of an NFA over an alphabet; see the module docstring.

    Attributes:
        resets: how many times the state cache was full and dropped.
        shortest_mask: the rules (a bit per rule) whose runs end at their first match.
    """

    def __init__(
        self, nfa: Nfa, alphabet: Alphabet, max_states: int = 10_000, shortest_mask: int = 0
    ) -> None:
        if max_states < 8:
            raise ValueError("max_states must be at least 8")
        self.nfa = nfa
        self.alphabet = alphabet
        self.max_states = max_states
        self.shortest_mask = shortest_mask
        self.resets = 0
        self._eclose: dict[int, tuple[int, ...]] = {}
        self._table: dict[tuple[tuple[int, ...], int, bool], State] = {}
        self._live = self._liveness()
        start = nfa.starts[0]
        for s in nfa.starts[1:]:
            start = nfa.add(SPLIT, -1, start, s)
        self._start = self.eclose(start)
        self._init: list[State | None] = [None] * CTX_COUNT

    def eclose(self, node: int) -> tuple[int, ...]:
        """The kernel nodes reached from ``node`` by epsilon moves (SPLIT nodes), in order."""
        got = self._eclose.get(node)
        if got is None:
            kind, out, out2 = self.nfa.kind, self.nfa.out, self.nfa.out2
            seen: set[int] = set()
            found: list[int] = []
            stack = [node]
            while stack:
                n = stack.pop()
                if n < 0 or n in seen:
                    continue
                seen.add(n)
                if kind[n] == SPLIT:
                    stack.append(out2[n])
                    stack.append(out[n])
                else:
                    found.append(n)
            got = self._eclose[node] = tuple(found)
        return got

    def _liveness(self) -> list[int]:
        """Per NFA node, the bit mask of previous contexts from which a match is still reachable."""
        nfa = self.nfa
        sat = self.alphabet.sat
        c2 = CTX_COUNT * CTX_COUNT
        rev: dict[int, list[int]] = {}
        seeds: list[int] = []
        for n, kind in enumerate(nfa.kind):
            if kind == FINAL:
                seeds.extend(range(n * c2, n * c2 + c2))
                continue
            if kind == SPLIT:
                continue
            succ = self.eclose(nfa.out[n])
            for p in range(CTX_COUNT):
                for x in range(CTX_COUNT):
                    v = n * c2 + p * CTX_COUNT + x
                    if kind == ASSERT and _HOLDS[nfa.arg[n]][p][x]:
                        targets: Iterable[int] = (m * c2 + p * CTX_COUNT + x for m in succ)
                    elif kind == CHAR and x != EDGE and sat[nfa.arg[n]][x]:
                        targets = (m * c2 + x * CTX_COUNT + y for m in succ for y in range(CTX_COUNT))
                    else:
                        continue
                    for t in targets:
                        rev.setdefault(t, []).append(v)
        live = [0] * len(nfa.kind)
        seen = set(seeds)
        stack = seeds
        while stack:
            v = stack.pop()
            live[v // c2] |= 1 << (v % c2 // CTX_COUNT)
            for u in rev.get(v, ()):
                if u not in seen:
                    seen.add(u)
                    stack.append(u)
        return live

    def nullable(self, start: int) -> bool:
        """Whether the rule starting at NFA node ``start`` matches "" in some context."""
        return bool(self.empty_contexts(start))

    def empty_contexts(self, start: int) -> list[tuple[int, int]]:
        """The (previous, next) character contexts in which the rule at ``start`` matches ""."""
        kernel = self.eclose(start)
        return [
            (p, x)
            for p in range(CTX_COUNT)
            for x in range(CTX_COUNT)
            if self._resolve(kernel, p, x, False)[1] >= 0
        ]

    def consumes(self, start: int) -> bool:
        """Whether the rule at ``start`` can match a non-empty string (assertions on the way to
        its first character taken as satisfiable)."""
        kind, out, live = self.nfa.kind, self.nfa.out, self._live
        seen: set[int] = set()
        stack = list(self.eclose(start))
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if kind[n] == ASSERT:
                stack.extend(self.eclose(out[n]))
            elif kind[n] == CHAR and any(live[m] for m in self.eclose(out[n])):
                return True
        return False

    def first_nodes(self) -> list[int]:
        """The CHAR nodes a match can start with (assertions on the way assumed to hold)."""
        found: list[int] = []
        seen: set[int] = set()
        stack = list(self._start)
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if self.nfa.kind[n] == CHAR:
                found.append(n)
            elif self.nfa.kind[n] == ASSERT:
                stack.extend(self.eclose(self.nfa.out[n]))
        return found

    def initial(self, ctx: int) -> State:
        """The state of a run starting after a character of context ``ctx``."""
        st = self._init[ctx]
        if st is None:
            st = self._init[ctx] = self._intern(self._start, ctx, True)
        return st

    def _intern(self, kernel: Iterable[int], ctx: int, initial: bool = False) -> State:
        live = self._live
        bit = 1 << ctx
        key = (tuple(sorted(set(kernel))), ctx, initial)
        if not any(live[n] & bit for n in key[0]):
            return DEAD
        st = self._table.get(key)
        if st is None:
            if len(self._table) >= self.max_states:
                self._drop_cache()
            st = self._table[key] = State(key[0], ctx, initial)
            self._classify(st)
        return st

    def _classify(self, st: State) -> None:
        """Set ``st.final`` and ``st.done`` (see :class:`State`)."""
        sat = self.alphabet.sat
        arg, out, live = self.nfa.arg, self.nfa.out, self._live
        rules = [self._pre(st, x)[1] for x in range(CTX_COUNT)]
        pending = any(r != rules[0] for r in rules)
        later = any(
            sat[arg[c]][x] and any(live[m] >> x & 1 for m in self.eclose(out[c]))
            for x in range(1, CTX_COUNT)
            for c in self._pre(st, x)[0]
        )
        st.final = not (pending or later)
        st.done = rules[0] if st.final else -1

    def _drop_cache(self) -> None:
        for st in self._table.values():
            st.trans.clear()
            st.by_class.clear()
            st.restricted.clear()
        self._table.clear()
        self._init = [None] * CTX_COUNT
        self.resets += 1

    def _resolve(
        self, kernel: tuple[int, ...], prev: int, nxt: int, initial: bool
    ) -> tuple[tuple[int, ...], int]:
        """Follow the assertions that hold between ``prev`` and ``nxt``: (CHAR nodes, rule or -1).

        ``initial``: the state before any character, which accepts nothing (no empty matches).
        Otherwise the CHAR nodes of the shortest rules that match here are dropped.
        """
        kind, arg, out = self.nfa.kind, self.nfa.arg, self.nfa.out
        chars: list[int] = []
        rule = -1
        accepted = 0
        seen: set[int] = set()
        stack = list(reversed(kernel))
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            k = kind[n]
            if k == CHAR:
                chars.append(n)
            elif k == FINAL:
                accepted |= 1 << arg[n]
                if rule < 0 or arg[n] < rule:
                    rule = arg[n]
            elif _HOLDS[arg[n]][prev][nxt]:
                stack.extend(reversed(self.eclose(out[n])))
        if initial:
            return tuple(chars), -1
        done = accepted & self.shortest_mask
        if done:
            owner = self.nfa.rule
            chars = [c for c in chars if not done >> owner[c] & 1]
        return tuple(chars), rule

    def _pre(self, st: State, nxt: int) -> tuple[tuple[int, ...], int]:
        got = st.pre[nxt]
        if got is None:
            got = st.pre[nxt] = self._resolve(st.kernel, st.ctx, nxt, st.initial)
        return got

    def step(self, st: State, ch: str) -> tuple[State, int]:
        """Move ``st`` over ``ch``: (next state, the rule that matched just before ``ch`` or -1)."""
        k = self.alphabet.class_of(ch)
        got = st.by_class.get(k)
        if got is None:
            ctx = self.alphabet.ctx[k]
            chars, rule = self._pre(st, ctx)
            mask = self.alphabet.masks[k]
            arg, out = self.nfa.arg, self.nfa.out
            nxt: list[int] = []
            for n in chars:
                if mask >> arg[n] & 1:
                    nxt.extend(self.eclose(out[n]))
            got = st.by_class[k] = (self._intern(nxt, ctx), rule)
        if len(st.trans) < _CHAR_CACHE:
            st.trans[ch] = got
        return got

    def accept_at_end(self, st: State) -> int:
        """The rule that matches when the stream ends in state ``st``, or -1."""
        return -1 if st is DEAD else self._pre(st, EDGE)[1]

    def without_rules(self, st: State, rules_mask: int) -> State:
        """``st`` with the NFA nodes of the rules in ``rules_mask`` (bit per rule) removed."""
        if st is DEAD:
            return st
        got = st.restricted.get(rules_mask)
        if got is None:
            rule = self.nfa.rule
            kept = [n for n in st.kernel if not (rules_mask >> rule[n] & 1)]
            got = st.restricted[rules_mask] = self._intern(kept, st.ctx, st.initial)
        return got

    def alive_for(self, st: State, rule_index: int) -> bool:
        """Whether rule ``rule_index`` can still match from ``st``."""
        rule = self.nfa.rule
        return any(rule[n] == rule_index and self._live[n] >> st.ctx & 1 for n in st.kernel)
