"""The tools a call may name: :class:`Tool` and :func:`compile_tools` (an OpenAI tools list, each
schema compiled once per distinct schema)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ._json_schema import ANY, SchemaError, SchemaNode, compile_schema

__all__ = ["Tool", "compile_tools"]


@dataclass(frozen=True)
class Tool:
    """A tool a call may name: its name and compiled parameter schema."""

    name: str
    schema: SchemaNode
    parameters: Mapping[str, Any] | None = None


def compile_tools(tools: Iterable[Any] | None, owner: str = "tool_calls") -> dict[str, Tool] | None:
    """``{name: Tool}`` from an OpenAI tools list (``[{"type": "function", "function": {"name",
    "description", "parameters"}}]``; the flat ``{"type": "function", "name", "parameters"}`` is
    taken too), or None for None (any name, no schema).

    Raises:
        TypeError / ValueError: a bad entry (the message names it: ``tools[2]``), a schema that
            does not compile, or a name given twice.
    """
    if tools is None:
        return None
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Iterable):
        raise TypeError(f"{owner}: tools must be a list of tool definitions, got {type(tools).__name__}")
    out: dict[str, Tool] = {}
    for i, entry in enumerate(tools):
        where = f"{owner}: tools[{i}]"
        if isinstance(entry, Tool):
            tool = entry
        else:
            if not isinstance(entry, Mapping):
                raise TypeError(f"{where}: expected a mapping, got {type(entry).__name__}")
            kind = entry.get("type", "function")
            if kind != "function":
                raise ValueError(f"{where}: only type 'function' is supported, got {kind!r}")
            spec = entry.get("function", entry)
            if not isinstance(spec, Mapping):
                raise TypeError(f"{where}: 'function' must be a mapping, got {type(spec).__name__}")
            name = spec.get("name")
            if not isinstance(name, str) or not name:
                raise ValueError(f"{where}: the function needs a non-empty string 'name', got {name!r}")
            params = spec.get("parameters")
            if params is None:
                schema = ANY
            else:
                try:
                    schema = _schema(params)
                except SchemaError as exc:
                    raise ValueError(f"{where} ({name}): {exc}") from None
            tool = Tool(name, schema, params)
        if tool.name in out:
            raise ValueError(f"{where}: tool {tool.name!r} is defined twice")
        out[tool.name] = tool
    return out


def _schema(params: Any) -> SchemaNode:
    """``params`` compiled, once per distinct schema: a server compiles each request's tools when
    it checks them and again for its pipeline, and clients send the same tools again and again."""
    try:
        key = json.dumps(params, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):  # not JSON (a tuple key, a set...): compiled each time
        return compile_schema(params, "parameters")
    return _schema_of(key)


@functools.lru_cache(maxsize=128)
def _schema_of(key: str) -> SchemaNode:
    return compile_schema(json.loads(key), "parameters")
