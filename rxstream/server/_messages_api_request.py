"""Request validation for ``POST /v1/messages`` (the Anthropic Messages API): the body read into
the chat path's :class:`~._requests.GenerationRequest` (messages, tools and ``tool_choice`` in the
OpenAI shapes the chat template and the tool-call parser take) and the ``thinking`` switch.

Every field is implemented or refused: an unknown field, or a value this server cannot honour, is
a 400 naming it (:class:`~rxstream.server.RequestError`), never silently dropped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._errors import RequestError
from ._limits import ServerLimits
from ._request_messages import messages_chars, parse_messages
from ._request_rules import compile_rules, parse_extension
from ._request_sampling import parse_budget, parse_sampling
from ._requests import GenerationRequest
from ._tools import parse_tool_choice, parse_tools

__all__ = ["MessagesRequest", "parse_messages_request"]

_FIELDS = frozenset(
    {
        "model",
        "messages",
        "system",
        "max_tokens",
        "stream",
        "stop_sequences",
        "temperature",
        "top_p",
        "top_k",
        "metadata",
        "tools",
        "tool_choice",
        "thinking",
        "rxstream",
    }
)
"""The fields a Messages request may have (``rxstream``: the server's text rules, as in chat)."""

_BLOCK_FIELDS = {
    "text": {"type", "text", "cache_control", "citations"},
    "tool_use": {"type", "id", "name", "input", "cache_control"},
    "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control"},
    "thinking": {"type", "thinking", "signature"},
    "redacted_thinking": {"type", "data"},
}
"""The content blocks a message may hold, and their fields (``cache_control`` is accepted: this
server caches no prompt; a ``citations`` list on an earlier text block is not read)."""


@dataclass(frozen=True, slots=True)
class MessagesRequest:
    """A validated Messages request: the generation request, and whether the reasoning goes out
    as ``thinking`` blocks (``thinking: {"type": "enabled"}``) or is dropped."""

    request: GenerationRequest
    thinking: bool


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise RequestError(f"{where} must be an object, got {_short(value)}", param=where)
    return value


def _only(value: Mapping[str, Any], allowed: set[str] | frozenset[str], where: str) -> None:
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise RequestError(f"{where}: unknown field '{unknown[0]}'", param=f"{where}.{unknown[0]}")


def _text_blocks(raw: Any, where: str) -> str:
    """A string, or a list of ``text`` blocks, as one text."""
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, list):
        raise RequestError(f"{where} must be a string or a list of text blocks", param=where)
    parts: list[str] = []
    for k, block in enumerate(raw):
        at = f"{where}[{k}]"
        block = _object(block, at)
        if block.get("type") != "text":
            raise RequestError(
                f"{at}: only text blocks are supported here, got {_short(block.get('type'))}", param=at
            )
        _only(block, _BLOCK_FIELDS["text"], at)
        text = block.get("text")
        if not isinstance(text, str):
            raise RequestError(f"{at}.text must be a string", param=f"{at}.text")
        parts.append(text)
    return "".join(parts)


def _tool_result(block: Mapping[str, Any], at: str) -> dict[str, Any]:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise RequestError(f"{at}.tool_use_id must be a non-empty string", param=f"{at}.tool_use_id")
    content = _text_blocks(block.get("content", ""), f"{at}.content")
    is_error = block.get("is_error", False)
    if not isinstance(is_error, bool):
        raise RequestError(f"{at}.is_error must be a boolean", param=f"{at}.is_error")
    return {"role": "tool", "tool_call_id": call_id, "content": f"Error: {content}" if is_error else content}


def _tool_use(block: Mapping[str, Any], at: str) -> dict[str, Any]:
    call_id, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
    if not isinstance(call_id, str) or not call_id:
        raise RequestError(f"{at}.id must be a non-empty string", param=f"{at}.id")
    if not isinstance(name, str) or not name:
        raise RequestError(f"{at}.name must be a non-empty string", param=f"{at}.name")
    if not isinstance(arguments, Mapping):
        raise RequestError(f"{at}.input must be an object", param=f"{at}.input")
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _message(msg: Any, i: int) -> list[dict[str, Any]]:
    """One Messages message as chat messages: a user turn's ``tool_result`` blocks become tool
    messages (before its text), an assistant turn's ``tool_use`` blocks its ``tool_calls``;
    ``thinking`` and ``redacted_thinking`` blocks of earlier turns are dropped from the prompt."""
    where = f"messages[{i}]"
    msg = _object(msg, where)
    _only(msg, {"role", "content"}, where)
    role = msg.get("role")
    if role not in ("user", "assistant"):
        raise RequestError(
            f"{where}.role must be 'user' or 'assistant', got {_short(role)}", param=f"{where}.role"
        )
    content = msg.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise RequestError(f"{where}.content must be a string or a list of blocks", param=f"{where}.content")
    texts: list[str] = []
    results: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for k, block in enumerate(content):
        at = f"{where}.content[{k}]"
        block = _object(block, at)
        kind = block.get("type")
        allowed = (
            {"text", "tool_result"}
            if role == "user"
            else {"text", "tool_use", "thinking", "redacted_thinking"}
        )
        if kind not in allowed:
            raise RequestError(
                f"{at}: a {role} message's {_short(kind)} block is not supported (supported: "
                f"{', '.join(sorted(allowed))})",
                param=f"{at}.type",
            )
        _only(block, _BLOCK_FIELDS[kind], at)
        if kind == "text":
            texts.append(_text_blocks([block], at))
        elif kind == "tool_result":
            results.append(_tool_result(block, at))
        elif kind == "tool_use":
            calls.append(_tool_use(block, at))
    text = "".join(texts)
    if role == "assistant":
        return [
            {"role": "assistant", "content": text or None, "tool_calls": calls}
            if calls
            else {"role": role, "content": text}
        ]
    return results + ([{"role": "user", "content": text}] if texts or not results else [])


def _messages(body: Mapping[str, Any], limits: ServerLimits) -> tuple[dict[str, Any], ...]:
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise RequestError("'messages' must be a non-empty list", param="messages")
    if len(raw) > limits.max_messages:
        raise RequestError(
            f"at most {limits.max_messages} messages are allowed, got {len(raw)}", param="messages"
        )
    chat: list[dict[str, Any]] = []
    if body.get("system") is not None:
        chat.append({"role": "system", "content": _text_blocks(body["system"], "system")})
    for i, msg in enumerate(raw):
        chat += _message(msg, i)
    return parse_messages({"messages": chat}, limits)


def _tools(body: Mapping[str, Any], limits: ServerLimits) -> tuple[dict[str, Any], ...]:
    """``tools``: ``[{"name", "description", "input_schema"}]`` (``type: "custom"`` allowed)."""
    raw = body.get("tools")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RequestError("'tools' must be a list of tools", param="tools")
    functions: list[dict[str, Any]] = []
    for i, tool in enumerate(raw):
        where = f"tools[{i}]"
        tool = _object(tool, where)
        _only(tool, {"type", "name", "description", "input_schema", "cache_control"}, where)
        if tool.get("type", "custom") != "custom":
            raise RequestError(
                f"{where}.type: only custom tools are supported, got {_short(tool.get('type'))}",
                param=f"{where}.type",
            )
        if "input_schema" not in tool:
            raise RequestError(f"{where}.input_schema is required", param=f"{where}.input_schema")
        function = {"name": tool.get("name"), "parameters": tool["input_schema"]}
        if "description" in tool:
            function["description"] = tool["description"]
        functions.append({"type": "function", "function": function})
    return parse_tools({"tools": functions}, limits)


def _tool_choice(body: Mapping[str, Any], tools: tuple[dict[str, Any], ...]) -> tuple[Any, bool]:
    """``tool_choice`` (``auto``, ``any``, ``tool`` with a name, ``none``; with
    ``disable_parallel_tool_use``) as the chat path's choice, and whether calls may be parallel."""
    raw = body.get("tool_choice")
    if raw is None:
        return parse_tool_choice({}, tools), True
    raw = _object(raw, "tool_choice")
    _only(raw, {"type", "name", "disable_parallel_tool_use"}, "tool_choice")
    kind = raw.get("type")
    single = raw.get("disable_parallel_tool_use", False)
    if not isinstance(single, bool):
        raise RequestError("tool_choice.disable_parallel_tool_use must be a boolean", param="tool_choice")
    if kind == "tool":
        name = raw.get("name")
        if not isinstance(name, str):
            raise RequestError("tool_choice.name must be the name of a tool", param="tool_choice.name")
        choice: Any = {"type": "function", "function": {"name": name}}
    elif kind in ("auto", "any", "none"):
        if "name" in raw:
            raise RequestError(
                f"tool_choice.name belongs to type 'tool', not {kind!r}", param="tool_choice.name"
            )
        choice = {"auto": "auto", "any": "required", "none": "none"}[kind]
    else:
        raise RequestError(
            f"tool_choice.type must be 'auto', 'any', 'tool' or 'none', got {_short(kind)}",
            param="tool_choice.type",
        )
    return parse_tool_choice({"tool_choice": choice}, tools), not single


def _thinking(body: Mapping[str, Any], max_tokens: int) -> bool:
    """``thinking``: ``{"type": "enabled", "budget_tokens": N}`` (N from 1 to below
    ``max_tokens``; the whole ``max_tokens`` budget applies to thinking and answer together) or
    ``{"type": "disabled"}`` (the default)."""
    raw = body.get("thinking")
    if raw is None:
        return False
    raw = _object(raw, "thinking")
    kind = raw.get("type")
    if kind == "disabled":
        _only(raw, {"type"}, "thinking")
        return False
    if kind != "enabled":
        raise RequestError(
            f"thinking.type must be 'enabled' or 'disabled', got {_short(kind)}", param="thinking.type"
        )
    _only(raw, {"type", "budget_tokens"}, "thinking")
    budget = raw.get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget < max_tokens:
        raise RequestError(
            f"thinking.budget_tokens must be an integer from 1 to below max_tokens ({max_tokens}), "
            f"got {_short(budget)}",
            param="thinking.budget_tokens",
        )
    return True


def _stop_sequences(body: Mapping[str, Any], limits: ServerLimits) -> tuple[str, ...]:
    raw = body.get("stop_sequences")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RequestError("'stop_sequences' must be a list of strings", param="stop_sequences")
    if len(raw) > limits.max_stop:
        raise RequestError(
            f"at most {limits.max_stop} stop sequences are allowed, got {len(raw)}", param="stop_sequences"
        )
    for s in raw:
        if not isinstance(s, str) or not s or len(s) > limits.max_stop_chars:
            raise RequestError(
                f"each stop sequence must be a non-empty string of at most {limits.max_stop_chars} "
                f"characters, got {_short(s)}",
                param="stop_sequences",
            )
    return tuple(raw)


def _metadata(body: Mapping[str, Any]) -> None:
    """``metadata``: ``{"user_id": ...}`` is accepted (and unused: this server keeps no record)."""
    raw = body.get("metadata")
    if raw is None:
        return
    raw = _object(raw, "metadata")
    _only(raw, {"user_id"}, "metadata")
    user = raw.get("user_id")
    if user is not None and not isinstance(user, str):
        raise RequestError("metadata.user_id must be a string", param="metadata.user_id")


def parse_messages_request(body: Any, limits: ServerLimits) -> MessagesRequest:
    """Check a decoded ``/v1/messages`` body; return the request or raise :class:`RequestError`."""
    if not isinstance(body, Mapping):
        raise RequestError(f"the request body must be a JSON object, got {type(body).__name__}")
    for name in body:
        if name not in _FIELDS:
            raise RequestError(f"unknown field '{name}'", param=name)
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise RequestError("'model' is required: the served model's name", param="model")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError(f"'stream' must be a boolean, got {_short(stream)}", param="stream")
    if body.get("max_tokens") is None:
        raise RequestError("'max_tokens' is required", param="max_tokens")
    max_tokens, _ = parse_budget({"max_tokens": body["max_tokens"]}, False, limits)
    sampling = parse_sampling({k: body[k] for k in ("temperature", "top_p", "top_k") if k in body})
    _metadata(body)
    messages = _messages(body, limits)
    tools = _tools(body, limits)
    choice, parallel = _tool_choice(body, tools)
    if (len(json.dumps(tools)) if tools else 0) + messages_chars(messages) > limits.max_prompt_chars:
        raise RequestError(
            f"the messages and tools exceed {limits.max_prompt_chars} characters", param="messages"
        )
    thinking = _thinking(body, max_tokens)
    replace, regex_stops, read = parse_extension(body, limits)
    stop, replace_rules = compile_rules(_stop_sequences(body, limits), replace, regex_stops, limits, read)
    request = GenerationRequest(
        chat=True,
        prompt=None,
        prompt_ids=None,
        messages=messages,
        stream=stream,
        include_usage=False,
        max_tokens=max_tokens,
        sampling=sampling,
        stop=stop,
        replace=replace_rules,
        tools=tools,
        tool_choice=choice,
        parallel_tool_calls=parallel,
    )
    return MessagesRequest(request, thinking)
