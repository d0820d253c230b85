"""Incremental JSON-schema checking: the first character after which no completion is valid.

:func:`compile_schema` turns a JSON schema (the subset tool definitions use) into a tree of
:class:`SchemaNode`; a :class:`SchemaChecker` follows the events of a
:class:`~._json_stream.JsonStream` (``detail=True``) and reports a violation at the **first
character after which no continuation of the text can be valid** (SEMANTICS §9):

- a value of a type the schema does not allow: at the value's first character (``{``, ``[``,
  ``"``, a digit or ``-``, ``t``/``f``/``n``);
- a key that ``additionalProperties: false`` does not allow: at the first character of the key
  that no allowed key continues (the closing quote when the key is a proper prefix of one);
- a string outside its ``enum``/``const``: at the first character that no member continues
  (its closing quote for a proper prefix of a member);
- ``true``/``false``/``null`` outside the enum: at their first letter (it decides the value);
- an ``integer`` that cannot be whole: at the character that rules it out (``1.5`` can still
  become ``1.5e1``; ``1.5e-`` cannot), else when the number is settled;
- a number outside its ``enum``/``const``: when the number is settled;
- a missing ``required`` key: at the object's closing ``}``.

Supported keywords: ``type`` (a name or a list), ``properties``, ``required``,
``additionalProperties`` (false, or a schema for the other keys), ``enum``, ``const``,
``items`` (a schema, or a list as in older drafts), ``prefixItems``, ``anyOf`` and ``oneOf``
(both checked as ``anyOf``: a value is valid when some branch accepts it; a branch is merged
with the keywords beside it), and the boolean schemas ``true``/``false``. Other keywords are
ignored (``$ref`` is not followed: the value it describes is not checked; with
``patternProperties`` any key is allowed). Enum members that are objects or arrays only fix the
type. A key given twice is checked each time.

Strings are compared as UTF-16 (what JSON's ``\\uXXXX`` escapes spell): a key is ruled out at
the escape that no allowed key continues, even inside an escaped surrogate pair.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ._json_stream import (
    ARR_END,
    ARR_START,
    KEY,
    KEY_START,
    LIT_START,
    NUM_PART,
    NUM_START,
    NUMBER,
    OBJ_END,
    OBJ_START,
    STR_PART,
    STR_START,
    STRING,
    JsonEvent,
)

__all__ = [
    "ANY",
    "SchemaChecker",
    "SchemaError",
    "SchemaNode",
    "compile_schema",
    "failure_position",
    "integral_dead_at",
    "prefix_failure",
    "utf16",
]

_KINDS: Final = ("object", "array", "string", "number", "boolean", "null")
_TYPES: Final = frozenset({*_KINDS, "integer"})


class SchemaError(ValueError):
    """A schema that cannot be compiled (a keyword of the supported subset with a bad value)."""


def utf16(text: str) -> bytes:
    """``text`` as UTF-16-LE code units (lone surrogates kept), for prefix comparisons."""
    return text.encode("utf-16-le", "surrogatepass")


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    raise SchemaError(f"not a JSON value: {value!r}")


def _same_scalar(a: Any, b: Any) -> bool:
    """JSON equality of two scalars (``1 == 1.0``, but ``true != 1``)."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return bool(a == b)


@dataclass(frozen=True, eq=False)
class SchemaNode:
    """One compiled schema (see :func:`compile_schema`).

    Attributes:
        kinds: the JSON kinds a value may have (``object``, ``array``, ``string``, ``number``,
            ``boolean``, ``null``): its first character must start one of them.
        integer: numbers must be whole (``type: integer`` without ``number``).
        enum: the allowed values (``enum``/``const``), or None.
        enum_units: the string members of ``enum`` as UTF-16, or None when strings are free.
        properties: the schema of each named key.
        closed: ``additionalProperties: false``: no other key is allowed.
        additional: the schema of the other keys (None: anything).
        required: the keys that must be there.
        items: the schema of array items past ``prefix_items`` (None: anything).
        prefix_items: the schemas of the first items.
        alternatives: ``anyOf``/``oneOf`` branches (each merged with this node's own keywords);
            when set, the node stands for them and its other fields are unused.
    """

    kinds: frozenset[str] = frozenset(_KINDS)
    integer: bool = False
    enum: tuple[Any, ...] | None = None
    enum_units: tuple[bytes, ...] | None = None
    properties: Mapping[str, SchemaNode] = field(default_factory=dict)
    closed: bool = False
    additional: SchemaNode | None = None
    required: tuple[str, ...] = ()
    items: SchemaNode | None = None
    prefix_items: tuple[SchemaNode, ...] = ()
    alternatives: tuple[SchemaNode, ...] | None = None
    key_units: tuple[bytes, ...] = ()

    @property
    def free(self) -> bool:
        """Whether nothing constrains what is inside a container of this schema."""
        return (
            self.alternatives is None
            and not self.properties
            and not self.closed
            and self.additional is None
            and not self.required
            and self.items is None
            and not self.prefix_items
        )

    def expand(self) -> list[SchemaNode]:
        """The plain schemas this one stands for (its ``anyOf`` branches, flattened)."""
        if self.alternatives is None:
            return [self]
        out: list[SchemaNode] = []
        for alt in self.alternatives:
            out.extend(alt.expand())
        return out

    def describe(self) -> str:
        """The kinds allowed, for messages (``integer`` for whole numbers)."""
        names = [("integer" if k == "number" and self.integer else k) for k in _KINDS if k in self.kinds]
        return " or ".join(names) if names else "nothing (the schema is false)"


ANY: Final = SchemaNode()
"""The schema that accepts every value."""

_NOTHING: Final = SchemaNode(kinds=frozenset())


def compile_schema(schema: Any, where: str = "schema") -> SchemaNode:
    """Compile a JSON schema (a mapping, or True/False) into a :class:`SchemaNode`.

    Raises:
        SchemaError: a supported keyword has a value of the wrong shape (the message names
            where, as ``where`` followed by the keyword path).
    """
    if schema is True:
        return ANY
    if schema is False:
        return _NOTHING
    if not isinstance(schema, Mapping):
        raise SchemaError(f"{where}: a schema is a mapping (or true/false), got {type(schema).__name__}")
    for word in ("anyOf", "oneOf"):
        branches = schema.get(word)
        if branches is not None:
            if not isinstance(branches, (list, tuple)) or not branches:
                raise SchemaError(f"{where}.{word}: expected a non-empty list of schemas")
            rest = {k: v for k, v in schema.items() if k != word}
            return SchemaNode(
                alternatives=tuple(
                    compile_schema(_merge(rest, b, f"{where}.{word}[{i}]"), f"{where}.{word}[{i}]")
                    for i, b in enumerate(branches)
                )
            )
    kinds = set(_KINDS)
    integer = False
    if "type" in schema:
        types = schema["type"]
        names = [types] if isinstance(types, str) else types
        if not isinstance(names, (list, tuple)) or not all(isinstance(t, str) for t in names):
            raise SchemaError(f"{where}.type: expected a type name or a list of them, got {types!r}")
        bad = [t for t in names if t not in _TYPES]
        if bad:
            raise SchemaError(f"{where}.type: unknown type {bad[0]!r} (known: {', '.join(sorted(_TYPES))})")
        kinds = {("number" if t == "integer" else t) for t in names}
        integer = "integer" in names and "number" not in names
    enum: tuple[Any, ...] | None = None
    if "const" in schema:
        enum = (schema["const"],)
    if "enum" in schema:
        members = schema["enum"]
        if not isinstance(members, (list, tuple)):
            raise SchemaError(f"{where}.enum: expected a list, got {type(members).__name__}")
        enum = tuple(members) if enum is None else tuple(m for m in enum if m in members)
    enum_units: tuple[bytes, ...] | None = None
    if enum is not None:
        kinds &= {_kind_of(m) for m in enum}
        enum_units = tuple(utf16(m) for m in enum if isinstance(m, str))
    properties: dict[str, SchemaNode] = {}
    props = schema.get("properties", {})
    if not isinstance(props, Mapping):
        raise SchemaError(f"{where}.properties: expected a mapping, got {type(props).__name__}")
    for key, sub in props.items():
        if not isinstance(key, str):
            raise SchemaError(f"{where}.properties: keys are strings, got {key!r}")
        properties[key] = compile_schema(sub, f"{where}.properties.{key}")
    required = schema.get("required", [])
    if not isinstance(required, (list, tuple)) or not all(isinstance(r, str) for r in required):
        raise SchemaError(f"{where}.required: expected a list of key names, got {required!r}")
    extra = schema.get("additionalProperties", True)
    closed = extra is False and "patternProperties" not in schema
    additional: SchemaNode | None = None
    if not isinstance(extra, bool):
        additional = compile_schema(extra, f"{where}.additionalProperties")
        if "patternProperties" in schema:
            additional = None
    items: SchemaNode | None = None
    prefix: list[SchemaNode] = []
    raw_items = schema.get("items")
    if isinstance(raw_items, (list, tuple)):  # the tuple form of older drafts
        prefix = [compile_schema(s, f"{where}.items[{i}]") for i, s in enumerate(raw_items)]
        more = schema.get("additionalItems", True)
        items = None if more is True else compile_schema(more, f"{where}.additionalItems")
    elif raw_items is not None:
        items = compile_schema(raw_items, f"{where}.items")
    if "prefixItems" in schema:
        raw_prefix = schema["prefixItems"]
        if not isinstance(raw_prefix, (list, tuple)):
            raise SchemaError(f"{where}.prefixItems: expected a list of schemas")
        prefix = [compile_schema(s, f"{where}.prefixItems[{i}]") for i, s in enumerate(raw_prefix)]
    return SchemaNode(
        kinds=frozenset(kinds),
        integer=integer,
        enum=enum,
        enum_units=enum_units if enum is not None and "string" in kinds else None,
        properties=properties,
        closed=closed,
        additional=additional,
        required=tuple(dict.fromkeys(required)),
        items=items,
        prefix_items=tuple(prefix),
        key_units=tuple(utf16(k) for k in properties),
    )


def _merge(base: Mapping[str, Any], branch: Any, where: str) -> Any:
    """A branch of ``anyOf``/``oneOf`` together with the keywords beside it."""
    if branch is False or not base:
        return branch
    if branch is True:
        return dict(base)
    if not isinstance(branch, Mapping):
        raise SchemaError(f"{where}: a schema is a mapping (or true/false), got {type(branch).__name__}")
    merged = dict(base)
    for key, value in branch.items():
        if key == "type" and "type" in base:
            a = [base["type"]] if isinstance(base["type"], str) else list(base["type"])
            b = [value] if isinstance(value, str) else list(value)
            both = [t for t in b if t in a or (t == "integer" and "number" in a)]
            both += [t for t in a if t == "integer" and "number" in b and t not in both]
            merged["type"] = both
        elif key == "required" and "required" in base:
            merged["required"] = [*base["required"], *value]
        elif key == "properties" and "properties" in base:
            merged["properties"] = {**base["properties"], **value}
        elif key == "enum" and "enum" in base:
            merged["enum"] = [m for m in value if m in base["enum"]]
        else:
            merged[key] = value
    return merged


# -- positions ----------------------------------------------------------------------------------
_SHORT_ESCAPES: Final = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}


def failure_position(
    raw: str, start: int, old: bytes, candidates: tuple[bytes, ...], pending: str = ""
) -> int | None:
    """Where a string stops being the start of any candidate.

    ``raw`` is string text as written (whole characters and escapes) at ``start``, following the
    UTF-16 prefix ``old`` (which some candidate starts with); ``pending`` is the start of an
    escape still open after it. Returns the position of the first character after which no
    candidate (UTF-16) can follow, even within an escape (``\\u00e`` already rules out ``t``,
    U+0074), or None when one still can.
    """
    prefix = old
    live = [c for c in candidates if c.startswith(prefix)]
    text = raw + pending
    n = len(text)
    i = 0
    while i < n:
        c = text[i]
        if c != "\\":
            unit = utf16(c)
            longer = [x for x in live if x.startswith(unit, len(prefix))]
            if not longer:
                return start + i
            prefix += unit
            live = longer
            i += 1
            continue
        at = len(prefix)
        live = [x for x in live if len(x) > at]  # an escape adds a character
        if not live:
            return start + i
        if i + 1 == n:
            return None
        kind = text[i + 1]
        if kind != "u":
            unit = utf16(_SHORT_ESCAPES.get(kind, kind))
            live = [x for x in live if x.startswith(unit, at)]
            if not live:
                return start + i + 1
            prefix += unit
            i += 2
            continue
        digits = text[i + 2 : i + 6].lower()
        for k in range(1, len(digits) + 1):
            live = [
                x
                for x in live
                if format(int.from_bytes(x[at : at + 2], "little"), "04x").startswith(digits[:k])
            ]
            if not live:
                return start + i + 1 + k
        if len(digits) < 4:
            return None
        prefix += int(digits, 16).to_bytes(2, "little")
        i += 6
    return None


def prefix_failure(
    old: bytes, piece: str, raw: str | None, start: int, candidates: tuple[bytes, ...], pending: str = ""
) -> tuple[bytes, int | None]:
    """Extend the UTF-16 prefix ``old`` by ``piece`` (decoded; ``raw`` as written, None when the
    same, at ``start``; ``pending``: an escape still open after it): the new prefix, and the
    position at which no candidate continues it (None while one does)."""
    prefix = old + utf16(piece)
    if any(c.startswith(prefix) for c in candidates) and (
        not pending or failure_position("", start, prefix, candidates, pending) is None
    ):
        return prefix, None
    return prefix, failure_position(piece if raw is None else raw, start, old, candidates, pending)


_NUMBER_PARTS = re.compile(r"-?([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?)([0-9]*))?")


def integral_dead_at(raw: str) -> int | None:
    """The index of the first character of ``raw`` (a number, or the start of one) after which
    no continuation is a whole number; None while one still is."""
    if "e" not in raw and "E" not in raw:
        return None  # an exponent can still make it whole
    m = _NUMBER_PARTS.match(raw)
    if m is None or m.group(3) != "-":
        return None  # a positive exponent can still grow
    digits = m.group(1) + (m.group(2) or "")
    if not digits.strip("0"):
        return None  # zero
    limit = len(digits) - len(digits.rstrip("0")) - len(m.group(2) or "")
    if limit < 0:
        return m.start(4) - 1  # the '-' of the exponent
    value = 0
    for k, d in enumerate(m.group(4)):
        value = value * 10 + ord(d) - 48
        if value > limit:
            return m.start(4) + k
    return None


# -- the checker --------------------------------------------------------------------------------
_Alt = tuple[SchemaNode, int]  # a schema the value may follow, and the index of its parent's alternative

_FIRST_KIND: Final = {
    OBJ_START: "object",
    ARR_START: "array",
    STR_START: "string",
    NUM_START: "number",
}


class _Frame:
    __slots__ = ("alts", "count", "is_object", "key", "seen")

    def __init__(self, is_object: bool, alts: list[_Alt]) -> None:
        self.is_object = is_object
        self.alts = alts
        self.key: str | None = None
        self.seen: set[str] = set()
        self.count = 0  # items started (arrays)


class SchemaChecker:
    """Follows one JSON value's events and reports the first violation of a schema.

    Feed it every event of the value (from a :class:`~._json_stream.JsonStream` with
    ``detail=True``); :meth:`feed` returns ``(position, message)`` at the first violation (and
    None until then; nothing after it).
    """

    __slots__ = (
        "_cur",
        "_frames",
        "_in_key",
        "_nexp",
        "_nraw",
        "_parted",
        "_root",
        "_skip",
        "_units",
        "violation",
    )

    def __init__(self, schema: SchemaNode) -> None:
        self._root: list[_Alt] = [(schema, 0)]
        self._frames: list[_Frame] = []
        self._cur: list[_Alt] = []  # the scalar in progress: the schemas it may follow
        self._in_key = False
        self._units = b""
        self._parted = False
        self._nraw: list[str] = []
        self._skip = 0  # containers open inside one whose contents nothing constrains
        self._nexp = False
        self.violation: tuple[int, str] | None = None

    # -- helpers ------------------------------------------------------------------------------
    def _path(self) -> str:
        out = "$"
        for frame in self._frames:
            if frame.is_object:
                if frame.key is not None:
                    out += f".{frame.key}" if frame.key.isidentifier() else f"[{frame.key!r}]"
            else:
                out += f"[{frame.count - 1}]"
        return out

    def _fail(self, pos: int, message: str) -> tuple[int, str]:
        self.violation = (pos, f"{self._path()}: {message}")
        return self.violation

    def _child_alts(self) -> list[_Alt]:
        if not self._frames:
            return [(alt, 0) for alt in self._root[0][0].expand()]
        frame = self._frames[-1]
        out: list[_Alt] = []
        if frame.is_object:
            key = frame.key
            for p, (node, _) in enumerate(frame.alts):
                sub = node.properties.get(key) if key is not None else None
                if sub is None:
                    sub = node.additional or ANY
                out.extend((alt, p) for alt in sub.expand())
        else:
            index = frame.count
            frame.count += 1
            for p, (node, _) in enumerate(frame.alts):
                if index < len(node.prefix_items):
                    sub = node.prefix_items[index]
                else:
                    sub = node.items or ANY
                out.extend((alt, p) for alt in sub.expand())
        return out

    def _restrict_parent(self, alts: list[_Alt]) -> None:
        if self._frames:
            frame = self._frames[-1]
            alive = {p for _, p in alts}
            if len(alive) < len(frame.alts):
                frame.alts = [a for i, a in enumerate(frame.alts) if i in alive]

    def _start_value(self, kind: str, pos: int) -> list[_Alt] | None:
        cands = self._child_alts()
        ok = [a for a in cands if kind in a[0].kinds]
        if not ok:
            names = " or ".join(dict.fromkeys(n.describe() for n, _ in cands))
            self._fail(pos, f"expected {names}, got {kind}")
            return None
        return ok

    def _prefix_check(
        self,
        alts: list[_Alt],
        units_of: Callable[[SchemaNode], tuple[bytes, ...] | None],
        piece: str,
        raw: str | None,
        start: int,
        what: str,
        pending: str = "",
    ) -> list[_Alt] | None:
        """Extend the string in progress by ``piece`` (and an escape ``pending`` after it); keep
        the alternatives some allowed string of which it still starts; None (and the violation)
        when none is left."""
        if all(units_of(alt[0]) is None for alt in alts):
            return alts  # any string will do (and will, as it grows: the alternatives only shrink)
        old = self._units
        prefix = old + utf16(piece)
        self._units = prefix
        alive: list[_Alt] = []
        pool: list[bytes] = []
        for alt in alts:
            cands = units_of(alt[0])
            if cands is None:
                alive.append(alt)
            elif any(c.startswith(prefix) for c in cands) and (
                not pending or failure_position("", start, prefix, cands, pending) is None
            ):
                alive.append(alt)
            else:
                pool.extend(cands)
        if alive:
            return alive
        pos = failure_position(piece if raw is None else raw, start, old, tuple(pool), pending)
        if pos is None:  # cannot happen: some candidate would continue the prefix
            pos = start + len(piece if raw is None else raw)
        allowed = sorted({c.decode("utf-16-le", "surrogatepass") for c in pool})
        shown = (piece if raw is None else raw) + pending
        shown = old.decode("utf-16-le", "surrogatepass") + shown[: pos - start + 1]
        listing = ", ".join(repr(a) for a in allowed[:8]) + (", ..." if len(allowed) > 8 else "")
        self._fail(pos, f"{what} {shown!r}... matches none of {listing}")
        return None

    # -- events -------------------------------------------------------------------------------
    def feed(self, event: JsonEvent) -> tuple[int, str] | None:
        """Follow one event; the violation it reveals, if any."""
        if self.violation is not None:
            return None
        kind = event[0]
        if self._skip:
            if kind == OBJ_START or kind == ARR_START:
                self._skip += 1
            elif kind == OBJ_END or kind == ARR_END:
                self._skip -= 1
                if not self._skip:
                    self._restrict_parent(self._frames.pop().alts)
            return None
        if kind == KEY_START:
            frame = self._frames[-1]
            alive = [a for a in frame.alts if not a[0].closed or a[0].properties]
            if not alive:
                return self._fail(event[1], "no key is allowed here (additionalProperties is false)")
            frame.alts = alive
            frame.key = None
            self._in_key = True
            self._units = b""
            self._parted = False
            return None
        if kind == STR_PART:
            self._parted = True
            if self._in_key:
                frame = self._frames[-1]
                kept = self._prefix_check(
                    frame.alts, _key_units, event[3], event[4], event[1], "key", event[5]
                )
                if kept is None:
                    return self.violation
                frame.alts = kept
            else:
                kept = self._prefix_check(
                    self._cur, _enum_units, event[3], event[4], event[1], "value", event[5]
                )
                if kept is None:
                    return self.violation
                self._cur = kept
            return None
        if kind == KEY:
            frame = self._frames[-1]
            key = event[3]
            if not self._parted:
                kept = self._prefix_check(frame.alts, _key_units, key, event[4], event[1] + 1, "key")
                if kept is None:
                    return self.violation
                frame.alts = kept
            alive = [a for a in frame.alts if not a[0].closed or key in a[0].properties]
            if not alive:
                allowed = sorted({k for n, _ in frame.alts for k in n.properties})
                return self._fail(
                    event[2] - 1, f"key {key!r} is not allowed (allowed: {', '.join(map(repr, allowed))})"
                )
            frame.alts = alive
            frame.key = key
            frame.seen.add(key)
            self._in_key = False
            return None
        if kind == STR_START or kind == NUM_START:
            ok = self._start_value(_FIRST_KIND[kind], event[1])
            if ok is None:
                return self.violation
            self._cur = ok
            self._units = b""
            self._parted = False
            self._nraw = []
            self._nexp = False
            return None
        if kind == STRING:
            value = event[3]
            if not self._parted:
                kept = self._prefix_check(self._cur, _enum_units, value, event[4], event[1] + 1, "value")
                if kept is None:
                    return self.violation
                self._cur = kept
            alive = [a for a in self._cur if a[0].enum_units is None or utf16(value) in a[0].enum_units]
            if not alive:
                return self._fail(event[2] - 1, f"{value!r} is not one of the allowed values")
            self._restrict_parent(alive)
            return None
        if kind == NUM_PART:
            self._nraw.append(event[3])
            if any(a[0].integer for a in self._cur) and ("e" in event[3] or "E" in event[3] or self._nexp):
                self._nexp = True  # only an exponent can rule out a whole number
                raw = "".join(self._nraw)
                dead = integral_dead_at(raw)
                if dead is not None:
                    return self._drop_fractional(event[2] - len(raw) + dead)
            return None
        if kind == NUMBER:
            raw = event[4]
            value = event[3]
            if any(a[0].integer for a in self._cur):
                dead = integral_dead_at(raw)
                if dead is not None:
                    if self._drop_fractional(event[1] + dead) is not None:
                        return self.violation
                whole = isinstance(value, int) or value.is_integer()
                if not whole:
                    alive = [a for a in self._cur if not a[0].integer]
                    if not alive:
                        return self._fail(event[2], f"{raw} is not a whole number (integer expected)")
                    self._cur = alive
            alive = [
                a for a in self._cur if a[0].enum is None or any(_same_scalar(value, m) for m in a[0].enum)
            ]
            if not alive:
                return self._fail(event[2], f"{raw} is not one of the allowed values")
            self._restrict_parent(alive)
            return None
        if kind == LIT_START:
            value = event[2]
            ok = self._start_value("null" if value is None else "boolean", event[1])
            if ok is None:
                return self.violation
            alive = [a for a in ok if a[0].enum is None or any(_same_scalar(value, m) for m in a[0].enum)]
            if not alive:
                word = "null" if value is None else str(value).lower()
                return self._fail(event[1], f"{word} is not one of the allowed values")
            self._restrict_parent(alive)
            return None
        if kind == OBJ_START or kind == ARR_START:
            ok = self._start_value(_FIRST_KIND[kind], event[1])
            if ok is None:
                return self.violation
            self._frames.append(_Frame(kind == OBJ_START, ok))
            if all(a[0].free for a in ok):
                self._skip = 1  # nothing inside can be wrong: follow the brackets only
            return None
        if kind == OBJ_END:
            frame = self._frames[-1]
            seen = frame.seen
            alive = [a for a in frame.alts if all(r in seen for r in a[0].required)]
            if not alive:
                missing = sorted({r for n, _ in frame.alts for r in n.required if r not in seen})
                frame.key = None
                return self._fail(event[1], f"missing required key(s): {', '.join(map(repr, missing))}")
            self._frames.pop()
            self._restrict_parent(alive)
            return None
        if kind == ARR_END:
            frame = self._frames.pop()
            self._restrict_parent(frame.alts)
            return None
        # LITERAL: decided at its first letter (LIT_START); ERROR: not the checker's business
        return None

    def _drop_fractional(self, pos: int) -> tuple[int, str] | None:
        alive = [a for a in self._cur if not a[0].integer]
        if not alive:
            return self._fail(pos, "the number cannot be whole any more (integer expected)")
        self._cur = alive
        return None


def _key_units(node: SchemaNode) -> tuple[bytes, ...] | None:
    return node.key_units if node.closed else None


def _enum_units(node: SchemaNode) -> tuple[bytes, ...] | None:
    return node.enum_units
