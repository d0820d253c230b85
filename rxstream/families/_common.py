"""Pieces several families share: the ``<think>`` region, the ``<tool_call>`` region, the
channels' kinds."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..channels._spec import ChannelKind, Region

__all__ = ["KINDS", "THINK", "TOOL_CALL_TAGS"]

THINK = Region("reasoning", ("<think>",), ("</think>",))
"""``<think>...</think>`` reasoning."""

TOOL_CALL_TAGS = Region("tool_call", ("<tool_call>",), ("</tool_call>",))
"""``<tool_call>...</tool_call>`` calls."""

KINDS: Mapping[str, ChannelKind] = MappingProxyType(
    {"content": "content", "reasoning": "reasoning", "tool_call": "tool_call"}
)
"""The kinds of the usual channels (``content``, ``reasoning``, ``tool_call``)."""
