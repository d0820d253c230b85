"""Mistral (Magistral, Devstral): ``[THINK]...[/THINK]``, ``[TOOL_CALLS][{...}, ...]`` to the end.
Its delimiters are special tokens."""

from __future__ import annotations

from ..channels._spec import Region, RouteSpec
from ._common import KINDS
from ._family import Family

FAMILY = Family(
    "mistral",
    RouteSpec(
        (
            Region("reasoning", ("[THINK]",), ("[/THINK]",)),
            Region("tool_call", ("[TOOL_CALLS]",), ("</s>",), close_at_end=True),
        ),
        default_close=("</s>",),
        start_anchor=("[/INST]",),
        kinds=KINDS,
        tool_format="json-list",
        name="mistral",
    ),
    aliases=("magistral",),
    signature=lambda template: "[THINK]" in template or "[TOOL_CALLS]" in template,
    rank=20,
    special_delimiters=True,
)
