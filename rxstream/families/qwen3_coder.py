"""Qwen3-Coder: XML parameters inside ``<tool_call><function=NAME>...</function></tool_call>``."""

from __future__ import annotations

from ..channels._spec import RouteSpec
from ._common import KINDS, THINK, TOOL_CALL_TAGS
from ._family import Family

FAMILY = Family(
    "qwen3-coder",
    RouteSpec(
        (THINK, TOOL_CALL_TAGS),
        default_close=("<|im_end|>",),
        start_anchor=("<|im_start|>assistant\n",),
        kinds=KINDS,
        tool_format="xml",
        name="qwen3-coder",
    ),
    signature=lambda template: "<tool_call>" in template and "<function=" in template,
    rank=30,
    call_opening="\n",
)
