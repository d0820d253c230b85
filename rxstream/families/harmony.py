"""gpt-oss (the harmony format): ``<|channel|>analysis<|message|>...<|end|>`` reasoning,
``<|channel|>final<|message|>...`` the answer, tool calls
``<|channel|>commentary to=functions.NAME ... <|message|>{args}<|call|>``. Each message may start
with ``<|start|>assistant``; that framing is part of the delimiters, which are special tokens."""

from __future__ import annotations

from types import MappingProxyType

from ..channels._spec import Region, RouteSpec
from ..channels._tool_json import JsonCallFormat
from ..text import rx
from ._family import Family

HARMONY_ARGS = JsonCallFormat("harmony", multiple=False, name_capture="name", name_prefix="functions.")
"""The region is the arguments object; the name is the opening delimiter's ``name`` capture."""


def _open_call(name: str | None) -> str:
    head = "<|channel|>commentary to=functions."
    return head + ("" if name is None else f"{name} <|constrain|>json<|message|>")


_NAME = r"(?P<name>[A-Za-z0-9_.\-]+)"
_HEADER_REST = r"[^<]*(?:<\|constrain\|>[^<]*)?<\|message\|>"
"""The rest of a header: a content type (`` json``), a constraint (``<|constrain|>json``)."""

FAMILY = Family(
    "harmony",
    RouteSpec(
        (
            Region(
                "reasoning",
                (rx(r"(?:<\|start\|>assistant)?<\|channel\|>analysis" + _HEADER_REST),),
                # a reasoning message the next message's start ends (its <|end|> not emitted)
                ("<|end|>", rx(r"<\|start\|>assistant")),
            ),
            Region(
                "tool_call",
                (
                    # the recipient after the channel: <|channel|>commentary to=functions.NAME
                    rx(
                        r"(?:<\|start\|>assistant)?<\|channel\|>commentary to=functions\."
                        + _NAME
                        + _HEADER_REST
                    ),
                ),
                ("<|call|>",),
            ),
            Region(
                "tool_call",
                (
                    # the recipient in the start header: <|start|>assistant to=functions.NAME<|channel|>...
                    rx(
                        r"(?:<\|start\|>assistant)? to=functions\."
                        + _NAME
                        + r"<\|channel\|>commentary"
                        + _HEADER_REST
                    ),
                ),
                ("<|call|>",),
            ),
            Region(
                "content",
                (rx(r"(?:<\|start\|>assistant)?<\|channel\|>final" + _HEADER_REST),),
                ("<|return|>", "<|end|>"),
                close_at_end=True,
            ),
        ),
        default="other",
        start_anchor=("<|start|>assistant",),
        kinds=MappingProxyType(
            {"content": "content", "reasoning": "reasoning", "tool_call": "tool_call", "other": "other"}
        ),
        tool_format=HARMONY_ARGS,
        name="harmony",
    ),
    aliases=("gpt-oss",),
    signature=lambda template: "<|channel|>" in template,
    rank=10,
    special_delimiters=True,
    open_call=_open_call,
)
