"""Request validation: a chat request's ``messages`` and a completions request's ``prompt``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._errors import RequestError
from ._limits import ServerLimits
from ._tools import parse_assistant_tool_calls

__all__ = ["messages_chars", "parse_messages", "parse_prompt"]


def _content_text(content: Any, index: int) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if not (
                isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)
            ):
                raise RequestError(
                    f"messages[{index}].content: only text parts are supported, got {part!r}"[:300],
                    param=f"messages[{index}].content",
                )
            parts.append(part["text"])
        return "".join(parts)
    raise RequestError(
        f"messages[{index}].content must be a string or a list of text parts, got {type(content).__name__}",
        param=f"messages[{index}].content",
    )


def messages_chars(messages: Sequence[Mapping[str, Any]]) -> int:
    """The characters of the messages' contents and tool calls."""
    total = 0
    for m in messages:
        total += len(m["content"] or "")
        for call in m.get("tool_calls", ()):
            total += len(call["function"]["name"]) + len(json.dumps(call["function"]["arguments"]))
    return total


def parse_messages(body: Mapping[str, Any], limits: ServerLimits) -> tuple[dict[str, Any], ...]:
    """The chat messages: ``system``/``developer``, ``user``, ``assistant`` (text, or ``tool_calls``
    with ``content`` null) and ``tool`` (a result, with the ``tool_call_id`` of a call of the
    assistant message before it)."""
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise RequestError("'messages' must be a non-empty list", param="messages")
    if len(raw) > limits.max_messages:
        raise RequestError(
            f"at most {limits.max_messages} messages are allowed, got {len(raw)}", param="messages"
        )
    parsed: list[dict[str, Any]] = []
    open_calls: set[str] = set()  # ids of the latest assistant message's calls
    for i, msg in enumerate(raw):
        if not isinstance(msg, Mapping):
            raise RequestError(f"messages[{i}] must be an object", param=f"messages[{i}]")
        role = msg.get("role")
        if role not in ("system", "user", "assistant", "developer", "tool"):
            raise RequestError(
                f"messages[{i}].role must be system, user, assistant or tool, got {role!r}"[:300],
                param=f"messages[{i}].role",
            )
        name = msg.get("name")
        if name is not None and not isinstance(name, str):
            raise RequestError(f"messages[{i}].name must be a string", param=f"messages[{i}].name")
        entry: dict[str, Any] = {"role": "system" if role == "developer" else role}
        for field, owner in (("tool_calls", "assistant"), ("tool_call_id", "tool")):
            if msg.get(field) is not None and role != owner:
                raise RequestError(
                    f"messages[{i}].{field} belongs to {owner} messages, not {role}",
                    param=f"messages[{i}].{field}",
                )
        if role == "assistant" and msg.get("tool_calls") is not None:
            calls = parse_assistant_tool_calls(msg.get("tool_calls"), i)
            content = msg.get("content")
            entry["content"] = None if content is None else _content_text(content, i)
            entry["tool_calls"] = calls
            open_calls = {c["id"] for c in calls}
        else:
            entry["content"] = _content_text(msg.get("content"), i)
            if role == "tool":
                call_id = msg.get("tool_call_id")
                if not isinstance(call_id, str) or not call_id:
                    raise RequestError(
                        f"messages[{i}].tool_call_id must be a non-empty string (the id of the call "
                        "this message answers)",
                        param=f"messages[{i}].tool_call_id",
                    )
                if call_id not in open_calls:
                    raise RequestError(
                        f"messages[{i}].tool_call_id {call_id!r} answers no tool call of the assistant "
                        "message before it"[:300],
                        param=f"messages[{i}].tool_call_id",
                    )
                entry["tool_call_id"] = call_id
            else:
                open_calls = set()
        if name is not None:
            entry["name"] = name
        parsed.append(entry)
    if messages_chars(parsed) > limits.max_prompt_chars:
        raise RequestError(f"the messages exceed {limits.max_prompt_chars} characters", param="messages")
    return tuple(parsed)


def parse_prompt(body: Mapping[str, Any], limits: ServerLimits) -> tuple[str | None, tuple[int, ...] | None]:
    """A completions prompt: ``(text, None)`` or ``(None, token ids)``."""
    raw = body.get("prompt")
    if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], str | list):
        raw = raw[0]  # a batch of one
    if isinstance(raw, str):
        if len(raw) > limits.max_prompt_chars:
            raise RequestError(f"the prompt exceeds {limits.max_prompt_chars} characters", param="prompt")
        return raw, None
    if isinstance(raw, list) and raw and all(isinstance(i, int) and not isinstance(i, bool) for i in raw):
        if len(raw) > limits.max_prompt_tokens:
            raise RequestError(f"the prompt exceeds {limits.max_prompt_tokens} tokens", param="prompt")
        return None, tuple(raw)
    raise RequestError(
        "'prompt' must be a string or a non-empty list of token ids (one prompt per request)", param="prompt"
    )
