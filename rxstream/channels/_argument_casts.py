"""Tool-call arguments cast by the calling tool's JSON schema: an argument that stayed a string
becomes the integer, number, boolean, null, array or object its parameter declares
(:class:`ToolSchemas`)."""

from __future__ import annotations

import inspect
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ._json_stream import loads_bounded

__all__ = ["ToolSchemas", "coerce_argument", "schema_types"]


def schema_types(schema: Any) -> tuple[str, ...]:
    """The JSON types a parameter schema allows, in order (``type``, its list, ``anyOf``/``oneOf``
    choices, ``"null"`` for ``nullable``); ``()`` when it says none."""
    if not isinstance(schema, Mapping):
        return ()
    declared = schema.get("type")
    found: list[str] = []
    if isinstance(declared, str):
        found.append(declared)
    elif isinstance(declared, list):
        found += [t for t in declared if isinstance(t, str)]
    for union in ("anyOf", "oneOf"):
        for choice in schema.get(union) or []:
            found += schema_types(choice)
    if schema.get("nullable") and "null" not in found:
        found.append("null")
    return tuple(found)


def _cast(raw: str, kind: str) -> tuple[bool, Any]:
    """``(True, value)`` when ``raw`` reads as JSON type ``kind``, else ``(False, None)``."""
    if kind == "integer":
        try:
            return True, int(raw)
        except ValueError:
            number = float(raw)  # "3.0" is an integer too
            return (True, int(number)) if number.is_integer() else (False, None)
    if kind == "number":
        number = float(raw)
        if math.isnan(number) or math.isinf(number):
            return False, None
        return True, (int(number) if number.is_integer() and "." not in raw else number)
    if kind == "boolean":
        word = raw.strip().lower()
        return (True, word in ("true", "1")) if word in ("true", "1", "false", "0") else (False, None)
    if kind == "null":
        return (True, None) if raw.strip() in ("null", "None") else (False, None)
    if kind in ("object", "array"):
        decoded = loads_bounded(raw)
        return (True, decoded) if isinstance(decoded, dict if kind == "object" else list) else (False, None)
    return False, None  # "string" and unknown types keep the text


def coerce_argument(raw: str, kinds: Iterable[str]) -> Any:
    """``raw`` cast to the first of ``kinds`` (JSON schema types) it reads as, else ``raw``."""
    for kind in kinds:
        try:
            ok, value = _cast(raw, kind)
        except ValueError:
            continue
        if ok:
            return value
    return raw


_PY_TYPES: Mapping[Any, str] = {
    int: "integer",
    float: "number",
    bool: "boolean",
    str: "string",
    list: "array",
    tuple: "array",
    dict: "object",
    type(None): "null",
}


def _hint_schema(hint: Any) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        parts = [_hint_schema(a) for a in typing.get_args(hint) if a is not type(None)]
        nullable = type(None) in typing.get_args(hint)
        out: dict[str, Any] = parts[0] if len(parts) == 1 else {"anyOf": parts}
        if nullable:
            out = {**out, "nullable": True}
        return out
    kind = _PY_TYPES.get(origin if origin is not None else hint)
    return {"type": kind} if kind is not None else {}


def _function_properties(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        hints = typing.get_type_hints(fn)
    except (NameError, TypeError):
        hints = {}
    props: dict[str, Any] = {}
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        props[name] = _hint_schema(hints.get(name, Any))
    return props


class ToolSchemas:
    """Tool parameter schemas by tool name, to cast tool-call arguments that stayed strings.

    ``tools`` is what a chat template takes: ``{"type": "function", "function": {"name": ...,
    "parameters": {"type": "object", "properties": {...}}}}`` (or the inner function object), or a
    Python function (its parameters' type hints give the schema).
    """

    def __init__(self, tools: Iterable[Any] | None) -> None:
        self.params: dict[str, Mapping[str, Any]] = {}
        for tool in tools or ():
            if inspect.isfunction(tool) or inspect.ismethod(tool):
                self.params[tool.__name__] = _function_properties(tool)
                continue
            fn = tool.get("function", tool) if isinstance(tool, Mapping) else None
            if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
                parameters = fn.get("parameters")
                props = parameters.get("properties") if isinstance(parameters, Mapping) else None
                self.params[fn["name"]] = props if isinstance(props, Mapping) else {}

    def __bool__(self) -> bool:
        return bool(self.params)

    def coerce(self, value: Any) -> Any:
        """Cast the string arguments of a tool call (or of each call in a list) in place, by the
        named tool's schema; values that are not tool calls are returned as they are."""
        if isinstance(value, list):
            return [self.coerce(item) for item in value]
        fn = value.get("function") if isinstance(value, dict) else None
        if not isinstance(fn, dict):
            return value
        name, arguments = fn.get("name"), fn.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return value
        props = self.params.get(name)
        if not props:
            return value
        for key, argument in arguments.items():
            kinds = schema_types(props[key]) if key in props else ()
            if not kinds:
                continue
            if isinstance(argument, str):
                arguments[key] = coerce_argument(argument, kinds)
            elif isinstance(argument, list) and "array" not in kinds:  # repeated keys, merged
                arguments[key] = [coerce_argument(a, kinds) if isinstance(a, str) else a for a in argument]
        return value
