"""Llama 3.x JSON tool calls: ``<|python_tag|>{"name": ..., "parameters": {...}}`` up to
``<|eom_id|>`` or ``<|eot_id|>``; several calls may be separated by ``;``. Its delimiters are
special tokens."""

from __future__ import annotations

from ..channels._spec import Region, RouteSpec
from ..channels._tool_json import JsonCallFormat
from ._common import KINDS
from ._family import Family

LLAMA3_JSON = JsonCallFormat("llama3", separators=";", forced_key="parameters")
"""``{"name": ..., "parameters": {...}}`` (``"arguments"`` is taken too), ``;`` between calls."""

FAMILY = Family(
    "llama3",
    RouteSpec(
        (Region("tool_call", ("<|python_tag|>",), ("<|eom_id|>", "<|eot_id|>"), close_at_end=True),),
        default_close=("<|eot_id|>",),
        start_anchor=("<|start_header_id|>assistant<|end_header_id|>\n\n",),
        kinds=KINDS,
        tool_format=LLAMA3_JSON,
        name="llama3",
    ),
    aliases=("llama-3",),
    signature=lambda template: "<|python_tag|>" in template,
    rank=70,
    special_delimiters=True,
)
