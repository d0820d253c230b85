"""Following one JSON value's events against a compiled schema: :class:`SchemaChecker` reports the
first character after which no completion is valid (see :mod:`._json_schema`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

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
from ._schema_node import ANY, SchemaNode, _same_scalar, utf16
from ._schema_prefix import failure_position, integral_dead_at

__all__ = ["SchemaChecker"]

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
        on = _ON_EVENT.get(kind)
        # LITERAL: decided at its first letter (LIT_START); ERROR: not the checker's business
        return None if on is None else on(self, event)

    def _on_key_start(self, event: JsonEvent) -> tuple[int, str] | None:
        """A key starts: some alternative must allow a key here."""
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

    def _on_str_part(self, event: JsonEvent) -> tuple[int, str] | None:
        """More of a key or a string value: some allowed key or member must still start with it."""
        self._parted = True
        if self._in_key:
            frame = self._frames[-1]
            kept = self._prefix_check(frame.alts, _key_units, event[3], event[4], event[1], "key", event[5])
            if kept is None:
                return self.violation
            frame.alts = kept
        else:
            kept = self._prefix_check(self._cur, _enum_units, event[3], event[4], event[1], "value", event[5])
            if kept is None:
                return self.violation
            self._cur = kept
        return None

    def _on_key(self, event: JsonEvent) -> tuple[int, str] | None:
        """A key is complete: some alternative must allow it."""
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

    def _on_scalar_start(self, event: JsonEvent) -> tuple[int, str] | None:
        """A string or a number starts: some alternative must allow its type."""
        kind = event[0]
        ok = self._start_value(_FIRST_KIND[kind], event[1])
        if ok is None:
            return self.violation
        self._cur = ok
        self._units = b""
        self._parted = False
        self._nraw = []
        self._nexp = False
        return None

    def _on_string(self, event: JsonEvent) -> tuple[int, str] | None:
        """A string value is complete: some alternative must allow it (its enum)."""
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

    def _on_num_part(self, event: JsonEvent) -> tuple[int, str] | None:
        """More of a number: an integer may be ruled out by its exponent already."""
        self._nraw.append(event[3])
        if any(a[0].integer for a in self._cur) and ("e" in event[3] or "E" in event[3] or self._nexp):
            self._nexp = True  # only an exponent can rule out a whole number
            raw = "".join(self._nraw)
            dead = integral_dead_at(raw)
            if dead is not None:
                return self._drop_fractional(event[2] - len(raw) + dead)
        return None

    def _on_number(self, event: JsonEvent) -> tuple[int, str] | None:
        """A number is settled: whole where an integer is needed, and in the enum."""
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
        alive = [a for a in self._cur if a[0].enum is None or any(_same_scalar(value, m) for m in a[0].enum)]
        if not alive:
            return self._fail(event[2], f"{raw} is not one of the allowed values")
        self._restrict_parent(alive)
        return None

    def _on_lit_start(self, event: JsonEvent) -> tuple[int, str] | None:
        """``true``, ``false`` or ``null`` starts (its first letter decides it)."""
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

    def _on_container_start(self, event: JsonEvent) -> tuple[int, str] | None:
        """An object or an array starts: some alternative must allow its type."""
        kind = event[0]
        ok = self._start_value(_FIRST_KIND[kind], event[1])
        if ok is None:
            return self.violation
        self._frames.append(_Frame(kind == OBJ_START, ok))
        if all(a[0].free for a in ok):
            self._skip = 1  # nothing inside can be wrong: follow the brackets only
        return None

    def _on_obj_end(self, event: JsonEvent) -> tuple[int, str] | None:
        """An object ends: every required key of some alternative must have come."""
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

    def _on_arr_end(self, event: JsonEvent) -> tuple[int, str] | None:
        """An array ends."""
        frame = self._frames.pop()
        self._restrict_parent(frame.alts)
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


_ON_EVENT: Final[dict[int, Callable[[SchemaChecker, JsonEvent], tuple[int, str] | None]]] = {
    KEY_START: SchemaChecker._on_key_start,
    STR_PART: SchemaChecker._on_str_part,
    KEY: SchemaChecker._on_key,
    STR_START: SchemaChecker._on_scalar_start,
    NUM_START: SchemaChecker._on_scalar_start,
    STRING: SchemaChecker._on_string,
    NUM_PART: SchemaChecker._on_num_part,
    NUMBER: SchemaChecker._on_number,
    LIT_START: SchemaChecker._on_lit_start,
    OBJ_START: SchemaChecker._on_container_start,
    ARR_START: SchemaChecker._on_container_start,
    OBJ_END: SchemaChecker._on_obj_end,
    ARR_END: SchemaChecker._on_arr_end,
}
"""The handler of each event kind the checker follows."""
