"""What a chat request asks of the model's tool use: :class:`ToolChoice`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["TOOL_NAME", "ToolChoice"]

TOOL_NAME = re.compile(r"[A-Za-z0-9_\-]{1,64}")
"""What OpenAI accepts as a function name (both faces check tools' names with it)."""


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """What the request asks of the model's tool use.

    Attributes:
        mode: ``"none"`` (no tools: they are not in the prompt and tool calls are not parsed),
            ``"auto"`` (the model decides), ``"required"`` (the answer starts with a tool call) or
            ``"named"`` (the answer starts with a call of ``name``).
        name: the function of a named choice, else None.
    """

    mode: Literal["none", "auto", "required", "named"]
    name: str | None = None
