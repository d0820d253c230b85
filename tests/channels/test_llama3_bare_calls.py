"""Llama 3.1/3.2 tool calls written bare: a call object (or several, separated by ``;``, or a
JSON list of them) as the whole answer, without ``<|python_tag|>``. Read only in a chat with tools;
prose is held back only while its first characters could still begin such an object."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
import reactivex as rx
import regex
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops
from tokenizers import Tokenizer

from rxstream.channels import Segment, ToolCallEnd, ToolCallInvalid, ToolCallStart
from rxstream.chat import ToolChoice, plan_chat
from rxstream.families import family
from rxstream.operators import chat_pipeline, route, tool_calls
from tests.scripted_model import ScriptedModel

LLAMA3 = family("llama3")
WITH_TOOLS = LLAMA3.with_tools()
OPENING = regex.compile(r'\A\s*(?:\[\s*)?\{\s*"(?:type"\s*:\s*"function"\s*,\s*")?name"\s*:')

CALLS: dict[str, tuple[str, list[tuple[str, dict[str, Any]]]]] = {
    "one call": (
        '{"name": "get_weather", "parameters": {"city": "Paris"}}',
        [("get_weather", {"city": "Paris"})],
    ),
    "typed, then a second after ;": (
        ' {"type": "function", "name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": 1}}',
        [("a", {}), ("b", {"x": 1})],
    ),
    "a list of calls": (
        '[{"name": "a", "parameters": {}}, {"name": "b", "parameters": {"x": [1, 2]}}]',
        [("a", {}), ("b", {"x": [1, 2]})],
    ),
    "arguments key": ('\n{"name": "b", "arguments": {"x": 2}}', [("b", {"x": 2})]),
    "tagged": ('<|python_tag|>{"name": "a", "parameters": {"q": 1}}<|eom_id|>', [("a", {"q": 1})]),
}
PROSE = [
    'Hello, the weather is {"name": "x"} nice',
    '{"city": "Paris"}',
    "[1, 2] is a list",
    "  \n The answer is 4.",
    '{ "nam": 1}',
]


def run(spec: Any, chunks: list[str], tools: Any = None) -> tuple[str, list[tuple[str, Any]], list[Any]]:
    out = (
        rx.from_iterable(chunks)
        .pipe(route(spec), tool_calls(tools, format=spec.tool_format), ops.to_list())
        .run()
    )
    text = "".join(
        o.text for o in out if isinstance(o, Segment) and o.event == "chunk" and o.channel == "content"
    )
    calls = [(o.name, o.arguments) for o in out if isinstance(o, ToolCallEnd)]
    for o in out:
        if isinstance(o, ToolCallStart):
            assert "<|" not in o.name
    return text, calls, [o for o in out if isinstance(o, ToolCallInvalid)]


def cut(text: str, points: list[int]) -> list[str]:
    bounds = sorted({p % (len(text) + 1) for p in points} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@pytest.mark.parametrize("name", list(CALLS))
def test_bare_calls_are_read_whole_and_char_by_char(name: str) -> None:
    text, expected = CALLS[name]
    for chunks in ([text], list(text)):
        assert run(WITH_TOOLS, chunks) == ("", expected, [])


@pytest.mark.parametrize("text", PROSE)
def test_prose_and_json_that_is_not_a_call_are_the_answer(text: str) -> None:
    for chunks in ([text], list(text)):
        assert run(WITH_TOOLS, chunks) == (text, [], [])


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([*CALLS, *PROSE]), st.lists(st.integers(0, 200), max_size=6))
def test_every_chunking_gives_the_same_result(key: str, points: list[int]) -> None:
    text, expected = CALLS[key] if key in CALLS else (key, [])
    whole = run(WITH_TOOLS, [text])
    assert run(WITH_TOOLS, cut(text, points)) == whole
    assert whole[1] == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([" ", "\n", "{", "[", '"', "name", "type", ":", ",", "a", "Hi", "1"]), max_size=8
    )
)
def test_prose_is_held_only_while_it_could_begin_a_call(parts: list[str]) -> None:
    """After each character, the answer shown is everything so far -- unless what came so far
    could still be the beginning of a bare call (then nothing: it is all at the start)."""
    text = "".join(parts)
    shown = ""
    pending = list(text)
    seen = ""
    with_each: list[tuple[str, str]] = []

    def record(item: Any) -> None:
        nonlocal shown
        if isinstance(item, Segment) and item.event == "chunk" and item.channel == "content":
            shown += item.text

    subject: rx.subject.Subject[str] = rx.subject.Subject()
    subject.pipe(route(WITH_TOOLS)).subscribe(record)
    for c in pending:
        seen += c
        subject.on_next(c)
        with_each.append((seen, shown))
    for prefix, out in with_each:
        could_be_call = OPENING.match(prefix, partial=True) is not None
        if could_be_call:
            assert out == "", (prefix, out)
        else:
            assert out == prefix, (prefix, out)


def test_without_tools_a_call_object_is_the_answer() -> None:
    text = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    assert run(LLAMA3.spec, [text]) == (text, [], [])


def test_an_unknown_tool_is_invalid_and_its_text_kept() -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    text, calls, bad = run(WITH_TOOLS, ['{"name": "Bob", "age": 3}'], tools)
    assert (text, calls) == ("", []) and len(bad) == 1
    assert "unknown tool" in bad[0].error and bad[0].raw == '{"name": "Bob", "age": 3}'


NATIVE_LLAMA3 = (
    "{% if tools %}TOOLS {{ tools | length }} <|python_tag|>\n{% endif %}"
    "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ m['content'] }}<|eot_id|>"
    "{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def test_a_chat_with_tools_reads_bare_calls_and_one_without_does_not(smollm2_tokenizer: Tokenizer) -> None:
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    answer = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    model = ScriptedModel(smollm2_tokenizer, NATIVE_LLAMA3, answer)
    messages = [{"role": "user", "content": "weather?"}]
    for tools, expect_call in (([weather], True), ([], False)):
        choice = ToolChoice("auto" if tools else "none")
        ids, plan = plan_chat(model, messages, reasoning_format="llama3", tools=tools, tool_choice=choice)
        assert plan.spec is not None
        out = (
            rx.from_iterable(model.encode(answer))
            .pipe(chat_pipeline(smollm2_tokenizer, plan, prompt_ids=ids), ops.to_list())
            .run()
        )
        ends = [o for o in out if isinstance(o, ToolCallEnd)]
        text = "".join(getattr(o, "text", "") for o in out if type(o).__name__ == "TextDelta")
        if expect_call:
            assert [(e.name, e.arguments) for e in ends] == [
                ("get_weather", {"city": "Paris"})
            ] and text == ""
        else:
            assert ends == [] and json.loads(text)["name"] == "get_weather"


def test_a_bare_call_opens_only_at_the_start_of_the_answer() -> None:
    """``\\A`` is the start of the stream, not of each router state: JSON after a tagged call's
    end (or after any delimiter) is not a bare call."""
    text = '<|python_tag|>{"name": "a", "parameters": {}}<|eom_id|>{"name": "b", "parameters": {}}'
    for chunks in ([text], list(text)):
        shown, calls, bad = run(WITH_TOOLS, chunks)
        assert calls == [("a", {})] and shown == '{"name": "b", "parameters": {}}' and bad == []
