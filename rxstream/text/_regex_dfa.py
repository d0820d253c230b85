"""A lazily built DFA over the NFA of :mod:`rxstream.text._regex_syntax`, with one character of context.

A DFA state is a set of NFA *kernel* nodes (character tests, assertions and finals reached by
plain epsilon moves) plus the context of the previous character. Assertions are left pending in
the kernel and resolved when the next character (or the end of the stream) is known, so a step
on character ``c`` first follows the assertions that hold between the previous character and
``c`` -- which also says whether the run *matched just before* ``c`` -- and then moves over ``c``.
That is exactly one character of look-behind and look-ahead: ``^``, ``$`` (MULTILINE), ``\\A``,
``\\Z``, ``\\b``, ``\\B``.

States are built on demand (subset construction, one transition at a time) and cached, per class
and per character. Past ``max_states`` cached states, or ``max_cells`` kernel nodes and cached
transitions together, the whole cache is dropped and rebuilt as the text needs it (what RE2
does): memory stays bounded, results do not change, and the cost per
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

__all__ = ["DEAD", "DEFAULT_MAX_CELLS", "Dfa", "State"]

#: How many characters one state caches transitions for (its per-class cache is complete).
_CHAR_CACHE = 4096

DEFAULT_MAX_CELLS = 1 << 18
"""The default bound on what one DFA's cache holds (kernel nodes and cached transitions: a few
tens of bytes each, so a few MB at most)."""


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

# (previous, next) context pairs as bits ``previous * CTX_COUNT + next`` of one int
_HOLD_MASK = [
    sum(1 << p * CTX_COUNT + x for p in range(CTX_COUNT) for x in range(CTX_COUNT) if _HOLDS[k][p][x])
    for k in range(8)
]
"""Per assertion kind, the context pairs in which it holds."""
_COLUMNS = [
    sum(1 << p * CTX_COUNT + x for p in range(CTX_COUNT) for x in range(CTX_COUNT) if xs >> x & 1)
    for xs in range(1 << CTX_COUNT)
]
"""Per set of next contexts (a bit each), every pair whose next context is in it."""
_ROW = (1 << CTX_COUNT) - 1


def _rows(pairs: int) -> int:
    """The previous contexts (a bit each) that some pair of ``pairs`` has."""
    out = 0
    for p in range(CTX_COUNT):
        if pairs >> p * CTX_COUNT & _ROW:
            out |= 1 << p
    return out


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
        self,
        nfa: Nfa,
        alphabet: Alphabet,
        max_states: int = 10_000,
        shortest_mask: int = 0,
        max_cells: int = DEFAULT_MAX_CELLS,
    ) -> None:
        if max_states < 8:
            raise ValueError("max_states must be at least 8")
        if max_cells < 1024:
            raise ValueError("max_cells must be at least 1024")
        self.nfa = nfa
        self.alphabet = alphabet
        self.max_states = max_states
        self.max_cells = max_cells
        self.cells = 0
        """What the cache holds: kernel nodes of its states plus cached transitions (the cache is
        dropped before it holds more than :attr:`max_cells`)."""
        self.shortest_mask = shortest_mask
        self.resets = 0
        self.built = 0
        """States built so far (a cache that was dropped and rebuilt counts again)."""
        self.transitions = 0
        """Transitions computed so far (subset steps; each costs up to the NFA's size)."""
        self.liveness_steps = 0
        """Nodes taken from the liveness search's work list (at most ``CTX_COUNT ** 2`` per node)."""
        self.closure_visits = 0
        """NFA nodes visited by the closures of transitions (at most the NFA's size each)."""
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

    def _closure(self, nodes: list[int]) -> list[int]:
        """The kernel nodes reached from any of ``nodes`` by epsilon moves: one search for all of
        them (the closures of a long chain of optional copies overlap, ``a{0,250}``)."""
        kind, out, out2 = self.nfa.kind, self.nfa.out, self.nfa.out2
        seen: set[int] = set()
        found: list[int] = []
        stack = nodes[::-1]
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
        self.closure_visits += len(seen)
        return found

    def _liveness(self) -> list[int]:
        """Per NFA node, the bit mask of previous contexts from which a match is still reachable.

        A backward search over the NFA's own edges (SPLIT nodes included, so an epsilon chain is
        walked once, not once per node that reaches it), carrying per node the set of
        (previous, next) context pairs from which a match is reachable as a bit mask of
        ``CTX_COUNT ** 2`` bits: each node's mask only grows, so each node is revisited at most
        that many times and the search is linear in the NFA's size.
        """
        nfa = self.nfa
        kind, arg, out, out2 = nfa.kind, nfa.arg, nfa.out, nfa.out2
        sat_mask = [sum(1 << x for x in range(CTX_COUNT) if ok[x]) for ok in self.alphabet.sat]
        n_nodes = len(kind)
        preds: list[list[int]] = [[] for _ in range(n_nodes)]
        for n in range(n_nodes):
            if kind[n] == FINAL:
                continue
            if out[n] >= 0:
                preds[out[n]].append(n)
            if kind[n] == SPLIT and out2[n] >= 0:
                preds[out2[n]].append(n)
        full = (1 << CTX_COUNT * CTX_COUNT) - 1
        mask = [0] * n_nodes
        stack: list[int] = []
        for n in range(n_nodes):
            if kind[n] == FINAL:
                mask[n] = full
                stack.append(n)
        rows_of: dict[int, int] = {}
        while stack:
            self.liveness_steps += 1
            m = stack.pop()
            got = mask[m]
            rows = rows_of.get(got)
            if rows is None:
                rows = rows_of[got] = _rows(got)
            for n in preds[m]:
                k = kind[n]
                if k == SPLIT:
                    add = got
                elif k == ASSERT:
                    add = got & _HOLD_MASK[arg[n]]
                else:  # CHAR: it consumes a character of context x, and its successor sees x before
                    xs = rows & sat_mask[arg[n]] & ~(1 << EDGE)
                    add = _COLUMNS[xs]
                if add & ~mask[n]:
                    mask[n] |= add
                    stack.append(n)
        return [rows_of[v] if v in rows_of else _rows(v) for v in mask]

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
            st = State(key[0], ctx, initial)
            self._classify(st)  # before it is shared: another thread may read the table meanwhile
            if len(self._table) >= self.max_states or self.cells + len(key[0]) >= self.max_cells:
                self._drop_cache()
            self._table[key] = st
            self.cells += len(key[0]) + 1
            self.built += 1
        return st

    def _classify(self, st: State) -> None:
        """Set ``st.final`` and ``st.done`` (see :class:`State`)."""
        sat = self.alphabet.sat
        arg, out, live = self.nfa.arg, self.nfa.out, self._live
        rules = [self._pre(st, x)[1] for x in range(CTX_COUNT)]
        pending = any(r != rules[0] for r in rules)
        later = any(
            sat[arg[c]][x] and out[c] >= 0 and live[out[c]] >> x & 1
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
        self.cells = 0
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
            moved = [out[n] for n in chars if mask >> arg[n] & 1]
            nxt = self.eclose(moved[0]) if len(moved) == 1 else self._closure(moved)
            got = st.by_class[k] = (self._intern(nxt, ctx), rule)
            self.transitions += 1
            self.cells += 1
        if len(st.trans) < _CHAR_CACHE:
            st.trans[ch] = got
            self.cells += 1
            if self.cells >= self.max_cells:
                self._drop_cache()
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
