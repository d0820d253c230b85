"""Qwen3: ``<think>`` reasoning, Hermes-style ``<tool_call>{json}</tool_call>`` calls."""

from __future__ import annotations

from ..channels._spec import RouteSpec
from ._common import KINDS, THINK, TOOL_CALL_TAGS
from ._family import Family

FAMILY = Family(
    "qwen3",
    RouteSpec(
        (THINK, TOOL_CALL_TAGS),
        default_close=("<|im_end|>",),
        start_anchor=("<|im_start|>assistant\n",),
        kinds=KINDS,
        tool_format="json",
        name="qwen3",
    ),
    signature=lambda template: "<think>" in template and "<tool_call>" in template,
    rank=40,
    call_opening="\n",
)
