"""Llama 3.x JSON tool calls: ``<|python_tag|>{"name": ..., "parameters": {...}}`` up to
``<|eom_id|>`` or ``<|eot_id|>``; several calls may be separated by ``;``. Its delimiters are
special tokens.

With tools, Llama 3.1/3.2 also write calls bare: the whole answer is a call object
(``{"name": ..., "parameters": ...}``, ``{"type": "function", "name": ...}``), several separated
by ``;``, or a JSON list of them. That region opens only at the start of the answer, and only
for a chat with tools (:attr:`~rxstream.families.Family.bare_calls`): prose is held back only
while its first characters could still begin such an object (``{``, ``[``, whitespace).
"""

from __future__ import annotations

from ..channels._spec import Region, RouteSpec
from ..channels._tool_json import JsonCallFormat
from ..text import rx
from ._common import KINDS
from ._family import Family

LLAMA3_JSON = JsonCallFormat("llama3", separators=";", forced_key="parameters", lists=True, opening_json=True)
"""``{"name": ..., "parameters": {...}}`` (``"arguments"`` is taken too), ``;`` between calls."""

BARE = Region(
    "tool_call",
    (rx(r'\A\s*(?:\[\s*)?\{\s*"(?:type"\s*:\s*"function"\s*,\s*")?name"\s*:'),),
    ("<|eom_id|>", "<|eot_id|>"),
    close_at_end=True,
)
"""A call written bare at the start of the answer (the opening is the JSON's first characters)."""

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
    bare_calls=(BARE,),
)
