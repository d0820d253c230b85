"""A Responses API request (``POST /v1/responses``) read as the chat request it asks for.

:func:`chat_body` checks the Responses fields and turns ``input`` (a string, or message,
``function_call`` and ``function_call_output`` items), ``instructions`` and the flat function
tools into a chat completions body, which :func:`~._requests.validate_request` then checks as
any chat request (sampling, budget, tools, the ``rxstream`` rules). Every field is read or
refused: an unknown field, or a value this server cannot honour, is a 400 naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..structured import OutputFormat, OutputFormatError
from ._errors import RequestError

__all__ = ["ResponsesRequest", "chat_body", "output_messages"]

_FIELDS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "max_output_tokens",
        "temperature",
        "top_p",
        "text",
        "stream",
        "store",
        "previous_response_id",
        "metadata",
        "user",
        "stop",  # rxstream's: stop strings on the answer, as in chat
        "rxstream",  # rxstream's: replace and regex stop rules on the answer
    }
)
"""The fields read (the sampling and rules fields are then checked by the chat request's parsers)."""

_NOOP: dict[str, tuple[Any, ...]] = {
    "truncation": (None, "disabled"),
    "background": (None, False),
    "include": (None, []),
    "max_tool_calls": (None,),
    "service_tier": (None, "auto", "default"),
    "stream_options": (None,),
    "top_logprobs": (None, 0),
}
"""Fields accepted only with a value that asks for nothing."""

_EFFORTS = (None, "minimal", "low", "medium", "high")


@dataclass
class ResponsesRequest:
    """What a Responses request asks beyond its chat body: the fields the response echoes, whether
    to keep it, and the chat messages of its whole conversation (``previous_response_id``'s
    prepended)."""

    echo: dict[str, Any]
    store: bool
    previous: str | None
    messages: list[dict[str, Any]] = field(default_factory=list)


def _where(value: Any, name: str, kind: type | tuple[type, ...], what: str) -> Any:
    if value is not None and ((isinstance(value, bool) and kind is not bool) or not isinstance(value, kind)):
        raise RequestError(f"'{name}' must be {what}, got {value!r}"[:300], param=name)
    return value


def _check_fields(body: Mapping[str, Any]) -> None:
    for name, value in body.items():
        if name in _FIELDS:
            continue
        if name in _NOOP and any(value == v and type(value) is type(v) for v in _NOOP[name] if v is not None):
            continue
        if name in _NOOP and value is None:
            continue
        if name in _NOOP:
            raise RequestError(f"'{name}' is not supported by this server (got {value!r})"[:300], param=name)
        raise RequestError(f"unknown field '{name}'", param=name)


def _text(content: Any, where: str, parts: tuple[str, ...]) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise RequestError(f"{where} must be a string or a list of content parts", param=where)
    out: list[str] = []
    for k, part in enumerate(content):
        if not (
            isinstance(part, Mapping) and part.get("type") in parts and isinstance(part.get("text"), str)
        ):
            raise RequestError(
                f"{where}[{k}]: only {' and '.join(parts)} parts are supported, got {part!r}"[:300],
                param=f"{where}[{k}]",
            )
        out.append(part["text"])
    return "".join(out)


def _input_messages(raw: Any) -> list[dict[str, Any]]:
    """``input`` as chat request messages (function calls join the assistant message before them)."""
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise RequestError("'input' must be a string or a non-empty list of input items", param="input")
    messages: list[dict[str, Any]] = []
    for i, item in enumerate(raw):
        where = f"input[{i}]"
        if not isinstance(item, Mapping):
            raise RequestError(f"{where} must be an object", param=where)
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer", "assistant"):
                raise RequestError(
                    f"{where}.role must be user, system, developer or assistant, got {role!r}"[:300],
                    param=f"{where}.role",
                )
            parts = ("output_text", "input_text") if role == "assistant" else ("input_text",)
            messages.append({"role": role, "content": _text(item.get("content"), f"{where}.content", parts)})
        elif kind == "function_call":
            call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments")
            if not (isinstance(call_id, str) and isinstance(name, str) and isinstance(arguments, str)):
                raise RequestError(
                    f"{where}: a function_call item has string 'call_id', 'name' and 'arguments'", param=where
                )
            call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":  # the calls of the message before
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            call_id, output = item.get("call_id"), item.get("output")
            if not isinstance(call_id, str) or not isinstance(output, str):
                raise RequestError(
                    f"{where}: a function_call_output item has string 'call_id' and 'output'", param=where
                )
            messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
        elif kind == "reasoning":
            continue  # earlier reasoning is not part of the prompt (chat templates drop it too)
        else:
            raise RequestError(f"{where}.type {kind!r} is not supported"[:300], param=f"{where}.type")
    return messages


def _tools(raw: Any) -> list[dict[str, Any]] | None:
    """Flat function tools as chat tools."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise RequestError("'tools' must be a list of function tools", param="tools")
    out = []
    for i, tool in enumerate(raw):
        where = f"tools[{i}]"
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            raise RequestError(f"{where}: only function tools are supported", param=f"{where}.type")
        unknown = set(tool) - {"type", "name", "description", "parameters", "strict"}
        if unknown:
            raise RequestError(f"{where}: unknown fields {sorted(unknown)}", param=where)
        function = {
            k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None
        }
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(raw: Any) -> Any:
    if raw is None or isinstance(raw, str):
        return raw
    if isinstance(raw, Mapping) and raw.get("type") == "function" and set(raw) <= {"type", "name"}:
        return {"type": "function", "function": {"name": raw.get("name")}}
    raise RequestError(
        f"'tool_choice' must be 'none', 'auto', 'required' or {{\"type\": \"function\", \"name\": ...}}, "
        f"got {raw!r}"[:300],
        param="tool_choice",
    )


def _reasoning(raw: Any) -> dict[str, Any]:
    _where(raw, "reasoning", Mapping, "an object")
    raw = raw or {}
    unknown = set(raw) - {"effort", "summary"}
    if unknown:
        raise RequestError(f"reasoning: unknown fields {sorted(unknown)}", param="reasoning")
    if raw.get("effort") not in _EFFORTS:
        raise RequestError(f"'reasoning.effort' must be one of {_EFFORTS[1:]}", param="reasoning.effort")
    if raw.get("summary") is not None:
        raise RequestError(
            "'reasoning.summary' is not supported: reasoning text is sent whole", param="reasoning.summary"
        )
    return {"effort": raw.get("effort"), "summary": None}


def _text_format(raw: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``text.format`` (``text``, ``json_object``, ``json_schema`` with ``name``, ``schema``,
    ``strict``; rxstream's ``regex`` and ``grammar``): what the response echoes, and the chat
    body's ``response_format`` (None for text)."""
    _where(raw, "text", Mapping, "an object")
    raw = raw or {}
    if set(raw) - {"format"}:
        raise RequestError(f"text: unknown fields {sorted(set(raw) - {'format'})}", param="text")
    fmt = raw.get("format") or {"type": "text"}
    if not isinstance(fmt, Mapping):
        raise RequestError(
            "'text.format' must be an object like {'type': 'json_object'}", param="text.format"
        )
    kind = fmt.get("type")
    if kind == "json_schema":
        spec = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        unknown = sorted(set(fmt) - {"type", "name", "schema", "strict", "description"})
        if unknown:
            raise RequestError(f"text.format: unknown fields {unknown}", param="text.format")
        _check_format({"type": "json_schema", "json_schema": spec})
        return {"format": dict(fmt)}, {"type": "json_schema", "json_schema": spec}
    if kind == "text" and set(fmt) == {"type"}:
        return {"format": {"type": "text"}}, None
    _check_format(dict(fmt))
    return {"format": dict(fmt)}, dict(fmt)


def _check_format(fmt: dict[str, Any]) -> None:
    """``text.format`` checked here, so that a bad one is a 400 naming ``text.format...``."""
    try:
        OutputFormat.from_response_format(fmt)
    except OutputFormatError as exc:
        param = exc.field.replace("response_format.json_schema", "text.format")
        message = str(exc).replace("response_format.json_schema", "text.format")
        raise RequestError(
            message.replace("response_format", "text.format"),
            param=param.replace("response_format", "text.format"),
        ) from None


def _metadata(raw: Any) -> dict[str, str]:
    _where(raw, "metadata", Mapping, "an object")
    raw = raw or {}
    if len(raw) > 16 or not all(
        isinstance(k, str) and isinstance(v, str) and len(v) <= 512 for k, v in raw.items()
    ):
        raise RequestError(
            "'metadata' must map at most 16 keys to strings of at most 512 characters", param="metadata"
        )
    return dict(raw)


def chat_body(
    body: Any, previous: list[dict[str, Any]] | None = None
) -> tuple[dict[str, Any], ResponsesRequest]:
    """The chat completions body a Responses request asks for, and what else it asks.

    ``previous``: the chat messages of the response ``previous_response_id`` names (its input and
    output), which come before this request's ``input``.
    """
    if not isinstance(body, Mapping):
        raise RequestError(f"the request body must be a JSON object, got {type(body).__name__}")
    _check_fields(body)
    instructions = _where(body.get("instructions"), "instructions", str, "a string")
    store = _where(body.get("store"), "store", bool, "a boolean")
    prev = _where(body.get("previous_response_id"), "previous_response_id", str, "a string")
    if "input" not in body:
        raise RequestError("'input' is required", param="input")
    messages = [*(previous or []), *_input_messages(body.get("input"))]
    chat: dict[str, Any] = {"messages": [{"role": "system", "content": instructions}, *messages]}
    if instructions is None:
        chat["messages"] = messages
    for name in (
        "model",
        "parallel_tool_calls",
        "temperature",
        "top_p",
        "stream",
        "user",
        "stop",
        "rxstream",
    ):
        if body.get(name) is not None:
            chat[name] = body[name]
    tools = _tools(body.get("tools"))
    if tools is not None:
        chat["tools"] = tools
    choice = _tool_choice(body.get("tool_choice"))
    if choice is not None:
        chat["tool_choice"] = choice
    if body.get("max_output_tokens") is not None:
        chat["max_completion_tokens"] = body["max_output_tokens"]
    echo_text, response_format = _text_format(body.get("text"))
    if response_format is not None:  # checked with the chat body (OutputFormat)
        chat["response_format"] = response_format
    echo = {
        "instructions": instructions,
        "max_output_tokens": body.get("max_output_tokens"),
        "metadata": _metadata(body.get("metadata")),
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": prev,
        "reasoning": _reasoning(body.get("reasoning")),
        "store": store is not False,
        "temperature": body.get("temperature"),
        "text": echo_text,
        "tool_choice": body.get("tool_choice") or ("auto" if tools else "none"),
        "tools": [{"type": "function", "strict": None, **t["function"]} for t in tools or []],
        "top_p": body.get("top_p"),
        "truncation": "disabled",
    }
    return chat, ResponsesRequest(echo, store is not False, prev, messages)


def output_messages(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A response's output items as the chat request messages a later turn starts from
    (reasoning left out, as chat templates leave it out)."""
    items: list[dict[str, Any]] = []
    for item in output:
        if item["type"] == "message":
            text = "".join(part["text"] for part in item["content"])
            items.append({"type": "message", "role": "assistant", "content": text})
        elif item["type"] == "function_call" and item["status"] == "completed":
            items.append({k: item[k] for k in ("type", "call_id", "name", "arguments")})
    return _input_messages(items) if items else []
