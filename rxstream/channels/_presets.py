"""Route specs for the common model families (``route("qwen3")``)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..text import rx
from ._spec import ChannelKind, Region, RouteSpec

__all__ = ["PRESETS", "preset"]

_THINK = Region("reasoning", ("<think>",), ("</think>",))
_HERMES_TOOL = Region("tool_call", ("<tool_call>",), ("</tool_call>",))
_KINDS: Mapping[str, ChannelKind] = MappingProxyType(
    {"content": "content", "reasoning": "reasoning", "tool_call": "tool_call"}
)

PRESETS: dict[str, RouteSpec] = {
    # DeepSeek-R1 (and its distills): <think>...</think>; the chat template opens <think> in the
    # prompt, so pass prompt=... to start in the reasoning channel.
    "deepseek-r1": RouteSpec((_THINK,), start_anchor=("<｜Assistant｜>",), kinds=_KINDS, name="deepseek-r1"),
    # Qwen3: <think> reasoning, Hermes-style <tool_call>{json}</tool_call> calls.
    "qwen3": RouteSpec(
        (_THINK, _HERMES_TOOL),
        default_close=("<|im_end|>",),
        start_anchor=("<|im_start|>assistant\n",),
        kinds=_KINDS,
        tool_format="json",
        name="qwen3",
    ),
    # Hermes / Qwen 2.5 tool calls without reasoning.
    "hermes": RouteSpec(
        (_HERMES_TOOL,),
        default_close=("<|im_end|>",),
        start_anchor=("<|im_start|>assistant\n",),
        kinds=_KINDS,
        tool_format="json",
        name="hermes",
    ),
    # Qwen3-Coder: XML parameters inside <tool_call><function=...>...</function></tool_call>.
    "qwen3-coder": RouteSpec(
        (_THINK, _HERMES_TOOL),
        default_close=("<|im_end|>",),
        start_anchor=("<|im_start|>assistant\n",),
        kinds=_KINDS,
        tool_format="xml",
        name="qwen3-coder",
    ),
    # Mistral (Magistral / Devstral): [THINK]...[/THINK], [TOOL_CALLS][{...}, ...] to the end.
    "mistral": RouteSpec(
        (
            Region("reasoning", ("[THINK]",), ("[/THINK]",)),
            Region("tool_call", ("[TOOL_CALLS]",), ("</s>",), close_at_end=True),
        ),
        default_close=("</s>",),
        start_anchor=("[/INST]",),
        kinds=_KINDS,
        tool_format="json-list",
        name="mistral",
    ),
    # Llama 3.x JSON tool calls: <|python_tag|>{"name": ..., "parameters": {...}} up to <|eom_id|>
    # or <|eot_id|>.
    "llama3": RouteSpec(
        (Region("tool_call", ("<|python_tag|>",), ("<|eom_id|>", "<|eot_id|>"), close_at_end=True),),
        default_close=("<|eot_id|>",),
        start_anchor=("<|start_header_id|>assistant<|end_header_id|>\n\n",),
        kinds=_KINDS,
        tool_format="llama3",
        name="llama3",
    ),
    # gpt-oss harmony: <|channel|>analysis<|message|>...<|end|>, <|channel|>final<|message|>...,
    # tool calls <|channel|>commentary to=functions.NAME ... <|message|>{args}<|call|>. Each message
    # may start with <|start|>assistant; that framing is part of the delimiters.
    "harmony": RouteSpec(
        (
            Region(
                "reasoning",
                (rx(r"(?:<\|start\|>assistant)?<\|channel\|>analysis<\|message\|>"),),
                ("<|end|>",),
            ),
            Region(
                "tool_call",
                (
                    rx(
                        r"(?:<\|start\|>assistant)?<\|channel\|>commentary to=functions\."
                        r"(?P<name>[A-Za-z0-9_.\-]+)"
                        r"[^<]*(?:<\|constrain\|>[^<]*)?<\|message\|>"
                    ),
                ),
                ("<|call|>",),
            ),
            Region(
                "content",
                (rx(r"(?:<\|start\|>assistant)?<\|channel\|>final<\|message\|>"),),
                ("<|return|>", "<|end|>"),
                close_at_end=True,
            ),
        ),
        default="other",
        start_anchor=("<|start|>assistant",),
        kinds=MappingProxyType(
            {"content": "content", "reasoning": "reasoning", "tool_call": "tool_call", "other": "other"}
        ),
        tool_format="harmony",
        name="harmony",
    ),
}
"""Preset name -> :class:`RouteSpec` (channels ``reasoning``, ``content``, ``tool_call``)."""

_ALIASES = {"qwq": "deepseek-r1", "gpt-oss": "harmony", "magistral": "mistral", "llama-3": "llama3"}


def preset(name: str) -> RouteSpec:
    """The preset called ``name`` (see :data:`PRESETS`); ValueError naming the known ones."""
    key = _ALIASES.get(name, name)
    if key not in PRESETS:
        known = ", ".join(sorted([*PRESETS, *_ALIASES]))
        raise ValueError(f"route: unknown preset {name!r}; known: {known}")
    return PRESETS[key]
