"""gpt-oss (the harmony format): ``<|channel|>analysis<|message|>...<|end|>`` reasoning,
``<|channel|>final<|message|>...`` the answer, tool calls
``<|channel|>commentary to=functions.NAME ... <|message|>{args}<|call|>``. Each message may start
with ``<|start|>assistant``; that framing is part of the delimiters, which are special tokens.

A message's recipient may follow the channel or sit in the start header
(``<|start|>assistant to=RECIPIENT<|channel|>...``). ``functions.NAME`` is a tool call (on the
commentary channel, or the analysis one); any other recipient is a built-in tool's (``browser.search``,
``python``): that message is reasoning, its recipient the ``recipient`` capture of the open
event. A commentary message without a recipient (a preamble to tool calls) is content."""

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
_PLAIN_REST = r"[^<=]*(?:<\|constrain\|>[^<=]*)?<\|message\|>"
"""The rest of a header without a recipient (no ``to=`` in it)."""
_START = r"(?:<\|start\|>assistant)?"
_RECIPIENT = r"(?P<recipient>[A-Za-z0-9_.\-]+)"
_CALL_CHANNEL = r"<\|channel\|>(?:commentary|analysis)"

FAMILY = Family(
    "harmony",
    RouteSpec(
        (
            Region(
                "reasoning",
                (rx(_START + r"<\|channel\|>analysis" + _PLAIN_REST),),
                # a reasoning message the next message's start ends (its <|end|> not emitted)
                ("<|end|>", rx(r"<\|start\|>assistant")),
            ),
            # a recipient functions.NAME is a tool call; these two come before the built-in
            # recipients' regions, which match the same text (the first region wins a tie)
            Region(
                "tool_call",
                # the recipient after the channel: <|channel|>commentary to=functions.NAME
                (rx(_START + _CALL_CHANNEL + r" to=functions\." + _NAME + _HEADER_REST),),
                ("<|call|>",),
            ),
            Region(
                "tool_call",
                # the recipient in the start header: <|start|>assistant to=functions.NAME<|channel|>...
                (rx(_START + r" to=functions\." + _NAME + _CALL_CHANNEL + _HEADER_REST),),
                ("<|call|>",),
            ),
            # a built-in tool's call (to=browser.search, to=python): reasoning, the recipient
            # captured; it may end at the end of the stream (<|call|> is a stop token)
            Region(
                "reasoning",
                (rx(_START + _CALL_CHANNEL + " to=" + _RECIPIENT + _HEADER_REST),),
                ("<|call|>",),
                close_at_end=True,
            ),
            Region(
                "reasoning",
                (rx(_START + " to=" + _RECIPIENT + _CALL_CHANNEL + _HEADER_REST),),
                ("<|call|>",),
                close_at_end=True,
            ),
            Region(
                "content",
                # a preamble: a commentary message without a recipient
                (rx(_START + r"<\|channel\|>commentary" + _PLAIN_REST),),
                ("<|end|>", rx(r"<\|start\|>assistant")),
                close_at_end=True,
            ),
            Region(
                "content",
                (rx(_START + r"<\|channel\|>final" + _HEADER_REST),),
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
