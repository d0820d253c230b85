"""Tools in the prompt of a model whose chat template does not render them (the fallback).

The tools are listed as JSON in a system message, with instructions to call them in tags
(``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, the format most small models were
tuned on); earlier tool calls of the assistant are written back in that same form, and tool
results as ``<tool_response>`` blocks in a user message. Every chat template can render that:
it only sees ``system``, ``user`` and ``assistant`` messages with text content.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from ..channels._spec import Region, RouteSpec
from ..families import Family

__all__ = ["FALLBACK", "TOOL_INSTRUCTIONS", "fallback_messages", "renders_tools"]

_TAGS = Region("tool_call", ("<tool_call>",), ("</tool_call>",))

FALLBACK = Family(
    "tools",
    RouteSpec(
        (_TAGS,),
        kinds=MappingProxyType({"content": "content", "tool_call": "tool_call"}),
        tool_format="json",
        name="tools",
    ),
    call_opening="\n",
)
"""How the calls the fallback prompt asks for are read (``<tool_call>{json}</tool_call>``), and
opened when forced. Not a registered family: it is this prompt's own format."""

TOOL_INSTRUCTIONS = """\
You can call functions to answer. These are the functions, one JSON object per line:
<tools>
{tools}
</tools>
To call a function, write one JSON object with its "name" and its "arguments" between \
<tool_call> and </tool_call>, like this:
<tool_call>
{{"name": "function_name", "arguments": {{"parameter": "value"}}}}
</tool_call>
Use one <tool_call> block per call; several calls are fine. The results come back in \
<tool_response> blocks. When no function is needed, answer directly."""
"""The system text that lists the tools (``{tools}``: one JSON object per line)."""


def renders_tools(template: str | None) -> bool:
    """Whether a chat template renders a ``tools`` list itself (its source mentions ``tools``)."""
    return template is not None and "tools" in template


def _call_text(call: Mapping[str, Any]) -> str:
    fn = call["function"]
    body = json.dumps({"name": fn["name"], "arguments": fn["arguments"]}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


def fallback_messages(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``messages`` with the tools described in the (first) system message and the tool calls and
    results written out as text (see the module docstring). ``tools`` empty: only the rewriting.
    """
    out: list[dict[str, Any]] = []
    if tools:
        listing = "\n".join(json.dumps(dict(t), ensure_ascii=False) for t in tools)
        instructions = TOOL_INSTRUCTIONS.format(tools=listing)
        if messages and messages[0]["role"] == "system":
            first = messages[0]["content"] or ""
            out.append({"role": "system", "content": f"{first}\n\n{instructions}" if first else instructions})
            messages = messages[1:]
        else:
            out.append({"role": "system", "content": instructions})
    responses: list[str] = []

    def flush_responses() -> None:
        if responses:
            out.append({"role": "user", "content": "\n".join(responses)})
            responses.clear()

    for m in messages:
        role = m["role"]
        if role == "tool":
            responses.append(f"<tool_response>\n{m['content'] or ''}\n</tool_response>")
            continue
        flush_responses()
        if role == "assistant" and m.get("tool_calls"):
            parts = [m["content"]] if m.get("content") else []
            parts += [_call_text(c) for c in m["tool_calls"]]
            out.append({"role": "assistant", "content": "\n".join(parts)})
        else:
            out.append({"role": role, "content": m["content"] or ""})
    flush_responses()
    return out
