"""A stream's state as plain data, and back (SEMANTICS §13): what :func:`rxstream.operators.checkpoint`
snapshots and restores.

What is *state* and what is *configuration* is decided by where an object comes from. An
operator's configuration (compiled rules, tries, automata, tokenizer tables, schemas, plans) is
built once, when the operator is built, and is reachable from the closure of its ``make_sink``;
every object a subscription creates is state. So a snapshot holds only the state: an object of
the configuration is written as its path from that closure ("cell 1, attribute ``trie``,
element 3"), and a fresh pipeline built from the same arguments resolves the path to its own
object. A lazily built automaton's state is written as its key (kernel, context), which the
fresh automaton finds or builds.

Restoring writes the values *into* the fresh pipeline's objects where they exist (the closures
a subscription made, bound to those objects, keep working), and makes the objects it lacks.
Functions are behaviour, not state: the fresh pipeline's are kept. Only classes of rxstream's own
modules are made from a snapshot.
"""

from __future__ import annotations

import base64
import enum
import functools
import importlib
import types
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from .text._regex_dfa import DEAD, Dfa, State

__all__ = ["Path", "SnapshotError", "StateDecoder", "StateEncoder", "attributes", "resolve", "static_index"]

_PRIMITIVES = (type(None), bool, int, float, str)
_SCALARS = (*_PRIMITIVES, bytes, enum.Enum)
_PLUMBING = ("reactivex", "threading", "_thread", "asyncio")
"""Modules of objects a subscription holds that are its place in the world (observers,
disposables, locks), not its state: the fresh pipeline keeps its own."""
_FUNCTIONS = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.BuiltinMethodType,
    types.MethodWrapperType,
)


class SnapshotError(ValueError):
    """A snapshot that cannot be taken (state that is not data) or restored (another pipeline's,
    a damaged one)."""


def _slots(obj: object) -> Iterator[str]:
    seen: set[str] = set()
    for klass in type(obj).__mro__:
        for name in getattr(klass, "__slots__", ()):
            if name not in seen and name not in ("__weakref__", "__dict__"):
                seen.add(name)
                yield name


def attributes(obj: object) -> Iterator[tuple[str, Any]]:
    """An object's attributes (slots, then ``__dict__``), in a fixed order."""
    for name in _slots(obj):
        if hasattr(obj, name):
            yield name, getattr(obj, name)
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict):
        yield from d.items()


def _ours(module: str | None) -> bool:
    return module is not None and (module == "rxstream" or module.startswith("rxstream."))


def _leaf(obj: object) -> bool:
    """Configuration that is referenced whole, never looked into: automata (they grow as a stream
    runs), functions, classes, and every object not of rxstream's own classes (observers,
    tokenizers, modules, locks)."""
    if isinstance(obj, (*_FUNCTIONS, Dfa, type)):
        return True
    return not _ours(type(obj).__module__)


Path = tuple[str, ...]
"""Where a configuration object is: a closure cell's number, then ``.name`` (an attribute),
``#3`` (an element) or ``~'key'`` (a dict's value, by the key's repr)."""


def static_index(roots: list[Any]) -> tuple[dict[int, Path], list[tuple[Path, Dfa]]]:
    """Every configuration object reachable from ``roots`` (a factory's closure cells), by id,
    with the path it is first reached by (a walk in a fixed order; automata, observers and
    tokenizers are not looked into), and the automata among them."""
    index: dict[int, Path] = {}
    dfas: list[tuple[Path, Dfa]] = []
    stack: list[tuple[Any, Path]] = [(root, (str(k),)) for k, root in reversed(list(enumerate(roots)))]
    while stack:
        obj, path = stack.pop()
        if isinstance(obj, _SCALARS) or id(obj) in index:
            continue
        index[id(obj)] = path
        if isinstance(obj, Dfa):
            dfas.append((path, obj))
        children: list[tuple[Any, Path]]
        if isinstance(obj, types.FunctionType) and _ours(obj.__module__):  # its closure's too
            cells = obj.__closure__ or ()
            children = [(c.cell_contents, (*path, f"@{k}")) for k, c in enumerate(cells) if _filled(c)]
            stack.extend(reversed(children))
            continue
        if isinstance(obj, types.MethodType):
            stack.append((obj.__self__, (*path, "@self")))
            continue
        if isinstance(obj, list | tuple | deque):  # (a table of scalars is a leaf's worth of work)
            children = [(v, (*path, f"#{k}")) for k, v in enumerate(obj) if not isinstance(v, _SCALARS)]
        elif isinstance(obj, dict):
            children = [(v, (*path, f"~{k!r}")) for k, v in obj.items()]
        elif isinstance(obj, set | frozenset) or _leaf(obj):
            children = []  # a set is unordered: its members are found by other paths or not at all
        else:
            children = [(v, (*path, f".{name}")) for name, v in attributes(obj)]
        stack.extend(reversed(children))
    return index, dfas


def _filled(cell: Any) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:  # a cell not assigned yet
        return False
    return True


def resolve(roots: list[Any], path: Path) -> Any:
    """The object at ``path`` (see :func:`static_index`) from ``roots``."""
    obj = roots[int(path[0])]
    for step in path[1:]:
        kind, rest = step[0], step[1:]
        if kind == ".":
            obj = getattr(obj, rest)
        elif step == "@self":
            obj = obj.__self__
        elif kind == "@":
            obj = obj.__closure__[int(rest)].cell_contents
        elif kind == "#":
            obj = obj[int(rest)]
        else:
            obj = next(v for k, v in obj.items() if repr(k) == rest)
    return obj


class StateEncoder:
    """Encodes the state reachable from one sink; ``static`` is the index of its configuration."""

    def __init__(self, factory: Any, roots: list[Any], cache: dict[int, Any] | None = None) -> None:
        known = None if cache is None else cache.get(id(factory))
        if known is None or known[0] is not factory:
            known = (factory, *static_index(roots))  # the factory kept: its id stays its own
            if cache is not None:
                cache[id(factory)] = known
        self.static: dict[int, Path] = known[1]
        self.dfas: list[tuple[Path, Dfa]] = known[2]
        self.memo: dict[int, int] = {}
        self.keep: list[Any] = []  # what the memo's ids belong to, alive until the end

    def encode(self, value: Any) -> Any:
        if isinstance(value, _PRIMITIVES):
            return value
        key = id(value)
        if key in self.static:
            return {"$s": list(self.static[key])}
        if isinstance(value, bytes):
            return {"$b": base64.b64encode(value).decode("ascii")}
        if isinstance(value, enum.Enum):
            return {"$e": [_name(type(value)), value.name]}
        if isinstance(value, State):
            return self._state(value)
        if isinstance(value, tuple):
            items = [self.encode(v) for v in value]
            if type(value) is not tuple:  # a named tuple (a Segment): its class too
                return {"$nt": _name(type(value)), "v": items}
            return {"$t": items}
        if isinstance(value, list):
            return [self.encode(v) for v in value]
        if isinstance(value, deque):
            return {"$q": [self.encode(v) for v in value], "n": value.maxlen}
        if isinstance(value, set | frozenset):
            return {"$set": [self.encode(v) for v in value], "f": isinstance(value, frozenset)}
        if isinstance(value, dict):
            return {"$d": [[self.encode(k), self.encode(v)] for k, v in value.items()]}
        if isinstance(value, types.MappingProxyType):
            return {"$mp": [[self.encode(k), self.encode(v)] for k, v in value.items()]}
        if isinstance(value, type):
            return {"$c": _name(value)}
        if isinstance(value, types.MethodType):
            return {"$m": [self.encode(value.__self__), value.__func__.__name__]}
        if isinstance(value, _FUNCTIONS) or (type(value).__module__ or "").startswith(_PLUMBING):
            return {"$k": None}  # behaviour, or a plumbing object: the fresh pipeline's
        if not _ours(type(value).__module__):
            raise SnapshotError(f"cannot snapshot a {type(value).__qualname__}: it is not rxstream's state")
        if key in self.memo:
            return {"$r": self.memo[key]}
        self.memo[key] = len(self.memo)
        self.keep.append(value)
        attrs = {name: self.encode(v) for name, v in attributes(value)}
        return {"$o": _name(type(value)), "i": self.memo[key], "a": attrs}

    def _state(self, state: State) -> Any:
        if state is DEAD:
            return {"$dead": None}
        key = (state.kernel, state.ctx, state.initial)
        found = [path for path, dfa in self.dfas if _holds(dfa, key, state)]
        if not found and len(self.dfas) == 1:  # its cache was dropped since: the key still names it
            found = [self.dfas[0][0]]
        if not found:
            raise SnapshotError("a regex automaton state of no known automaton: cannot snapshot it")
        return {"$dfa": [list(found[0]), list(state.kernel), state.ctx, state.initial]}


def _holds(dfa: Dfa, key: tuple[tuple[int, ...], int, bool], state: State) -> bool:
    """Whether ``state`` is ``dfa``'s state of ``key`` (kernel, context, initial)."""
    return dfa._table.get(key) is state or any(s is state for s in dfa._init)


def _name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


_BUILTIN_TYPES = {t.__name__: t for t in (str, bytes, int, float, bool, tuple, list, dict, type(None))}


def _class(name: str) -> type:
    module, _, qual = name.partition(":")
    if module == "builtins" and qual in _BUILTIN_TYPES:
        return _BUILTIN_TYPES[qual]
    if not (module == "rxstream" or module.startswith("rxstream.")):
        raise SnapshotError(f"a snapshot names a class outside rxstream: {name!r}")
    obj: Any = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise SnapshotError(f"a snapshot names {name!r}, which is not a class")
    return obj


class StateDecoder:
    """Decodes a sink's state into the fresh pipeline's objects (``roots``: its configuration)."""

    def __init__(self, roots: list[Any]) -> None:
        self.roots = roots
        self.memo: dict[int, Any] = {}
        self.fixups: list[Callable[[], None]] = []

    def decode(self, data: Any, existing: Any = None) -> Any:
        if isinstance(data, _PRIMITIVES):
            return data
        if isinstance(data, list):
            return self._items(data, existing)
        if not isinstance(data, dict) or len(data) == 0:
            raise SnapshotError(f"a damaged snapshot: {str(data)[:80]!r}")
        tag = next(iter(data))
        value = data[tag]
        if tag == "$s":
            try:
                return resolve(self.roots, tuple(value))
            except (LookupError, AttributeError, ValueError, StopIteration):
                raise SnapshotError(f"the pipeline differs from the snapshot's: no {value!r}") from None
        if tag == "$k":
            return existing
        if tag == "$b":
            return base64.b64decode(value)
        if tag == "$e":
            return getattr(_class(value[0]), value[1])
        if tag == "$t":
            return tuple(self._items(value, existing))
        if tag == "$q":
            return deque((self.decode(v) for v in value), data["n"])
        if tag == "$set":
            items = (self.decode(v) for v in value)
            return frozenset(items) if data["f"] else set(items)
        if tag == "$d":
            old = existing if isinstance(existing, dict) else {}
            out = {}
            for k, v in value:
                key = self.decode(k)
                out[key] = self.decode(v, old.get(key))
            return out
        if tag == "$nt":
            return _class(value)(*(self.decode(v) for v in data["v"]))
        if tag == "$c":
            return _class(value)
        if tag == "$mp":
            return types.MappingProxyType({self.decode(k): self.decode(v) for k, v in value})
        if tag == "$m":
            owner = self.decode(value[0])
            return getattr(owner, value[1])
        if tag == "$dead":
            return DEAD
        if tag == "$dfa":
            dfa = resolve(self.roots, tuple(value[0]))
            if not isinstance(dfa, Dfa):
                raise SnapshotError("the pipeline differs from the snapshot's: no automaton there")
            return dfa._intern(tuple(value[1]), value[2], value[3])  # found in its cache, or built
        if tag == "$r":
            return self.memo[value]
        if tag == "$o":
            return self._object(data, existing)
        raise SnapshotError(f"a damaged snapshot: unknown tag {tag!r}")

    def _items(self, data: list[Any], existing: Any) -> list[Any]:
        """A list's or tuple's items, each into the fresh one's item at its place (where the
        fresh container has as many): a function there is kept."""
        old = existing if isinstance(existing, list | tuple) and len(existing) == len(data) else None
        return [self.decode(v, None if old is None else old[k]) for k, v in enumerate(data)]

    def _object(self, data: dict[str, Any], existing: Any) -> Any:
        cls = _class(data["$o"])
        fresh = existing is None or type(existing) is not cls
        target = object.__new__(cls) if fresh else existing
        self.memo[data["i"]] = target
        for name, enc in data["a"].items():
            current = getattr(target, name, None) if not fresh else None
            if isinstance(enc, dict) and "$k" in enc:
                if fresh and not hasattr(target, name):
                    rebuild = getattr(cls, "restore_fixup", None)
                    if rebuild is None:
                        raise SnapshotError(
                            f"cannot restore {cls.__qualname__}.{name}: it holds a function the "
                            "fresh pipeline has no counterpart of"
                        )
                    self.fixups.append(functools.partial(rebuild, target))
                continue
            object.__setattr__(target, name, self.decode(enc, current))
        return target

    def finish(self) -> None:
        """Rebuild what new objects derive from their state (their own functions)."""
        for fixup in self.fixups:
            fixup()
        self.fixups.clear()
