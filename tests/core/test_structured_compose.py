"""``compose``: one generation's grammar from its route (SEMANTICS §15). The grammar is walked
token by token with a real tokenizer (the tiny model's byte-level BPE): reasoning passes whatever
it holds, the answer and the tool calls are held to their formats."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from rxstream.backends.convert._tokenizer import train_tiny_tokenizer
from rxstream.channels import Region, RouteSpec, SpecialToken
from rxstream.chat import FALLBACK
from rxstream.families import family
from rxstream.structured import Grammar, GrammarTokenizer, OutputFormat, UnsupportedConstraint, compose

TOK: Tokenizer = train_tiny_tokenizer(384)
GT = GrammarTokenizer(TOK, 384, [2])
SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "tags": {"type": "array", "items": {"enum": ["x", "y"]}}},
    "required": ["a", "tags"],
    "additionalProperties": False,
}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def walk(grammar: Grammar, text: str | Sequence[int]) -> tuple[int | None, bool]:
    """(index of the first token the grammar refuses, or None; whether it is complete after all)."""
    ids = TOK.encode(text, add_special_tokens=False).ids if isinstance(text, str) else list(text)
    c = GT.constraint(grammar)
    for n, i in enumerate(ids):
        if not c.allowed()[i]:
            return n, False
        c.advance(i)
    return None, c.accepting


def accepts(grammar: Grammar, text: str | Sequence[int]) -> bool:
    refused, done = walk(grammar, text)
    return refused is None and done


def test_nothing_constrained_is_no_grammar() -> None:
    assert compose(None, OutputFormat()) is None
    assert compose(family("qwen3").spec, OutputFormat(), tools=[WEATHER], choice="auto") is None


def test_the_whole_output_without_a_route() -> None:
    g = compose(None, OutputFormat.json_schema(SCHEMA))
    assert g is not None
    assert accepts(g, '{"a": 1, "tags": ["x", "y"]}')
    assert walk(g, '{"a": "1"}')[0] is not None
    assert walk(g, ' {"a": 1, "tags": []}')[0] == 0  # not even a space before it


def test_reasoning_is_free_and_the_answer_follows_the_schema() -> None:
    g = compose(family("qwen3").spec, OutputFormat.json_schema(SCHEMA))
    assert g is not None and "after free reasoning" in g.describe
    thinking = '<think>\nMaybe {"a": "one"} -- no: [1, 2}} "quotes" and <tool_call>?\n</think>\n\n'
    assert accepts(g, thinking + '{"a": 1, "tags": []}')
    assert accepts(g, '{"a": 1, "tags": []}')  # no reasoning at all
    refused, _ = walk(g, thinking + '{"a": "one"}')
    assert refused is not None and refused > len(TOK.encode(thinking).ids)
    assert not accepts(g, thinking)  # the answer must come


def test_a_prompt_that_opened_the_reasoning_starts_inside_it() -> None:
    spec = family("deepseek-r1").spec
    g = compose(spec, OutputFormat.json_object(), start_channel="reasoning")
    assert g is not None
    assert accepts(g, 'no braces needed here }]"</think>\n{"k": [1]}')
    assert not accepts(g, '{"k": 1}')  # still reasoning: the answer has not started


def test_special_token_delimiters() -> None:
    spec = RouteSpec(
        (Region("reasoning", (SpecialToken(1, "<|im_start|>"),), (SpecialToken(0, "<|endoftext|>"),)),),
        kinds={"reasoning": "reasoning"},
    )
    g = compose(spec, OutputFormat.regex("[0-9]{3}"))
    assert g is not None
    think = TOK.encode("any <think> text", add_special_tokens=False).ids
    assert accepts(g, [1, *think, 0, *TOK.encode("123").ids])
    assert not accepts(g, [1, *think, 0, *TOK.encode("12x").ids])
    assert walk(g, [1, *think, 2])[0] is not None  # the end of turn is no closer


def test_forced_calls() -> None:
    required = compose(FALLBACK.spec, OutputFormat(), tools=[WEATHER], choice="required")
    assert required is not None
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    assert accepts(required, call)
    assert accepts(required, call + "\n" + call)  # parallel calls
    assert walk(required, "Sure! " + call)[0] == 0  # the answer is the call
    assert walk(required, '<tool_call>\n{"name": "get_weather", "arguments": {"town": "P"}}')[0] is not None
    named = compose(FALLBACK.spec, OutputFormat(), tools=[WEATHER], choice="named", named="get_weather")
    assert named is not None
    assert accepts(named, call) and not accepts(named, call + "\n" + call)  # one call
    single = compose(FALLBACK.spec, OutputFormat(), tools=[WEATHER], choice="required", parallel=False)
    assert single is not None and not accepts(single, call + call)


def test_forced_call_after_free_reasoning() -> None:
    g = compose(family("qwen3").spec, OutputFormat(), tools=[WEATHER], choice="required")
    assert g is not None
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>'
    assert accepts(g, "<think>\nI should call get_weather.\n</think>\n\n" + call)


def test_strict_tools_let_text_through_and_check_the_calls() -> None:
    strict = {"type": "function", "function": {**WEATHER["function"], "strict": True}}
    g = compose(FALLBACK.spec, OutputFormat(), tools=[strict], choice="auto")
    assert g is not None
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    assert accepts(g, "Just text, with <tool no call.")
    assert accepts(g, "Let me look it up. " + call)
    bad = 'Sure. <tool_call>\n{"name": "get_weather", "arguments": {"city": 5}}'
    assert walk(g, bad)[0] is not None
    assert walk(g, 'x <tool_call>{"name": "other", "arguments": {}}')[0] is not None


def test_formats_that_cannot_be_constrained_say_so() -> None:
    with pytest.raises(UnsupportedConstraint, match="cannot be constrained yet"):
        compose(family("qwen3-coder").spec, OutputFormat(), tools=[WEATHER], choice="required")
    from rxstream.text import rx

    spec = RouteSpec((Region("reasoning", (rx("<t[0-9]>"),), ("</t>",)),), kinds={"reasoning": "reasoning"})
    with pytest.raises(UnsupportedConstraint, match="regular expression"):
        compose(spec, OutputFormat.json_object())


# ------------------------------------------------------------------ properties
_CHARS = st.characters(codec="utf-8", exclude_categories=["Cc", "Cs"])
"""String contents: the engine writes no raw control characters (nor DEL) in a JSON string."""
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(_CHARS, max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(_CHARS, max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=150)
@given(
    thinking=st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40),
    value=st.dictionaries(st.text(_CHARS, max_size=5), _JSON, max_size=3),
)
def test_any_reasoning_then_any_object(thinking: str, value: dict[str, Any]) -> None:
    """Whatever the reasoning holds (short of its closer), it passes; any JSON object written as
    the grammar's separators are (``", "``, ``": "``) is an answer of ``json_object``."""
    if "</think>" in thinking:
        thinking = thinking.replace("</think>", "")
    g = compose(family("qwen3").spec, OutputFormat.json_object())
    assert g is not None
    text = f"<think>{thinking}</think>\n" + json.dumps(value, ensure_ascii=False)
    assert accepts(g, text)
