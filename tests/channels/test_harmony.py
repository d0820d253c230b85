"""gpt-oss (harmony) outputs the other parsers' test suites check: a constrained final channel, an
analysis message that the next message's start ends, a recipient in the start header -- for
every chunking, with no special token in any name or content."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops

from rxstream.channels import Segment, ToolCallEnd, ToolCallInvalid, ToolCallStart
from rxstream.families import family
from rxstream.operators import route, tool_calls

SPEC = family("harmony").spec
WEATHER = '{"city": "Paris"}'

CASES: dict[str, tuple[str, dict[str, str], list[tuple[str, dict[str, Any]]]]] = {
    "final with a constraint": (
        "<|channel|>analysis<|message|>think<|end|>"
        '<|start|>assistant<|channel|>final <|constrain|>json<|message|>{"a": 1}<|return|>',
        {"reasoning": "think", "content": '{"a": 1}'},
        [],
    ),
    "reasoning ended by the next message": (
        "<|channel|>analysis<|message|>think more<|start|>assistant<|channel|>final<|message|>The answer.",
        {"reasoning": "think more", "content": "The answer."},
        [],
    ),
    "recipient in the start header": (
        "<|channel|>analysis<|message|>need a tool<|end|>"
        f"<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{WEATHER}<|call|>",
        {"reasoning": "need a tool"},
        [("get_weather", {"city": "Paris"})],
    ),
    "unclosed reasoning, then a call with the recipient in the header": (
        "<|channel|>analysis<|message|>need a tool"
        f"<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{WEATHER}<|call|>",
        {"reasoning": "need a tool"},
        [("get_weather", {"city": "Paris"})],
    ),
    "recipient after the channel": (
        f"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{WEATHER}<|call|>",
        {},
        [("get_weather", {"city": "Paris"})],
    ),
    "two calls and an answer": (
        f"<|start|>assistant to=functions.a<|channel|>commentary json<|message|>{{}}<|call|>"
        f"<|start|>assistant<|channel|>commentary to=functions.b json<|message|>{WEATHER}<|call|>"
        "<|start|>assistant<|channel|>final<|message|>Done.<|return|>",
        {"content": "Done."},
        [("a", {}), ("b", {"city": "Paris"})],
    ),
}


def run(chunks: list[str]) -> tuple[dict[str, str], list[tuple[str, dict[str, Any]]], list[Any]]:
    out = rx.from_iterable(chunks).pipe(route(SPEC), tool_calls(format=SPEC.tool_format), ops.to_list()).run()
    text: dict[str, str] = {}
    calls: list[tuple[str, dict[str, Any]]] = []
    bad = [o for o in out if isinstance(o, ToolCallInvalid)]
    for o in out:
        if isinstance(o, Segment) and o.event == "chunk" and o.text:
            text[o.channel] = text.get(o.channel, "") + o.text
        elif isinstance(o, ToolCallEnd):
            calls.append((o.name, o.arguments))
    for o in out:
        if isinstance(o, ToolCallStart):
            assert "<|" not in o.name and "|>" not in o.name
    return text, calls, bad


def cut(text: str, points: list[int]) -> list[str]:
    bounds = sorted({p % (len(text) + 1) for p in points} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@pytest.mark.parametrize("name", list(CASES))
def test_whole_and_char_by_char(name: str) -> None:
    text, expected_text, expected_calls = CASES[name]
    for chunks in ([text], list(text)):
        got_text, got_calls, bad = run(chunks)
        assert (got_text, got_calls, bad) == (expected_text, expected_calls, [])
        assert all("<|" not in v for v in got_text.values())


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(list(CASES)), st.lists(st.integers(0, 400), max_size=8))
def test_every_chunking_gives_the_same_messages(name: str, points: list[int]) -> None:
    text, expected_text, expected_calls = CASES[name]
    assert run(cut(text, points))[:2] == (expected_text, expected_calls)
