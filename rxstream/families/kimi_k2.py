"""Kimi-K2: tool calls in a section, ``<|tool_calls_section_begin|>``, each
``<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{args}<|tool_call_end|>``,
then ``<|tool_calls_section_end|>``; ``<think>...</think>`` reasoning (K2-Thinking). Each call is
one region, the arguments object alone; the name is the opening delimiter's ``name`` capture
(less ``functions.``; the ``:IDX`` counter is not part of it). The framing is special tokens and
never reaches the answer."""

from __future__ import annotations

from ..channels._spec import Region, RouteSpec
from ..channels._tool_json import JsonCallFormat
from ..text import rx
from ._common import KINDS, THINK
from ._family import Family

KIMI_K2_ARGS = JsonCallFormat("kimi-k2", multiple=False, name_capture="name", name_prefix="functions.")
"""The region is the arguments object; the name is the opening delimiter's ``name`` capture."""

_CALL_OPEN = rx(
    r"(?:<\|tool_calls_section_begin\|>)?\s*<\|tool_call_begin\|>\s*"
    r"(?P<name>[^:<\s]+)(?::\d+)?\s*<\|tool_call_argument_begin\|>"
)
"""One call's head: the section's opening token before the first, the tool's name and the call's
counter."""


def _open_call(name: str | None) -> str:
    head = "<|tool_calls_section_begin|><|tool_call_begin|>functions."
    return head + ("" if name is None else f"{name}:0<|tool_call_argument_begin|>")


FAMILY = Family(
    "kimi-k2",
    RouteSpec(
        (THINK, Region("tool_call", (_CALL_OPEN,), ("<|tool_call_end|>",))),
        default_close=("<|tool_calls_section_end|>", "<|im_end|>"),
        start_anchor=("<|im_assistant|>assistant<|im_middle|>",),
        kinds=KINDS,
        tool_format=KIMI_K2_ARGS,
        name="kimi-k2",
    ),
    signature=lambda template: "<|tool_calls_section_begin|>" in template,
    rank=40,
    special_delimiters=True,
    open_call=_open_call,
)
