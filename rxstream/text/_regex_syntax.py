"""Regular-expression syntax for :mod:`rxstream.text._regex`: parse, reject the non-regular, build an NFA.

Patterns are parsed by the standard library's own parser (``re._parser``), so the accepted syntax,
the escapes and the flag handling are exactly Python's. The parse tree is then turned into a
Thompson NFA over *character predicates*: every character-consuming leaf (a literal, a class,
``.``) becomes one predicate, described by a tiny pattern of its own (``[\\U00000061]``, ``[^\\d]``,
``.``) compiled with the leaf's effective flags, so case folding, ``\\w``/``\\d``/``\\s`` and ASCII
mode mean exactly what the rule's engine (``re`` or ``regex``) says they mean
(see :mod:`rxstream.text._regex_alphabet`).

Zero-width assertions become NFA nodes that test the previous and the next character (see
:data:`ASSERT_NAMES`). Anything that is not regular, or needs more than one character of
look-around, raises ``ValueError`` naming the construct.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from typing import Any

from ._regex_dialect import foreign_message, prepare, regex_only_construct

__all__ = [
    "ASSERT",
    "ASSERT_NAMES",
    "A_BEGIN_LINE",
    "A_BEGIN_TEXT",
    "A_BOUND_A",
    "A_BOUND_U",
    "A_END_LINE",
    "A_END_TEXT",
    "A_NBOUND_A",
    "A_NBOUND_U",
    "CHAR",
    "FINAL",
    "SPLIT",
    "Nfa",
    "count_nodes",
    "parse_rule",
]

_parser: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")

# NFA node kinds.
CHAR, SPLIT, ASSERT, FINAL = 0, 1, 2, 3

# Assertion kinds (arguments of ASSERT nodes).
A_BEGIN_TEXT = 0  # \A, and ^ without MULTILINE: no previous character
A_BEGIN_LINE = 1  # ^ with MULTILINE: no previous character, or it is "\n"
A_END_TEXT = 2  # \Z: no next character (the end of the stream: flush)
A_END_LINE = 3  # $ with MULTILINE: no next character, or it is "\n"
A_BOUND_U = 4  # \b (Unicode word characters)
A_BOUND_A = 5  # \b under ASCII
A_NBOUND_U = 6  # \B
A_NBOUND_A = 7  # \B under ASCII
ASSERT_NAMES = ("\\A", "^", "\\Z", "$", "\\b", "\\b", "\\B", "\\B")

#: The most NFA nodes one rule set may have (repetition counts are expanded).
MAX_NODES = 100_000

_LEAF_FLAGS = re.IGNORECASE | re.ASCII
_FLAG_NAMES = ("IGNORECASE", "ASCII", "DOTALL", "MULTILINE", "VERBOSE")
_MAXREPEAT: int = _c.MAXREPEAT

_CATEGORY_SOURCE = {
    "CATEGORY_DIGIT": "\\d",
    "CATEGORY_NOT_DIGIT": "\\D",
    "CATEGORY_SPACE": "\\s",
    "CATEGORY_NOT_SPACE": "\\S",
    "CATEGORY_WORD": "\\w",
    "CATEGORY_NOT_WORD": "\\W",
}

_REJECTED = {
    "GROUPREF": "back-reference (\\N, (?P=name))",
    "GROUPREF_EXISTS": "conditional group (?(id)yes|no)",
    "ATOMIC_GROUP": "atomic group (?>...)",
    "POSSESSIVE_REPEAT": "possessive quantifier (*+, ++, ?+, {m,n}+)",
}


@dataclass
class Nfa:
    """A Thompson NFA over character predicates, shared by all the rules of a set.

    Node ``i`` has ``kind[i]`` (CHAR, SPLIT, ASSERT, FINAL), ``arg[i]`` (the predicate id of a
    CHAR, the assertion kind of an ASSERT, the rule index of a FINAL), ``out[i]`` and ``out2[i]``
    (successors; -1 when absent) and ``rule[i]`` (the rule it belongs to).
    ``leaves[p]`` is the ``(source, flags)`` of predicate ``p``; ``starts[r]`` is rule ``r``'s start.
    """

    kind: list[int] = field(default_factory=list)
    arg: list[int] = field(default_factory=list)
    out: list[int] = field(default_factory=list)
    out2: list[int] = field(default_factory=list)
    rule: list[int] = field(default_factory=list)
    leaves: list[tuple[str, int]] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    _leaf_ids: dict[tuple[str, int], int] = field(default_factory=dict)
    _leaf_of: dict[tuple[Any, str, int], int] = field(default_factory=dict)
    _props: dict[int, str] = field(default_factory=dict)
    """This rule's placeholders: code point -> the property or POSIX class it stands for."""
    """Leaves by parse-tree item (``id`` of a class's item list: the tree outlives the parse)."""
    _rule: int = 0
    max_nodes: int = MAX_NODES
    """The most nodes it may have (counted repeats are expanded: ``a{1,250}`` is 250 copies)."""

    def add(self, kind: int, arg: int = -1, out: int = -1, out2: int = -1) -> int:
        if len(self.kind) >= self.max_nodes:
            raise ValueError(
                f"pattern too large: more than {self.max_nodes} automaton nodes "
                "(counted repeats are expanded: {1,250} is 250 copies)"
            )
        self.kind.append(kind)
        self.arg.append(arg)
        self.out.append(out)
        self.out2.append(out2)
        self.rule.append(self._rule)
        return len(self.kind) - 1

    def leaf(self, source: str, flags: int) -> int:
        key = (source, flags)
        pid = self._leaf_ids.get(key)
        if pid is None:
            pid = self._leaf_ids[key] = len(self.leaves)
            self.leaves.append(key)
        return pid


def parse_rule(nfa: Nfa, index: int, pattern: str, flags: int, engine: Any = re) -> int:
    """Parse ``pattern`` (with ``flags``) and add it to ``nfa`` as rule ``index``.

    ``engine``: the rule's module; for ``regex`` its property and POSIX classes are taken
    (:mod:`._regex_dialect`). Returns the pattern's global flags (the given ones plus inline
    ``(?x)`` at its start). Raises ValueError for syntax errors and for every construct that is
    not supported.
    """
    tree, nfa._props = _tree(pattern, flags, engine)
    gflags: int = tree.state.flags
    nfa._rule = index
    nfa._leaf_of.clear()  # keyed by ids of this tree's items: valid while ``tree`` lives
    final = nfa.add(FINAL, index)
    try:
        nfa.starts.append(_seq(nfa, tree, gflags, final))
    except ValueError as exc:
        raise ValueError(f"pattern {pattern!r}: {exc}") from None
    return gflags


def count_nodes(pattern: str, flags: int, engine: Any = re) -> int:
    """How many NFA nodes :func:`parse_rule` would add for ``pattern``, from its parse tree alone
    (repeats multiplied, nothing expanded or built: a few microseconds whatever the count)."""
    tree, _ = _tree(pattern, flags, engine)
    return 1 + _seq_size(tree)


def _tree(pattern: str, flags: int, engine: Any) -> tuple[Any, dict[int, str]]:
    """The standard parser's tree of ``pattern`` and its placeholders (:mod:`._regex_dialect`)."""
    source = pattern
    props: dict[int, str] = {}
    if engine is not re:
        try:
            source, props = prepare(pattern)
        except ValueError as exc:
            raise ValueError(f"pattern {pattern!r}: {exc}") from None
        # the parser (and every leaf) keeps re's flag bits; regex numbers ASCII differently
        flags = sum(getattr(re, name) for name in _FLAG_NAMES if flags & getattr(engine, name))
    try:
        tree = _parser.parse(source, flags)
    except re.error as exc:
        foreign = regex_only_construct(pattern) if engine is re else None
        if foreign is not None:
            raise ValueError(foreign_message(pattern, foreign)) from None
        raise ValueError(f"pattern {pattern!r}: {exc}") from None
    if tree.state.flags & re.LOCALE:
        raise ValueError(f"pattern {pattern!r}: the LOCALE flag is not supported")
    return tree, props


def _seq_size(items: Any) -> int:
    return sum(_item_size(str(op), av) for op, av in items)


def _item_size(op: str, av: Any) -> int:
    """The nodes :func:`_item` adds for one parse-tree item (1 for what it refuses)."""
    if op == "BRANCH":
        return sum(_seq_size(sub) for sub in av[1]) + len(av[1]) - 1
    if op == "SUBPATTERN":
        return _seq_size(av[3])
    if op in ("MAX_REPEAT", "MIN_REPEAT"):
        low, high, sub = av
        inner = _seq_size(sub)
        body = 1 + inner if high == _MAXREPEAT else (high - low) * (1 + inner)
        return int(body + low * inner)
    return 1


def _seq(nfa: Nfa, items: Any, flags: int, nxt: int) -> int:
    for op, av in reversed(list(items)):
        nxt = _item(nfa, str(op), av, flags, nxt)
    return nxt


def _item(nfa: Nfa, op: str, av: Any, flags: int, nxt: int) -> int:
    if op in ("LITERAL", "NOT_LITERAL", "ANY", "IN"):
        # the copies of a counted repeat share their parse tree: each leaf is described once
        key = (id(av) if op == "IN" else av, op, flags)
        pid = nfa._leaf_of.get(key)
        if pid is None:
            pid = nfa._leaf_of[key] = _leaf(nfa, op, av, flags)
        return nfa.add(CHAR, pid, nxt)
    if op == "BRANCH":
        starts = [_seq(nfa, sub, flags, nxt) for sub in av[1]]
        node = starts[-1]
        for start in reversed(starts[:-1]):
            node = nfa.add(SPLIT, -1, start, node)
        return node
    if op == "SUBPATTERN":
        _group, add, remove, sub = av
        return _seq(nfa, sub, (flags | add) & ~remove, nxt)
    if op in ("MAX_REPEAT", "MIN_REPEAT"):  # lazy = greedy: the longest match is taken anyway
        low, high, sub = av
        if high == _MAXREPEAT:
            loop = nfa.add(SPLIT, -1, -1, nxt)
            nfa.out[loop] = _seq(nfa, sub, flags, loop)
            tail = loop
        else:
            tail = nxt
            for _ in range(high - low):
                tail = nfa.add(SPLIT, -1, _seq(nfa, sub, flags, tail), tail)
        for _ in range(low):
            tail = _seq(nfa, sub, flags, tail)
        return tail
    if op == "AT":
        return nfa.add(ASSERT, _assertion(str(av), flags), nxt)
    if op in ("ASSERT", "ASSERT_NOT"):
        where = "ahead" if av[0] == 1 else "behind"
        neg = "negative " if op == "ASSERT_NOT" else ""
        sign = ("!" if neg else "=") if where == "ahead" else ("<!" if neg else "<=")
        raise ValueError(f"{neg}look-{where} (?{sign}...) is not supported (not regular)")
    name = _REJECTED.get(op)
    if name is None:
        name = op.lower().replace("_", " ")
    raise ValueError(f"{name} is not supported")


def _assertion(at: str, flags: int) -> int:
    ascii_ = bool(flags & re.ASCII)
    if at == "AT_BEGINNING_STRING":
        return A_BEGIN_TEXT
    if at == "AT_BEGINNING":
        return A_BEGIN_LINE if flags & re.MULTILINE else A_BEGIN_TEXT
    if at == "AT_END_STRING":
        return A_END_TEXT
    if at == "AT_END":
        if flags & re.MULTILINE:
            return A_END_LINE
        raise ValueError(
            "$ without MULTILINE is not supported (it also matches before a final newline, "
            "two characters of look-ahead); use \\Z for the end of the stream or (?m)$"
        )
    if at == "AT_BOUNDARY":
        return A_BOUND_A if ascii_ else A_BOUND_U
    if at == "AT_NON_BOUNDARY":
        return A_NBOUND_A if ascii_ else A_NBOUND_U
    raise ValueError(f"assertion {at} is not supported")


def _esc(code: int) -> str:
    return f"\\U{code:08x}"


def _leaf(nfa: Nfa, op: str, av: Any, flags: int) -> int:
    props = nfa._props
    if op == "ANY":
        return nfa.leaf(".", flags & re.DOTALL)
    if op == "LITERAL":
        return nfa.leaf("[" + props.get(av, _esc(av)) + "]", flags & _LEAF_FLAGS)
    if op == "NOT_LITERAL":
        return nfa.leaf("[^" + props.get(av, _esc(av)) + "]", flags & _LEAF_FLAGS)
    parts: list[str] = []
    for iop, iav in av:
        name = str(iop)
        if name == "NEGATE":
            parts.insert(0, "^")
        elif name == "LITERAL":
            parts.append(props.get(iav, _esc(iav)))
        elif name == "RANGE":
            if iav[0] in props or iav[1] in props:
                raise ValueError("a property or POSIX class cannot be the end of a range")
            parts.append(_esc(iav[0]) + "-" + _esc(iav[1]))
        elif name == "CATEGORY" and str(iav) in _CATEGORY_SOURCE:
            parts.append(_CATEGORY_SOURCE[str(iav)])
        else:
            raise ValueError(f"character class item {name} {iav} is not supported")
    return nfa.leaf("[" + "".join(parts) + "]", flags & _LEAF_FLAGS)
