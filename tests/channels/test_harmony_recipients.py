"""Harmony messages to a built-in tool (``to=browser.search``, ``to=python``), commentary
preambles and function calls on the analysis channel: routed with no special token in any
channel's text, for every chunking (offline; tests/channels/test_harmony_parity.py checks the
same against openai-harmony on real token ids)."""

from __future__ import annotations

from typing import Any

import pytest
import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops

from rxstream.channels import Segment, ToolCallEnd
from rxstream.families import family
from rxstream.operators import route, tool_calls
from tests.channels.test_harmony import cut

SPEC = family("harmony").spec
SEARCH = '{"query": "gpt-oss", "topn": 3}'

CASES: dict[str, tuple[str, list[tuple[str, str | None, Any]]]] = {
    "built-in recipient in the start header": (
        "<|channel|>analysis<|message|>search<|end|>"
        f"<|start|>assistant to=browser.search<|channel|>analysis code<|message|>{SEARCH}<|call|>",
        [("reasoning", None, "search"), ("reasoning", "browser.search", SEARCH)],
    ),
    "built-in recipient after the channel, at the start": (
        "<|channel|>analysis to=python code<|message|>print(1)<|call|>",
        [("reasoning", "python", "print(1)")],
    ),
    "built-in recipient as the first message's header (after the prompt's start)": (
        " to=python<|channel|>analysis code<|message|>print(1)",
        [("reasoning", "python", "print(1)")],
    ),
    "a preamble, a call and the answer": (
        "<|channel|>commentary<|message|>Checking.<|end|>"
        "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json"
        '<|message|>{"a": 1}<|call|>'
        "<|start|>assistant<|channel|>final<|message|>Sunny.<|return|>",
        [("content", None, "Checking."), ("tool_call", "get_weather", {"a": 1}), ("content", None, "Sunny.")],
    ),
    "a preamble the next message's start ends": (
        "<|channel|>commentary<|message|>Checking.<|start|>assistant<|channel|>final<|message|>Sunny.",
        [("content", None, "Checking."), ("content", None, "Sunny.")],
    ),
    "a function call on the analysis channel": (
        '<|channel|>analysis to=functions.lookup code<|message|>{"q": "x"}<|call|>',
        [("tool_call", "lookup", {"q": "x"})],
    ),
}


def messages(chunks: list[str]) -> list[tuple[str, str | None, Any]]:
    out = rx.from_iterable(chunks).pipe(route(SPEC), tool_calls(format=SPEC.tool_format), ops.to_list()).run()
    got: list[list[Any]] = []
    for o in out:
        if isinstance(o, Segment) and o.event == "open":
            got.append([o.channel, o.captures.get("recipient"), ""])
        elif isinstance(o, Segment) and o.event == "chunk":
            assert got and got[-1][0] == o.channel != SPEC.default, o
            got[-1][2] += o.text
        elif isinstance(o, Segment):
            assert o.event == "close", o
        elif isinstance(o, ToolCallEnd):
            got.append(["tool_call", o.name, o.arguments])
    assert all("<|" not in str(m) for m in got)
    return [(c, r, t) for c, r, t in got]


@pytest.mark.parametrize("name", list(CASES))
def test_whole_and_char_by_char(name: str) -> None:
    text, expected = CASES[name]
    for chunks in ([text], list(text)):
        assert messages(chunks) == expected


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(list(CASES)), st.lists(st.integers(0, 400), max_size=8))
def test_every_chunking(name: str, points: list[int]) -> None:
    text, expected = CASES[name]
    assert messages(cut(text, points)) == expected
