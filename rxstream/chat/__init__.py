"""Chats: how one chat is prompted and how its generation is routed, for every face.

- :func:`plan_chat` -- the prompt ids of a chat request and its :class:`ChatPlan` (the route,
  the forced tool-call opening, the tools, what the detokenizer keeps); :func:`tool_opening`,
  :class:`UnsupportedChoice`; :class:`ToolChoice`, what a request asks of the tools.
- :func:`resolve_reasoning_format` / :func:`check_reasoning_format` /
  :func:`detect_reasoning_format` -- the ``--reasoning-format`` option: ``auto`` (detected from
  the chat template by :mod:`rxstream.families`), ``none``, or a family's name
  (:data:`REASONING_FORMATS`).
- :func:`fallback_messages` / :func:`renders_tools` -- the tools in the prompt of a model whose
  template does not render them (:data:`FALLBACK`, how those calls are read).
- :class:`TextDelta` -- answer or reasoning text of a routed chat.
- :class:`ChatTemplate` -- a model's Jinja2 chat template, rendered (the local model and the
  gateway share it; Jinja2 comes with the ``onnx`` and ``gateway`` extras).
- :class:`TokenUsage` -- where a generation's tokens went (answer, reasoning, tool calls,
  delimiters), as ``chat_pipeline(..., usage=...)`` reports it.

The ``chat_pipeline`` operator (:mod:`rxstream.operators`) runs a plan on a generation's ids.
"""

from ._choice import TOOL_NAME, ToolChoice
from ._delta import ChatItem, TextDelta
from ._fallback import FALLBACK, TOOL_INSTRUCTIONS, fallback_messages, renders_tools
from ._formats import (
    REASONING_FORMATS,
    check_reasoning_format,
    detect_reasoning_format,
    resolve_reasoning_format,
)
from ._plan import ChatPlan, UnsupportedChoice, plan_chat, tool_opening
from ._template import ChatTemplate
from ._usage import BUCKETS, Bucket, TokenUsage

__all__ = [
    "BUCKETS",
    "FALLBACK",
    "REASONING_FORMATS",
    "TOOL_INSTRUCTIONS",
    "TOOL_NAME",
    "Bucket",
    "ChatItem",
    "ChatPlan",
    "ChatTemplate",
    "TextDelta",
    "TokenUsage",
    "ToolChoice",
    "UnsupportedChoice",
    "check_reasoning_format",
    "detect_reasoning_format",
    "fallback_messages",
    "plan_chat",
    "renders_tools",
    "resolve_reasoning_format",
    "tool_opening",
]
