"""JSON schemas compiled for incremental checking: :func:`compile_schema` and :class:`SchemaNode`
(the subset tool definitions use; see :mod:`._json_schema` for the keywords)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["ANY", "SchemaError", "SchemaNode", "compile_schema", "utf16"]

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
