"""Pythonic tool calls (the ``pythonic`` format, the Llama 4 family): recorded-style outputs with
and without ``<|python_start|>`` give the same calls, arguments, settled values and answer for
every chunking; any Python literal round-trips; bad input is an invalid call at the first
character that rules it out; schema checks; detection and the forced opening."""

from __future__ import annotations

import ast
import itertools
import json
import re
from typing import Any

import pytest
import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops

from rxstream.channels import (
    PythonicCallFormat,
    Router,
    Segment,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallInvalid,
    ToolCallParser,
    ToolCallStart,
    ToolCallValue,
    route_text,
    tool_format,
)
from rxstream.families import detect_family, family
from rxstream.operators import route, tool_calls

SPEC = family("llama4").spec
OPEN = "<|python_start|>"

TAGGED = (
    "I'll look both up.<|python_start|>[get_weather(city='Zürich', days=3, "
    "note='say \"hi\"\\n\\t\\u00e9\\x41\\\\', coords=(47.37, -8.5e1), hourly=False), "
    'get_time(tz="UTC", verbose=True, tags=[\'a\', "b",], opts={\'x\': None, "n": [1, [2]]},)]'
    "<|python_end|><|eom|>"
)
BARE = "[get_weather(city='東京', days=-1), get_time()]<|eot|>"
WEATHER = {
    "city": "Zürich",
    "days": 3,
    "note": 'say "hi"\n\téA\\',
    "coords": [47.37, -85.0],
    "hourly": False,
}
TIME = {"tz": "UTC", "verbose": True, "tags": ["a", "b"], "opts": {"x": None, "n": [1, [2]]}}
CASES: dict[str, tuple[str, list[tuple[str, dict[str, Any]]], str]] = {
    "tagged": (TAGGED, [("get_weather", WEATHER), ("get_time", TIME)], "I'll look both up."),
    "bare": (BARE, [("get_weather", {"city": "東京", "days": -1}), ("get_time", {})], ""),
}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "units": {"enum": ["celsius", "fahrenheit"]},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
]


def run(chunks: list[str], tools: list[dict[str, Any]] | None = None, prompt: str = "") -> list[Any]:
    return (
        rx.from_iterable(chunks)
        .pipe(route(SPEC, prompt=prompt), tool_calls(tools, format=SPEC.tool_format), ops.to_list())
        .run()
    )


def normal(events: list[Any]) -> tuple[list[Any], str]:
    """The tool events with ids dropped and each run of deltas joined, and the answer."""
    out: list[Any] = []
    for e in events:
        if isinstance(e, ToolCallDelta):
            if out and out[-1][0] == "delta" and out[-1][1] == e.index:
                out[-1] = ("delta", e.index, out[-1][2] + e.text)
            else:
                out.append(("delta", e.index, e.text))
        elif isinstance(e, ToolCallStart):
            out.append(("start", e.index, e.name))
        elif isinstance(e, ToolCallValue):
            out.append(("value", e.index, e.path, e.value))
        elif isinstance(e, ToolCallEnd):
            out.append(("end", e.index, e.name, e.arguments, e.arguments_text))
        elif isinstance(e, ToolCallInvalid):
            out.append(("invalid", e.index, e.error, e.position, e.raw))
    answer = "".join(
        e.text for e in events if isinstance(e, Segment) and e.channel == "content" and e.event == "chunk"
    )
    return out, answer


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(points) if b > a]


def chunkings(text: str) -> list[list[str]]:
    return [[text], list(text), *([text[i : i + n] for i in range(0, len(text), n)] for n in (2, 3, 7))]


def check(name: str, chunks: list[str]) -> None:
    text, calls, answer = CASES[name]
    events, got_answer = normal(run(chunks))
    assert events == normal(run([text]))[0]
    assert got_answer == answer
    ends = [(e[2], e[3]) for e in events if e[0] == "end"]
    assert ends == calls
    assert not [e for e in events if e[0] == "invalid"]
    for e in events:
        if e[0] == "end":
            deltas = "".join(d[2] for d in events if d[0] == "delta" and d[1] == e[1])
            assert deltas == e[4] and json.loads(e[4]) == e[3]
            tops = {d[2][0]: d[3] for d in events if d[0] == "value" and d[1] == e[1] and len(d[2]) == 1}
            assert tops == e[3]  # each argument's settled value, once
            assert not any(tok in e[4] for tok in ("<|", "|>"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_whole_per_char_and_fixed_chunks_give_the_same_calls(name: str) -> None:
    for chunks in chunkings(CASES[name][0]):
        check(name, chunks)


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30))
def test_any_chunking_gives_the_same_calls(name: str, cuts: list[int]) -> None:
    check(name, split(CASES[name][0], cuts))


def test_the_values_settle_where_they_end() -> None:
    """A value is sent with the chunk that settles it: a string at its quote, a number at the
    character after it, a literal at its last letter, a container at its bracket."""
    text = OPEN + "[f(s='ab', n=12, b=True, l=[1])]" + "<|python_end|>"
    seen: list[tuple[str, Any]] = []
    fed = ""
    router = Router(SPEC)
    parser = ToolCallParser(SPEC.tool_format or "json")
    for c in text:
        fed += c
        for seg in router.feed(c):
            for e in parser.feed(seg):
                if isinstance(e, ToolCallValue):
                    seen.append((fed[len(OPEN) :], e.value))
    assert seen == [
        ("[f(s='ab'", "ab"),
        ("[f(s='ab', n=12,", 12),
        ("[f(s='ab', n=12, b=True", True),
        ("[f(s='ab', n=12, b=True, l=[1]", 1),
        ("[f(s='ab', n=12, b=True, l=[1]", [1]),
    ]


_LEAF = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
)
_VALUE = st.recursive(
    _LEAF,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_NAME = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda s: s not in {"and", "as", "if", "in", "is", "or", "for", "def", "del", "not", "try"}
)


def _jsonish(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_jsonish(x) for x in v]
    if isinstance(v, dict):
        return {k: _jsonish(x) for k, x in v.items()}
    return v


@settings(max_examples=150, deadline=None)
@given(args=st.dictionaries(_NAME, _VALUE, max_size=4), cuts=st.lists(st.integers(0, 10_000), max_size=20))
def test_any_python_literal_arguments_round_trip(args: dict[str, Any], cuts: list[int]) -> None:
    call = "[tool(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")]"
    parsed = ast.parse(call, mode="eval").body
    assert isinstance(parsed, ast.List) and isinstance(parsed.elts[0], ast.Call)
    assert {k.arg: ast.literal_eval(k.value) for k in parsed.elts[0].keywords} == args  # Python's reading
    events, _ = normal(run(split(OPEN + call + "<|python_end|>", cuts)))
    ends = [e for e in events if e[0] == "end"]
    assert [e[3] for e in ends] == [_jsonish(args)], events
    assert json.loads(ends[0][4]) == _jsonish(args)


def _invalid(text: str, tools: list[dict[str, Any]] | None = None) -> ToolCallInvalid:
    results = []
    for chunks in chunkings(text):
        events = run(chunks, tools)
        bad = [e for e in events if isinstance(e, ToolCallInvalid)]
        assert len(bad) == 1, (chunks, events)
        results.append(normal(events)[0])
    assert all(r == results[0] for r in results)  # the deltas before it too, for every chunking
    return bad[0]


def _at(text: str, marker: str) -> int:
    """The position of ``marker`` in the region's text (after ``<|python_start|>``)."""
    return text.index(marker) - len(OPEN)


@pytest.mark.parametrize(
    ("call", "marker", "message"),
    [
        ("[get_weather('Paris')]", "'Paris", "positional argument"),
        ("[get_weather(city)]", ")]", "positional argument"),
        ("[get_weather(city=x)]", "x)", "a name"),
        ("[get_weather(city=f'P')]", "f'", "prefixed string"),
        ("[get_weather(days=1+2)]", "+", "expected ','"),
        ("[get_weather(city=str(1))]", "str(", "a call"),
        ("[get_weather(days=Nonsense)]", "sense", "not a literal"),
        ("[get_weather(t=(1))]", "))", "not a tuple"),
        ("[get_weather(a=1, a=2)]", "=2", "repeated"),
        ("[get_weather(class=1)]", "=1", "keyword"),
        ("[get_weather(a={1: 2})]", "1:", "dict key"),
        ("[get_weather(a='x\ny')]", "\ny", "line break"),
        ("[get_weather(a=01)]", "1)", "expected ','"),
        ("[get_weather(a=1)] and more", "and", "text after"),
        ("get_weather(a=1)", "get", "expected '['"),
    ],
)
def test_bad_input_is_invalid_at_the_first_character_that_rules_it_out(
    call: str, marker: str, message: str
) -> None:
    text = OPEN + call + "<|python_end|>"
    bad = _invalid(text)
    assert bad.position == _at(text, marker) and message in bad.error, bad
    assert bad.raw == text  # the region with its delimiters
    assert bad.index == (1 if message == "text after" else 0)  # after a complete call: the next index


def test_an_unclosed_string_is_invalid_at_the_region_end() -> None:
    text = OPEN + "[get_weather(city='Par<|python_end|>"
    bad = _invalid(text)
    assert bad.position == _at(text, "<|python_end|>") and "inside a string" in bad.error


def test_a_call_cut_off_by_the_stream_end_is_invalid_there() -> None:
    bad = _invalid("[get_weather(city='Paris', days=3")
    assert bad.position == len("city='Paris', days=3") and "complete" in bad.error


def test_nesting_is_bounded_like_json() -> None:
    text = OPEN + "[f(a=" + "[" * 300
    bad = _invalid(text)
    assert bad.position == len("[f(a=") + 255 and "nesting" in bad.error


@pytest.mark.parametrize(
    ("call", "marker", "message"),
    [
        ("[get_wx(city='P')]", "x(", "unknown tool"),
        ("[get_weather(city='P'), now()]", "now", "unknown tool"),
        ("[get_weather(days=3)]", ")]", "missing required"),
        ("[get_weather(city='P', days='3')]", "'3'", "integer"),
        ("[get_weather(city='P', days=1.5)]", ")]", "whole number"),
        ("[get_weather(city='P', days=2e-1)]", "1)", "whole"),
        ("[get_weather(city='P', units='kelvin')]", "kelvin", "matches none"),
        ("[get_weather(city='P', units=True)]", "True", "expected"),
        ("[get_weather(city='P', country='X')]", "ountry", "matches none"),
        ("[get_weather(city='P', tags=['a', 2])]", "2]", "string"),
    ],
)
def test_schema_violations_are_invalid_where_they_are_decided(call: str, marker: str, message: str) -> None:
    text = OPEN + call + "<|python_end|>"
    bad = _invalid(text, TOOLS)
    assert bad.position == _at(text, marker) and message in bad.error, bad


def test_calls_that_fit_the_schema_pass() -> None:
    text = (
        OPEN + "[get_weather(city='P', days=2, units='celsius', tags=('a',)), get_time(x={})]<|python_end|>"
    )
    events, _ = normal(run(list(text), TOOLS))
    assert [e[3] for e in events if e[0] == "end"] == [
        {"city": "P", "days": 2, "units": "celsius", "tags": ["a"]},
        {"x": {}},
    ]


def test_a_bare_list_with_an_unknown_first_name_is_invalid_at_zero() -> None:
    bad = _invalid("[nope(a=1)]<|eot|>", TOOLS)
    assert bad.position == 0 and "unknown tool 'nope'" in bad.error


_OPENER_PREFIX = re.compile(r"\s*(?:\[\s*(?:[A-Za-z_]\w*\s*)?)?")
"""The texts a bare list's opener could still grow from (``[``, a name, spaces)."""


@pytest.mark.parametrize("prose", ["[1] See the note.", "Hello [f(a=1)]", "[f is not a call", " [x]"])
def test_prose_is_not_a_call_and_goes_out_once_ruled_out(prose: str) -> None:
    events, answer = normal(run(list(prose)))
    assert events == [] and answer == prose
    router = Router(SPEC)
    for k, c in enumerate(prose):
        router.feed(c)
        alive = _OPENER_PREFIX.fullmatch(prose[: k + 1]) is not None
        assert router.held == (prose[: k + 1] if alive else ""), (k, router.held)


def test_a_bare_list_starts_at_the_answer_after_the_prompt_anchor() -> None:
    prompt = (
        "<|begin_of_text|><|header_start|>user<|header_end|>\n\nWeather?<|eot|>"
        "<|header_start|>assistant<|header_end|>\n\n"
    )
    events, answer = normal(run(list("[get_time(tz='UTC')]<|eot|>"), prompt=prompt))
    assert [e[3] for e in events if e[0] == "end"] == [{"tz": "UTC"}] and answer == ""
    segs = route_text("[get_time()]", SPEC, prompt=prompt)
    assert (segs[0].channel, segs[0].event, segs[0].text) == ("tool_call", "open", "[get_time(")


def test_the_format_is_known_by_name_and_opens_a_forced_call() -> None:
    assert isinstance(tool_format("pythonic"), PythonicCallFormat)
    assert family("llama4").forced_call("get_time") == "<|python_start|>[get_time("
    assert family("llama4").forced_call(None) == "<|python_start|>"
    opening = family("llama4").forced_call("get_time")
    assert opening is not None
    events, _ = normal(run(list(opening + "tz='UTC')]<|python_end|>")))
    assert [(e[2], e[3]) for e in events if e[0] == "end"] == [("get_time", {"tz": "UTC"})]


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("<|header_start|>assistant<|header_end|>\n\n{{ '<|python_start|>' }}", "llama4"),
        ("<|start_header_id|>assistant<|end_header_id|> <|python_tag|>", "llama3"),
    ],
)
def test_detection(template: str, expected: str) -> None:
    found = detect_family(template)
    assert found is not None and found.name == expected


@settings(max_examples=200, deadline=None)
@given(
    body=st.text(alphabet="[](){}'\",=:.-+_ \n\\aTFNrueoxu0179eE", max_size=40),
    cuts=st.lists(st.integers(0, 10_000), max_size=10),
    with_tools=st.booleans(),
)
def test_any_text_is_calls_or_one_invalid_call_the_same_in_every_chunking(
    body: str, cuts: list[int], with_tools: bool
) -> None:
    """Whatever the text, no error escapes and the chunking changes nothing; a region that
    does not fail ends every call it starts."""
    text = OPEN + "[get_weather(" + body + "<|python_end|>"
    tools = TOOLS if with_tools else None
    whole = normal(run([text], tools))
    assert normal(run(split(text, cuts), tools)) == whole
    assert normal(run(list(text), tools)) == whole
    kinds = [e[0] for e in whole[0]]
    assert kinds.count("invalid") == 1 or kinds.count("start") == kinds.count("end")
