"""Tool calling in requests: ``tools``, ``tool_choice``, ``parallel_tool_calls``, and the chat
messages that carry tool calls (assistant ``tool_calls``) and their results (``tool`` messages).

Every parser raises :class:`~rxstream.server.RequestError` (a one-line 400 naming the field).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..channels import compile_tools
from ..chat import TOOL_NAME, ToolChoice
from ._errors import RequestError
from ._limits import ServerLimits

__all__ = [
    "ToolChoice",
    "parse_assistant_tool_calls",
    "parse_parallel_tool_calls",
    "parse_tool_choice",
    "parse_tools",
]


_SCHEMA_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters (error messages stay one short line)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_schema(schema: Any, where: str, depth: int = 0) -> None:
    """A JSON Schema, checked as far as a wrong one would mislead the model or the parser."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, Mapping):
        raise RequestError(f"{where} must be a JSON Schema object, got {_short(schema)}", param=where)
    if depth > 32:
        raise RequestError(f"{where} is nested too deeply", param=where)
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    for k in kinds:
        if k not in _SCHEMA_TYPES:
            raise RequestError(f"{where}.type: unknown JSON Schema type {_short(k)}", param=f"{where}.type")
    props = schema.get("properties")
    if props is not None:
        if not isinstance(props, Mapping):
            raise RequestError(f"{where}.properties must be an object", param=f"{where}.properties")
        for key, sub in props.items():
            _check_schema(sub, f"{where}.properties.{key}", depth + 1)
    required = schema.get("required")
    if required is not None and not (
        isinstance(required, list) and all(isinstance(r, str) for r in required)
    ):
        raise RequestError(f"{where}.required must be a list of strings", param=f"{where}.required")
    items = schema.get("items")
    if items is not None:
        _check_schema(items, f"{where}.items", depth + 1)


def parse_tools(body: Mapping[str, Any], limits: ServerLimits) -> tuple[dict[str, Any], ...]:
    """``tools``: OpenAI function tools, checked; returned as plain objects (the chat template and
    the tool-call parser read them).

    ``[{"type": "function", "function": {"name": ..., "description": ..., "parameters": {...},
    "strict": bool}}, ...]``; names match ``[A-Za-z0-9_-]{1,64}`` and are unique.
    """
    raw = body.get("tools")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RequestError(f"'tools' must be a list of function tools, got {_short(raw)}", param="tools")
    if len(raw) > limits.max_tools:
        raise RequestError(f"at most {limits.max_tools} tools are allowed, got {len(raw)}", param="tools")
    out: list[dict[str, Any]] = []
    names: set[str] = set()
    for i, tool in enumerate(raw):
        where = f"tools[{i}]"
        if not isinstance(tool, Mapping):
            raise RequestError(f"{where} must be an object, got {_short(tool)}", param=where)
        unknown = set(tool) - {"type", "function"}
        if unknown:
            raise RequestError(f"{where}: unknown fields {sorted(unknown)}", param=where)
        if tool.get("type") != "function":
            raise RequestError(
                f"{where}.type must be 'function', got {_short(tool.get('type'))}", param=f"{where}.type"
            )
        fn = tool.get("function")
        if not isinstance(fn, Mapping):
            raise RequestError(f"{where}.function must be an object", param=f"{where}.function")
        unknown = set(fn) - {"name", "description", "parameters", "strict"}
        if unknown:
            raise RequestError(
                f"{where}.function: unknown fields {sorted(unknown)}", param=f"{where}.function"
            )
        name = fn.get("name")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise RequestError(
                f"{where}.function.name must be 1 to 64 letters, digits, '_' or '-', got {_short(name)}",
                param=f"{where}.function.name",
            )
        if name in names:
            raise RequestError(
                f"{where}.function.name: {name!r} is given twice", param=f"{where}.function.name"
            )
        names.add(name)
        description = fn.get("description")
        if description is not None and not isinstance(description, str):
            raise RequestError(
                f"{where}.function.description must be a string", param=f"{where}.function.description"
            )
        strict = fn.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise RequestError(f"{where}.function.strict must be a boolean", param=f"{where}.function.strict")
        function: dict[str, Any] = {"name": name}
        if description is not None:
            function["description"] = description
        parameters = fn.get("parameters")
        if parameters is not None:
            _check_schema(parameters, f"{where}.function.parameters")
            if not isinstance(parameters, Mapping) or parameters.get("type", "object") != "object":
                raise RequestError(
                    f'{where}.function.parameters must be an object schema ({{"type": "object", ...}})',
                    param=f"{where}.function.parameters",
                )
            function["parameters"] = parameters
        if strict is not None:
            function["strict"] = strict
        entry = {"type": "function", "function": function}
        try:  # the schema must be one the tool-call parser can check as the arguments stream
            compile_tools([entry], owner=where)
        except (TypeError, ValueError) as exc:
            message = " ".join(str(exc).split())
            raise RequestError(message[:300], param=f"{where}.function.parameters") from None
        out.append(entry)
    return tuple(out)


def parse_tool_choice(body: Mapping[str, Any], tools: tuple[dict[str, Any], ...]) -> ToolChoice:
    """``tool_choice``: ``"auto"`` (the default when tools are given), ``"none"`` (the default
    without), ``"required"``, or ``{"type": "function", "function": {"name": ...}}``."""
    raw = body.get("tool_choice")
    if raw is None:
        return ToolChoice("auto" if tools else "none")
    if raw == "none":
        return ToolChoice("none")
    if raw in ("auto", "required"):
        if not tools:
            raise RequestError(f"tool_choice {raw!r} needs 'tools'", param="tool_choice")
        return ToolChoice(raw)
    if isinstance(raw, Mapping):
        fn = raw.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if raw.get("type") != "function" or not isinstance(name, str) or set(raw) - {"type", "function"}:
            raise RequestError(
                "'tool_choice' must be 'none', 'auto', 'required' or "
                f'{{"type": "function", "function": {{"name": ...}}}}, got {_short(raw)}',
                param="tool_choice",
            )
        known = [t["function"]["name"] for t in tools]
        if name not in known:
            listed = ", ".join(known)
            raise RequestError(
                f"tool_choice names {name!r}, which is not among the tools ({listed})"[:300],
                param="tool_choice",
            )
        return ToolChoice("named", name)
    raise RequestError(
        f"'tool_choice' must be 'none', 'auto', 'required' or a function object, got {_short(raw)}",
        param="tool_choice",
    )


def parse_parallel_tool_calls(body: Mapping[str, Any]) -> bool:
    """``parallel_tool_calls``: True (the default: any number of calls) or False (at most one: the
    generation ends when the first call is complete)."""
    raw = body.get("parallel_tool_calls")
    if raw is None:
        return True
    if not isinstance(raw, bool):
        raise RequestError(
            f"'parallel_tool_calls' must be a boolean, got {_short(raw)}", param="parallel_tool_calls"
        )
    return raw


def parse_assistant_tool_calls(raw: Any, index: int) -> list[dict[str, Any]]:
    """An assistant message's ``tool_calls``: ``[{"id", "type": "function", "function": {"name",
    "arguments": "<JSON object text>"}}]``; the arguments are decoded (chat templates take them as
    objects, as Hugging Face's convention is)."""
    where = f"messages[{index}].tool_calls"
    if not isinstance(raw, list) or not raw:
        raise RequestError(f"{where} must be a non-empty list", param=where)
    calls: list[dict[str, Any]] = []
    for k, call in enumerate(raw):
        at = f"{where}[{k}]"
        if not isinstance(call, Mapping):
            raise RequestError(f"{at} must be an object", param=at)
        unknown = set(call) - {"id", "type", "function", "index"}
        if unknown:
            raise RequestError(f"{at}: unknown fields {sorted(unknown)}", param=at)
        cid = call.get("id")
        if not isinstance(cid, str) or not cid:
            raise RequestError(f"{at}.id must be a non-empty string", param=f"{at}.id")
        if call.get("type", "function") != "function":
            raise RequestError(f"{at}.type must be 'function'", param=f"{at}.type")
        fn = call.get("function")
        if not isinstance(fn, Mapping):
            raise RequestError(f"{at}.function must be an object", param=f"{at}.function")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise RequestError(f"{at}.function.name must be a non-empty string", param=f"{at}.function.name")
        args_text = fn.get("arguments")
        if not isinstance(args_text, str):
            raise RequestError(
                f"{at}.function.arguments must be a string of JSON, got {_short(args_text)}",
                param=f"{at}.function.arguments",
            )
        try:
            arguments = json.loads(args_text) if args_text.strip() else {}
        except ValueError as exc:
            raise RequestError(
                f"{at}.function.arguments is not valid JSON: {exc}", param=f"{at}.function.arguments"
            ) from None
        if not isinstance(arguments, dict):
            raise RequestError(
                f"{at}.function.arguments must be a JSON object, got {_short(arguments)}",
                param=f"{at}.function.arguments",
            )
        calls.append({"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}})
    return calls
