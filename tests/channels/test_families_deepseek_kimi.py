"""The DeepSeek-V3 and Kimi-K2 families: recorded-style outputs (two calls, answer text around
them) give the same calls and answer for every chunking, with none of the framing tokens in a
name, the answer or the arguments; bad JSON is an invalid call; detection; forced calls."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops

from rxstream.channels import Segment, ToolCallEnd, ToolCallInvalid, ToolCallStart, route_text
from rxstream.families import detect_family, family
from rxstream.operators import route, tool_calls

DEEPSEEK_V3 = (
    "<think>\nTwo cities; call get_weather, then get_time. Not <｜tool▁sep｜> yet.\n</think>\n\n"
    "Let me check both.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
    '```json\n{"city": "Zürich", "days": 3, "opts": {"fields": ["temp", "wind"], "note": "say \\"hi\\""}}\n'
    "```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}\n"
    "```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>"
)

KIMI_K2 = (
    "Checking both cities now.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "東京", "days": 3, "opts": {"fields": ["temp"], "x": null}}'
    "<|tool_call_end|><|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}"
    "<|tool_call_end|><|tool_calls_section_end|><|im_end|>"
)

WEATHER = {"city": "Zürich", "days": 3, "opts": {"fields": ["temp", "wind"], "note": 'say "hi"'}}
CASES: dict[str, tuple[str, list[tuple[str, dict[str, Any]]], str]] = {
    "deepseek-v3": (DEEPSEEK_V3, [("get_weather", WEATHER), ("get_time", {})], "\n\nLet me check both."),
    "kimi-k2": (
        KIMI_K2,
        [
            ("get_weather", {"city": "東京", "days": 3, "opts": {"fields": ["temp"], "x": None}}),
            ("get_time", {}),
        ],
        "Checking both cities now.",
    ),
}
SPECIAL = ("<｜", "｜>", "▁", "<|", "|>", "```", "functions.")


def run(name: str, chunks: list[str]) -> list[Any]:
    spec = family(name).spec
    return (
        rx.from_iterable(chunks).pipe(route(spec), tool_calls(format=spec.tool_format), ops.to_list()).run()
    )


def summary(events: list[Any]) -> tuple[list[str], list[tuple[str, dict[str, Any]]], str]:
    starts = [e.name for e in events if isinstance(e, ToolCallStart)]
    ends = [(e.name, e.arguments) for e in events if isinstance(e, ToolCallEnd)]
    answer = "".join(
        e.text for e in events if isinstance(e, Segment) and e.channel == "content" and e.event == "chunk"
    )
    return starts, ends, answer


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(points) if b > a]


def check(name: str, chunks: list[str]) -> None:
    _, calls, answer = CASES[name]
    events = run(name, chunks)
    starts, ends, got_answer = summary(events)
    assert starts == [n for n, _ in calls]
    assert ends == calls
    assert got_answer == answer
    assert not [e for e in events if isinstance(e, ToolCallInvalid)]
    for e in events:
        if isinstance(e, ToolCallEnd):
            assert json.loads(e.arguments_text) == e.arguments
        shown = [e.name] if isinstance(e, ToolCallStart) else []
        if isinstance(e, ToolCallEnd):
            shown += [e.name, e.arguments_text]
        if isinstance(e, Segment) and e.channel == "content" and e.event == "chunk":
            shown.append(e.text)
        for s in shown:
            assert not any(tok in s for tok in SPECIAL), (name, s)


@pytest.mark.parametrize("name", sorted(CASES))
def test_whole_per_char_and_fixed_chunks_give_the_same_calls(name: str) -> None:
    text = CASES[name][0]
    check(name, [text])
    check(name, list(text))
    for size in (2, 3, 5, 7, 16):
        check(name, [text[i : i + size] for i in range(0, len(text), size)])


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30))
def test_any_chunking_gives_the_same_calls(name: str, cuts: list[int]) -> None:
    check(name, split(CASES[name][0], cuts))


def test_the_framing_is_not_in_any_channel_text() -> None:
    for name, (text, _, _) in CASES.items():
        segs = route_text(text, family(name).spec)
        chunks = [s for s in segs if s.event == "chunk" and s.channel != "reasoning"]
        assert "".join(s.text for s in segs) == text  # nothing lost
        for s in chunks:
            assert not any(tok in s.text for tok in SPECIAL if tok != "```"), (name, s)
        # the reasoning has a lookalike token in it (text, not the framing)
        opens = [s.captures.get("name") for s in segs if s.event == "open" and s.channel == "tool_call"]
        assert len(opens) == 2


def test_deepseek_reasoning_and_the_bare_fence_close() -> None:
    segs = route_text(DEEPSEEK_V3, family("deepseek-v3").spec)
    reasoning = "".join(s.text for s in segs if s.channel == "reasoning" and s.event == "chunk")
    assert reasoning == "\nTwo cities; call get_weather, then get_time. Not <｜tool▁sep｜> yet.\n"
    # no newline before the closing fence: the close is still found
    text = DEEPSEEK_V3.replace('"}}\n```', '"}}```')
    assert summary(run("deepseek-v3", list(text)))[1] == CASES["deepseek-v3"][1]


def test_the_prompt_anchor_and_the_open_think() -> None:
    prompt = "<｜begin▁of▁sentence｜><｜User｜>Weather?<｜Assistant｜><think>\n"
    spec = family("deepseek-v3").spec
    segs = route_text("Okay.\n</think>\n\nSunny.", spec, prompt=prompt)
    assert [(s.channel, s.event) for s in segs][:2] == [("reasoning", "chunk"), ("reasoning", "close")]


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("deepseek-v3", DEEPSEEK_V3.replace('"days": 3', '"days": 3,,')),
        ("kimi-k2", KIMI_K2.replace('"days": 3', '"days": 3,,')),
    ],
)
def test_bad_json_is_an_invalid_call_and_the_next_call_still_parses(name: str, bad: str) -> None:
    for chunks in ([bad], list(bad)):
        events = run(name, chunks)
        invalid = [e for e in events if isinstance(e, ToolCallInvalid)]
        assert len(invalid) == 1 and invalid[0].index == 0 and "get_weather" in invalid[0].raw
        assert [e.name for e in events if isinstance(e, ToolCallEnd)] == ["get_time"]


def test_kimi_name_keeps_functions_when_a_tool_has_the_whole_name() -> None:
    tools = [
        {"type": "function", "function": {"name": "functions.get_time", "parameters": {"type": "object"}}}
    ]
    text = "<|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>{}<|tool_call_end|>"
    spec = family("kimi-k2").spec
    events = (
        rx.from_iterable([text])
        .pipe(route(spec), tool_calls(tools, format=spec.tool_format), ops.to_list())
        .run()
    )
    assert [e.name for e in events if isinstance(e, ToolCallEnd)] == ["functions.get_time"]


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{% if tools %}<｜tool▁calls▁begin｜>{% endif %}<｜Assistant｜><think>\\n", "deepseek-v3"),
        ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>", "deepseek-v3"),
        ("<|im_assistant|>assistant<|im_middle|><|tool_calls_section_begin|>", "kimi-k2"),
        ("<|tool_calls_section_begin|><think>", "kimi-k2"),
        ("<think>", "deepseek-r1"),
    ],
)
def test_detection(template: str, expected: str) -> None:
    found = detect_family(template)
    assert found is not None and found.name == expected


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_forced_call_opening_parses_as_that_call(name: str) -> None:
    """The forced opening (the prompt's end) plus the model's continuation is the call."""
    opening = family(name).forced_call("get_time")
    assert opening is not None and "get_time" in opening
    assert family(name).forced_call(None) is not None
    rest = {
        "deepseek-v3": "{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "kimi-k2": "{}<|tool_call_end|>",
    }[name]
    events = run(name, list(opening + rest))
    assert summary(events)[1] == [("get_time", {})]
