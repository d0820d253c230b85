"""Hermes (and Qwen 2.5): ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` calls, no
reasoning."""

from __future__ import annotations

from ..channels._spec import RouteSpec
from ._common import KINDS, TOOL_CALL_TAGS
from ._family import Family

FAMILY = Family(
    "hermes",
    RouteSpec(
        (TOOL_CALL_TAGS,),
        default_close=("<|im_end|>",),
        start_anchor=("<|im_start|>assistant\n",),
        kinds=KINDS,
        tool_format="json",
        name="hermes",
    ),
    signature=lambda template: "<tool_call>" in template,
    rank=60,
    call_opening="\n",
)
