"""The GLM-4.5 family: a recorded-style output (reasoning, answer text, a call with string,
number, boolean and object values, a call without arguments) gives the same calls, arguments,
settled values and answer for every chunking, with no tag text in a name, a value or the answer;
schema violations and unknown tools are invalid calls at the deciding character; detection, the
prompt anchor and forced calls."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops

from rxstream.channels import (
    Segment,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallInvalid,
    ToolCallParser,
    ToolCallStart,
    ToolCallValue,
    route_text,
)
from rxstream.channels._tool_xml import XmlSyntax
from rxstream.families import detect_family, family
from rxstream.operators import route, tool_calls

GLM = family("glm-4.5")
SPEC = GLM.spec

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
                    "hourly": {"type": "boolean"},
                    "opts": {
                        "type": "object",
                        "properties": {
                            "fields": {"type": "array", "items": {"type": "string"}},
                            "note": {"type": "string"},
                        },
                    },
                    "memo": {"type": "string"},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {"name": "get_time", "parameters": {"type": "object", "additionalProperties": False}},
    },
]

CALL_1 = (
    "get_weather\n<arg_key>city</arg_key>\n<arg_value>Zürich </arg_val> <b>centre</b></arg_value>\n"
    "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n"
    "<arg_key>hourly</arg_key>\n<arg_value>true</arg_value>\n"
    '<arg_key>opts</arg_key>\n<arg_value>{"fields": ["temp", "wind"], "note": "say \\"hi\\""}</arg_value>\n'
    "<arg_key>memo</arg_key>\n<arg_value>line one\nline two</arg_value>\n"
)
CALL_2 = "get_time"
OUTPUT = (
    "<think>Two things: the weather (3 days) and the time. No <arg_key> here, nor <tool_call>.</think>\n"
    "I'll check the weather, then the time.\n"
    f"<tool_call>{CALL_1}</tool_call>\n<tool_call>{CALL_2}</tool_call><|user|>"
)
WEATHER = {
    "city": "Zürich </arg_val> <b>centre</b>",
    "days": 3,
    "hourly": True,
    "opts": {"fields": ["temp", "wind"], "note": 'say "hi"'},
    "memo": "line one\nline two",
}
CALLS = [("get_weather", WEATHER), ("get_time", {})]
ANSWER = "\nI'll check the weather, then the time.\n\n"
VALUES = {
    (0, ("city",)): WEATHER["city"],
    (0, ("days",)): 3,
    (0, ("hourly",)): True,
    (0, ("opts", "fields", 0)): "temp",
    (0, ("opts", "fields", 1)): "wind",
    (0, ("opts", "note")): 'say "hi"',
    (0, ("opts",)): WEATHER["opts"],
    (0, ("memo",)): "line one\nline two",
}
TAGS = (
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "<|",
)


def ids(index: int) -> str:
    return f"call_{index}"


def run(chunks: list[str], tools: Any = TOOLS) -> list[Any]:
    return (
        rx.from_iterable(chunks)
        .pipe(route(SPEC), tool_calls(tools, format=SPEC.tool_format, id_factory=ids), ops.to_list())
        .run()
    )


def merged(events: list[Any]) -> list[Any]:
    """Adjacent chunks of one channel and adjacent deltas of one call joined."""
    out: list[Any] = []
    for ev in events:
        last = out[-1] if out else None
        if isinstance(ev, ToolCallDelta) and isinstance(last, ToolCallDelta) and last.index == ev.index:
            out[-1] = ToolCallDelta(ev.index, last.text + ev.text)
        elif (
            isinstance(ev, Segment)
            and isinstance(last, Segment)
            and ev.event == last.event == "chunk"
            and ev.channel == last.channel
        ):
            out[-1] = Segment(ev.channel, "chunk", last.text + ev.text)
        else:
            out.append(ev)
    return out


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(points) if b > a]


WHOLE = merged(run([OUTPUT]))


def check(chunks: list[str]) -> None:
    events = run(chunks)
    assert merged(events) == WHOLE
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["get_weather", "get_time"]
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert [(e.name, e.arguments) for e in ends] == CALLS
    for end in ends:
        deltas = "".join(e.text for e in events if isinstance(e, ToolCallDelta) and e.index == end.index)
        assert deltas == end.arguments_text and json.loads(deltas) == end.arguments
    values = [((e.index, e.path), e.value) for e in events if isinstance(e, ToolCallValue)]
    assert dict(values) == VALUES and len(values) == len(VALUES)  # each value once
    answer = "".join(
        e.text for e in events if isinstance(e, Segment) and e.channel == "content" and e.event == "chunk"
    )
    assert answer == ANSWER
    assert not [e for e in events if isinstance(e, ToolCallInvalid)]
    shown = [answer, *(e.name for e in ends), *(e.arguments_text for e in ends)]
    shown += [e.value for e in events if isinstance(e, ToolCallValue) and isinstance(e.value, str)]
    for text in shown:
        assert not any(tag in text for tag in TAGS), text


def test_whole_per_char_and_fixed_chunks_give_the_same_calls() -> None:
    check([OUTPUT])
    check(list(OUTPUT))
    for size in (2, 3, 5, 7, 11, 16):
        check([OUTPUT[i : i + size] for i in range(0, len(OUTPUT), size)])


@settings(max_examples=150, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40))
def test_any_chunking_gives_the_same_calls(cuts: list[int]) -> None:
    check(split(OUTPUT, cuts))


def test_each_value_goes_out_with_the_end_of_its_parameter() -> None:
    """Fed one character at a time, a parameter's values go out with the '>' of its
    '</arg_value>' (a string could go on, '3' could still become '30'), never before."""
    seen: dict[tuple[int, tuple[Any, ...]], int] = {}
    obs = rx.from_iterable(list(OUTPUT)).pipe(route(SPEC))
    parser = ToolCallParser(SPEC.tool_format or "xml", TOOLS, id_factory=ids)
    fed = 0
    for segment in obs.pipe(ops.to_list()).run():
        fed += len(segment.text)
        for e in parser.feed(segment) if segment.channel == "tool_call" else []:
            if isinstance(e, ToolCallValue):
                seen[(e.index, e.path)] = fed
    ends = [i + len("</arg_value>") for i in range(len(OUTPUT)) if OUTPUT.startswith("</arg_value>", i)]
    keys = ["city", "days", "hourly", "opts", "memo"]
    assert {k: seen[(0, (k,))] for k in keys} == dict(zip(keys, ends, strict=True))
    assert seen[(0, ("opts", "note"))] == seen[(0, ("opts",))]


def test_the_reasoning_keeps_its_lookalike_tags_and_nothing_is_lost() -> None:
    segs = route_text(OUTPUT, SPEC)
    assert "".join(s.text for s in segs) == OUTPUT
    reasoning = "".join(s.text for s in segs if s.channel == "reasoning" and s.event == "chunk")
    assert reasoning == "Two things: the weather (3 days) and the time. No <arg_key> here, nor <tool_call>."
    assert [s.text for s in segs if s.event == "close" and s.channel == "content"] == ["<|user|>"]


@pytest.mark.parametrize(
    "text",
    [
        "get_time",
        "get_time\n",
        "\nget_time\n\n",
        "get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value>",
        "get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo",  # the region ends the value
        "get_weather\n<arg_key>city</arg_key>\n<arg_value>\nOslo\n</arg_value>\n",
    ],
)
def test_call_shapes(text: str) -> None:
    name = text.split("<")[0].strip()
    expected = {} if name == "get_time" else {"city": "Oslo"}
    for chunks in ([text], list(text)):
        events = parse(chunks)
        assert [(e.name, e.arguments) for e in events if isinstance(e, ToolCallEnd)] == [(name, expected)]


def test_a_missing_value_close_ends_at_the_next_key() -> None:
    text = "get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo\n<arg_key>days</arg_key>\n<arg_value>2"
    end = parse([text])[-1]
    assert isinstance(end, ToolCallEnd) and end.arguments == {"city": "Oslo", "days": 2}


def test_values_without_a_schema_are_json_when_they_parse_as_json() -> None:
    text = (
        "f\n<arg_key>n</arg_key>\n<arg_value>12</arg_value>\n<arg_key>s</arg_key>\n"
        "<arg_value>12 monkeys</arg_value>\n<arg_key>o</arg_key>\n<arg_value>[1, {}]</arg_value>\n"
        "<arg_key>b</arg_key>\n<arg_value>false</arg_value>\n"
    )
    for chunks in ([text], list(text)):
        end = parse(chunks, tools=None)[-1]
        assert isinstance(end, ToolCallEnd)
        assert end.arguments == {"n": 12, "s": "12 monkeys", "o": [1, {}], "b": False}


def parse(
    chunks: list[str], tools: Any = TOOLS, invalid_at: str = "region_end", close: str = "</tool_call>"
) -> list[Any]:
    """One region through the family's format (``close=""``: the stream ends inside it)."""
    p = ToolCallParser(SPEC.tool_format or "xml", tools, id_factory=ids, invalid_at=invalid_at)  # type: ignore[arg-type]
    out = p.feed(Segment("tool_call", "open", "<tool_call>"))
    for chunk in chunks:
        out += p.feed(Segment("tool_call", "chunk", chunk))
    out += p.feed(Segment("tool_call", "close", close)) if close else p.finish()
    return out


W = "get_weather\n"
INVALID = [
    # the text with "|" before the deciding character (at the end: the region's end decides), the error
    ("get_we|ther\n", "unknown tool 'get_wet...'"),
    ("get_weathe|\n", "unknown tool 'get_weathe'"),
    ("get_weathe|</tool_call>", "unknown tool"),  # a tag ends the name
    ("\n\n|", "empty tool call"),
    (f"{W}<arg_key>|town</arg_key>", "key 't...' is not allowed"),
    (f"{W}<arg_key>cit|</arg_key>", "key 'cit' is not allowed"),
    (f"{W}<arg_key>ci|\nty</arg_key>", "expected '</arg_key>' to end the parameter name"),
    (f"{W}<arg_key>city</arg_key>\n|Oslo", "expected '<arg_value>'"),
    (f"{W}<arg_key>days</arg_key>\n<arg_value>|three</arg_value>", "expected integer, got boolean"),
    (f"{W}<arg_key>days</arg_key>\n<arg_value>|x3</arg_value>", "invalid JSON"),
    (f"{W}<arg_key>days</arg_key>\n<arg_value>1.5</arg_value|>", "not a whole number"),
    (f"{W}<arg_key>hourly</arg_key>\n<arg_value>|yes</arg_value>", "expected true or false"),
    (f'{W}<arg_key>opts</arg_key>\n<arg_value>{{"fields": [|1]}}</arg_value>', "expected string"),
    (f"{W}<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n|", "missing required key(s): 'city'"),
    (f"{W}<arg_key>city</arg_key><arg_value>a</arg_value><arg_key>|city</arg_key>", "key 'c...' is not"),
    ("get_time\n<arg_key>|x</arg_key>", "key 'x...' is not allowed"),
    (f"{W}<arg_key>city</arg_key>\n<arg_val|", "the tool call is not complete (inside a tag)"),
]


@pytest.mark.parametrize(("marked", "error"), INVALID)
def test_invalid_calls_are_reported_at_the_deciding_character(marked: str, error: str) -> None:
    position = marked.index("|")
    text = marked.replace("|", "", 1)
    for chunks in ([text], list(text)):
        invalid = parse(chunks)[-1]
        assert isinstance(invalid, ToolCallInvalid), invalid
        assert (invalid.position, invalid.index) == (position, 0) and error in invalid.error, invalid
        assert invalid.raw == "<tool_call>" + text + "</tool_call>"
    # decided: reported with the character at its position, not before
    p = ToolCallParser(SPEC.tool_format or "xml", TOOLS, id_factory=ids, invalid_at="decision")
    p.feed(Segment("tool_call", "open", "<tool_call>"))
    for k, c in enumerate(text):
        got = [e for e in p.feed(Segment("tool_call", "chunk", c)) if isinstance(e, ToolCallInvalid)]
        assert bool(got) == (k == position), (k, got)
        if got:
            return
    got = [e for e in p.feed(Segment("tool_call", "close", "</tool_call>")) if isinstance(e, ToolCallInvalid)]
    assert position == len(text) and len(got) == 1


def test_a_region_the_stream_ends_inside_is_invalid() -> None:
    for text in ("get_time", f"{W}<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"):
        invalid = parse([text], close="")[-1]
        assert isinstance(invalid, ToolCallInvalid) and "not complete" in invalid.error
        assert invalid.position == len(text)


def test_after_an_invalid_call_the_next_block_parses() -> None:
    bad = OUTPUT.replace("<arg_value>3</arg_value>", "<arg_value>3x</arg_value>")
    for chunks in ([bad], list(bad)):
        events = run(chunks)
        invalid = [e for e in events if isinstance(e, ToolCallInvalid)]
        assert len(invalid) == 1 and invalid[0].index == 0 and "invalid JSON" in invalid[0].error
        assert [(e.index, e.name) for e in events if isinstance(e, ToolCallEnd)] == [(1, "get_time")]
    events = run([OUTPUT.replace("get_time", "get_date")])
    assert [e.error.split(" (")[0] for e in events if isinstance(e, ToolCallInvalid)] == [
        "unknown tool 'get_d...'"
    ]


TEMPLATE = (
    "[gMASK]<sop>{%- if tools -%}<|system|>\n# Tools\n{% for tool in tools %}{{ tool | tojson }}"
    "{% endfor %}\nFor each function call, output the function name and arguments within the "
    "following XML format:\n<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n"
    "<arg_value>{arg-value-1}</arg_value>\n...\n</tool_call>{%- endif -%}"
    "{%- for m in messages %}{%- if m.role == 'user' %}<|user|>\n{{ m.content }}"
    "{%- elif m.role == 'assistant' %}<|assistant|>\n<think>{{ m.reasoning_content }}</think>"
    "{{ m.content }}{%- elif m.role == 'tool' %}<|observation|>{{ m.content }}{%- endif %}"
    "{%- endfor %}{%- if add_generation_prompt -%}<|assistant|>"
    "{{- '\\n<think></think>' if (enable_thinking is defined and not enable_thinking) else '' -}}"
    "{%- endif -%}"
)


def test_the_chat_template_is_detected() -> None:
    found = detect_family(TEMPLATE)
    assert found is not None and found.name == "glm-4.5"
    assert family("glm-4.6") is GLM
    qwen_coder = "<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>"
    assert detect_family(qwen_coder) is not GLM


def test_the_prompt_anchor_and_thinking_off_or_open() -> None:
    head = "[gMASK]<sop><|user|>\nWeather?<|assistant|>"
    off = route_text("\nSunny.<|user|>", SPEC, prompt=head + "\n<think></think>")
    assert [(s.channel, s.event, s.text) for s in off] == [
        ("content", "chunk", "\nSunny."),
        ("content", "close", "<|user|>"),
    ]
    opened = route_text("Hm.</think>Sunny.", SPEC, prompt=head + "<think>")
    assert [(s.channel, s.event) for s in opened][:2] == [("reasoning", "chunk"), ("reasoning", "close")]
    # an earlier turn's tags in the prompt do not matter: it is read from its last anchor
    again = route_text("Sunny.", SPEC, prompt=head + "<think>x" + head)
    assert [(s.channel, s.text) for s in again] == [("content", "Sunny.")]


@pytest.mark.parametrize(
    ("name", "rest", "arguments"),
    [
        ("get_time", "</tool_call>", {}),
        (
            "get_weather",
            "<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>",
            {"city": "Oslo"},
        ),
    ],
)
def test_a_forced_call_opening_parses_as_that_call(name: str, rest: str, arguments: dict[str, Any]) -> None:
    opening = GLM.forced_call(name)
    assert opening == f"<tool_call>{name}\n" and GLM.forced_call(None) == "<tool_call>"
    for chunks in ([opening + rest], list(opening + rest)):
        ends = [e for e in run(chunks) if isinstance(e, ToolCallEnd)]
        assert [(e.name, e.arguments) for e in ends] == [(name, arguments)]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"key_end": ""}, "must not be empty"),
        ({"call_open": ""}, "ends with its region"),
        ({"value_close": "]"}, "must start with '<'"),
        ({"value_open": "</parameter>"}, "must differ"),
    ],
)
def test_a_syntax_is_checked(kwargs: dict[str, str], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        XmlSyntax(**kwargs)


PIECES = [
    "get_weather",
    "get_time",
    "city",
    "days",
    "opts",
    "\n",
    " ",
    "<",
    ">",
    "/",
    "3",
    "x",
    '{"fields": ["a"]}',
    "true",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "</arg_val",
    "<function=",
    "</tool_call>",
]


@settings(max_examples=300, deadline=None)
@given(
    body=st.lists(st.sampled_from(PIECES), max_size=24),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
    tools=st.sampled_from([TOOLS, None]),
    closed=st.booleans(),
)
def test_any_text_is_a_call_or_an_invalid_one_whatever_the_chunking(
    body: list[str], cuts: list[int], tools: Any, closed: bool
) -> None:
    """Random tag soup never raises: the region gives one end or one invalid call, the same for
    every chunking."""
    text = "".join(body)
    close = "</tool_call>" if closed else ""
    whole = parse([text], tools, close=close)
    assert merged(parse(split(text, cuts), tools, close=close)) == merged(whole)
    assert merged(parse(list(text), tools, close=close)) == merged(whole)
    outcomes = [e for e in whole if isinstance(e, (ToolCallEnd, ToolCallInvalid))]
    assert len(outcomes) == 1
    if isinstance(outcomes[0], ToolCallInvalid):
        assert 0 <= outcomes[0].position <= len(text)
    else:
        assert closed and json.loads(outcomes[0].arguments_text) == outcomes[0].arguments
