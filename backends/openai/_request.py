"""A chat request in each API's own shape: the path, the body and the headers for Chat
Completions (``/chat/completions``), Responses (``/responses``) and Messages (``/messages``).

The caller writes one request, in Chat Completions terms where the APIs differ: leading
``system`` messages become Responses' ``instructions`` or the Messages API's ``system``;
``max_tokens`` becomes ``max_output_tokens`` (Responses); ``stop`` becomes ``stop_sequences``
(Messages); function tools (``{"type": "function", "function": {...}}``) and ``tool_choice``
take each API's form. Anything else passes through as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

__all__ = ["API", "APIS", "chat_request", "headers_for"]

API: TypeAlias = Literal["chat", "responses", "messages"]
APIS: tuple[API, ...] = ("chat", "responses", "messages")

ANTHROPIC_VERSION = "2023-06-01"


def headers_for(api: API, api_key: str | None) -> dict[str, str]:
    """The authentication (and version) headers an API expects."""
    if api == "messages":
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key is not None:
            headers["x-api-key"] = api_key
        return headers
    return {} if api_key is None else {"Authorization": f"Bearer {api_key}"}


def _lift_system(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """The leading system messages' text (when all of it is text) and the other messages."""
    texts: list[str] = []
    i = 0
    while i < len(messages) and messages[i].get("role") == "system":
        content = messages[i].get("content")
        if not isinstance(content, str):
            break
        texts.append(content)
        i += 1
    return ("\n\n".join(texts) if texts else None), messages[i:]


def _tool(api: API, tool: Any) -> Any:
    """A Chat Completions function tool in ``api``'s form (anything else as it is)."""
    if not isinstance(tool, Mapping) or tool.get("type") != "function":
        return tool
    function = tool.get("function")
    if not isinstance(function, Mapping):
        return tool
    described = {k: function[k] for k in ("name", "description") if k in function}
    schema = function.get("parameters", {"type": "object", "properties": {}})
    if api == "responses":
        extra = {"strict": function["strict"]} if "strict" in function else {}
        return {"type": "function", **described, "parameters": schema, **extra}
    return {**described, "input_schema": schema}


def _tool_choice(api: API, choice: Any) -> Any:
    name = None
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        function = choice.get("function")
        name = function.get("name") if isinstance(function, Mapping) else choice.get("name")
    if api == "responses":
        return {"type": "function", "name": name} if name is not None else choice
    if name is not None:
        return {"type": "tool", "name": name}
    if choice in ("auto", "none"):
        return {"type": choice}
    return {"type": "any"} if choice == "required" else choice


def chat_request(
    api: API, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any], model: str | None
) -> tuple[str, dict[str, Any]]:
    """The path and body of a streamed chat request in ``api``'s shape."""
    msgs = [dict(m) for m in messages]
    body: dict[str, Any] = {} if model is None else {"model": model}
    if api == "chat":
        return "/chat/completions", {**body, **params, "messages": msgs, "stream": True}
    rest = dict(params)
    system, msgs = _lift_system(msgs)
    if isinstance(rest.get("tools"), list):
        rest["tools"] = [_tool(api, t) for t in rest["tools"]]
    if "tool_choice" in rest:
        rest["tool_choice"] = _tool_choice(api, rest["tool_choice"])
    if api == "responses":
        if "max_tokens" in rest and "max_output_tokens" not in rest:
            rest["max_output_tokens"] = rest.pop("max_tokens")
        if system is not None and "instructions" not in rest:
            rest["instructions"] = system
        elif system is not None:
            msgs = [dict(m) for m in messages]  # instructions given: the system messages stay input
        return "/responses", {**body, **rest, "input": msgs, "stream": True}
    if "max_tokens" not in rest:
        raise ValueError("OpenAIBackend.chat: the Messages API needs max_tokens=")
    if "stop" in rest and "stop_sequences" not in rest:
        stop = rest.pop("stop")
        rest["stop_sequences"] = [stop] if isinstance(stop, str) else stop
    if system is not None and "system" not in rest:
        rest["system"] = system
    elif system is not None:
        msgs = [dict(m) for m in messages]
    return "/messages", {**body, **rest, "messages": msgs, "stream": True}
