"""``ToolCallParser`` and ``SchemaChecker``: tool calls as they stream (SEMANTICS §9).

Property tests generate tool-call regions in each JSON format with a writer that records where
each value's text lies, cut them anywhere, and check: the same events whatever the chunking
(after merging adjacent deltas), the deltas joined are the arguments text as written, values
are settled exactly at their delimiter and are those of the final arguments. Schema violations
and invalid names are checked against a brute-force reference (the first prefix that no
completion makes valid).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from rxstream.channels import (
    Segment,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallInvalid,
    ToolCallParser,
    ToolCallStart,
    ToolCallValue,
    compile_tools,
)
from rxstream.channels._json_schema import SchemaChecker, compile_schema, integral_dead_at
from rxstream.channels._json_stream import ERROR, JsonStream
from tests.channels.json_reference import _load, first_dead, valid

Event = Any


# -- helpers ------------------------------------------------------------------------------------
def seg(event: str, text: str = "", **kw: Any) -> Segment:
    return Segment("tool_call", event, text, **kw)


def ids(index: int) -> str:
    return f"call_{index}"


OPENS = {"json": "<tool_call>", "json-list": "[TOOL_CALLS]", "llama3": "<|python_tag|>", "xml": "<tool_call>"}
CLOSES = {"json": "</tool_call>", "json-list": "", "llama3": "<|eom_id|>", "xml": "</tool_call>"}


def parse(
    fmt: str,
    chunks: list[str],
    tools: Any = None,
    *,
    name: str = "",
    close: str | None = None,
    invalid_at: str = "region_end",
    parser: ToolCallParser | None = None,
) -> list[Event]:
    """The events of one region written as ``chunks`` (``close=None``: the format's closing
    delimiter; ``"<unclosed>"``: the stream ends inside the region)."""
    p = parser or ToolCallParser(fmt, tools, id_factory=ids, invalid_at=invalid_at)  # type: ignore[arg-type]
    if fmt == "harmony":
        opening = seg(
            "open", f"<|channel|>commentary to=functions.{name} <|message|>", captures={"name": name}
        )
    else:
        opening = seg("open", OPENS[fmt])
    out = p.feed(opening)
    for chunk in chunks:
        out += p.feed(seg("chunk", chunk))
    if close == "<unclosed>":
        out += p.finish()
    else:
        out += p.feed(
            seg("close", ("<|call|>" if fmt == "harmony" else CLOSES[fmt]) if close is None else close)
        )
    return out


def merged(events: list[Event]) -> list[Event]:
    """Adjacent deltas of one call joined (their split depends on the chunking only)."""
    out: list[Event] = []
    for ev in events:
        if (
            isinstance(ev, ToolCallDelta)
            and out
            and isinstance(out[-1], ToolCallDelta)
            and out[-1].index == ev.index
        ):
            out[-1] = ToolCallDelta(ev.index, out[-1].text + ev.text)
        else:
            out.append(ev)
    return out


def split(text: str, points: list[int]) -> list[str]:
    points = sorted({p for p in points if 0 < p < len(text)})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


def deltas_of(events: list[Event], index: int) -> str:
    return "".join(e.text for e in events if isinstance(e, ToolCallDelta) and e.index == index)


def get(value: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        value = value[p]
    return value


def same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> set[tuple[Any, ...]]:
    if isinstance(value, dict):
        return set().union(*(leaf_paths(v, (*path, k)) for k, v in value.items())) if value else set()
    if isinstance(value, list):
        return set().union(*(leaf_paths(v, (*path, i)) for i, v in enumerate(value))) if value else set()
    return {path}


# -- a writer that knows where each value is ----------------------------------------------------
class Writer:
    """JSON text like ``json.dumps``, recording the span of every value it writes."""

    def __init__(self, ensure_ascii: bool, item_sep: str, key_sep: str) -> None:
        self.parts: list[str] = []
        self.n = 0
        self.ensure_ascii = ensure_ascii
        self.item_sep = item_sep
        self.key_sep = key_sep
        self.spans: dict[tuple[Any, ...], tuple[int, int]] = {}

    def write(self, text: str) -> None:
        self.parts.append(text)
        self.n += len(text)

    def dumps(self, value: Any) -> str:
        return json.dumps(value, ensure_ascii=self.ensure_ascii)

    def value(self, value: Any, path: tuple[Any, ...] = ()) -> None:
        start = self.n
        if isinstance(value, dict):
            self.write("{")
            for i, (k, v) in enumerate(value.items()):
                self.write(self.item_sep if i else "")
                self.write(self.dumps(k) + self.key_sep)
                self.value(v, (*path, k))
            self.write("}")
        elif isinstance(value, list):
            self.write("[")
            for i, v in enumerate(value):
                self.write(self.item_sep if i else "")
                self.value(v, (*path, i))
            self.write("]")
        else:
            self.write(self.dumps(value))
        self.spans[path] = (start, self.n)

    @property
    def text(self) -> str:
        return "".join(self.parts)


KEY_TEXT = st.text(st.sampled_from(list('ab"\\é😀\n')), max_size=4)
ARG_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(st.sampled_from(list('ab "\\/\n\té€😀')), max_size=6)
)
ARGS = st.dictionaries(
    KEY_TEXT,
    st.recursive(
        ARG_SCALARS,
        lambda c: st.lists(c, max_size=3) | st.dictionaries(KEY_TEXT, c, max_size=3),
        max_leaves=6,
    ),
    max_size=4,
)
NAMES = st.sampled_from(["get_weather", "get_time", "search", "f", "café_lookup"])


@st.composite
def regions(draw: st.DrawFn) -> tuple[str, str, list[dict[str, Any]], str]:
    """A format, a region text, its calls (name, args, spans), and the harmony name."""
    fmt = draw(st.sampled_from(["json", "json-list", "llama3", "harmony"]))
    w = Writer(draw(st.booleans()), *draw(st.sampled_from([(", ", ": "), (",", ":"), (" , ", " :\n ")])))
    count = 1 if fmt == "harmony" else draw(st.integers(1 if fmt != "json-list" else 0, 3))
    calls: list[dict[str, Any]] = []
    w.write(draw(st.sampled_from(["", "\n", " "])))
    if fmt == "json-list":
        w.write("[")
    for c in range(count):
        if c:
            w.write(
                {"json": "\n", "llama3": draw(st.sampled_from(["; ", ";", "\n"])), "json-list": ", "}[fmt]
            )
        name = draw(NAMES)
        args = draw(ARGS)
        call: dict[str, Any] = {"name": name, "args": args}
        if fmt == "harmony":
            w.spans = {}
            w.value(args)
            call["spans"] = w.spans
            call["name_end"] = -1
            calls.append(call)
            break
        args_key = "parameters" if fmt == "llama3" else "arguments"
        order = draw(
            st.sampled_from(
                ["name_first", "args_first", "no_args"] if not args else ["name_first", "args_first"]
            )
        )
        w.write("{")
        if order == "args_first":
            w.write(w.dumps(args_key) + w.key_sep)
            w.spans = {}
            w.value(args)
            call["spans"] = w.spans
            w.write(w.item_sep)
        w.write(w.dumps("name") + w.key_sep)
        w.write(w.dumps(name))
        call["name_end"] = w.n - 1
        if order == "name_first":
            w.write(w.item_sep + w.dumps(args_key) + w.key_sep)
            w.spans = {}
            w.value(args)
            call["spans"] = w.spans
        if draw(st.booleans()):
            w.write(w.item_sep + w.dumps("type") + w.key_sep + '{"x": [1, "}"]}')  # ignored
        w.write("}")
        call["end"] = w.n - 1
        call["order"] = order
        calls.append(call)
    if fmt == "json-list":
        w.write("]")
    w.write(draw(st.sampled_from(["", "\n"])))
    return fmt, w.text, calls, calls[0]["name"] if fmt == "harmony" else ""


# -- well-formed calls --------------------------------------------------------------------------
@settings(max_examples=200)
@given(regions(), st.lists(st.integers(0, 400), max_size=15))
def test_calls_stream_the_same_whatever_the_chunking(region: Any, points: list[int]) -> None:
    fmt, text, calls, name = region
    whole = parse(fmt, [text], name=name)
    assert merged(parse(fmt, split(text, points), name=name)) == merged(whole)
    # the calls, in order
    starts = [e for e in whole if isinstance(e, ToolCallStart)]
    ends = [e for e in whole if isinstance(e, ToolCallEnd)]
    assert not [e for e in whole if isinstance(e, ToolCallInvalid)]
    assert [(s.index, s.id, s.name) for s in starts] == [
        (i, f"call_{i}", c["name"]) for i, c in enumerate(calls)
    ]
    for i, (call, end) in enumerate(zip(calls, ends, strict=True)):
        assert (end.index, end.id, end.name) == (i, f"call_{i}", call["name"])
        assert same(end.arguments, call["args"])
        assert json.loads(end.arguments_text) == end.arguments
        assert deltas_of(whole, i) == end.arguments_text
        if "spans" in call:  # the model's own text of the arguments, as written
            a, b = call["spans"][()]
            assert end.arguments_text == text[a:b]
        else:
            assert end.arguments_text == "{}"
        values = [e for e in whole if isinstance(e, ToolCallValue) and e.index == i]
        paths = [v.path for v in values]
        assert len(paths) == len(set(paths))
        expected = leaf_paths(call["args"]) | {(k,) for k in call["args"]}
        assert set(paths) == expected - {()}
        for v in values:
            assert same(v.value, get(end.arguments, v.path))


@settings(max_examples=150)
@given(regions())
def test_each_value_goes_out_with_the_character_that_settles_it(region: Any) -> None:
    fmt, text, calls, name = region
    p = ToolCallParser(fmt, id_factory=ids)  # type: ignore[arg-type]
    at: list[tuple[int, Event]] = []
    if fmt == "harmony":
        at += [(-1, e) for e in p.feed(seg("open", "", captures={"name": name}))]
    else:
        p.feed(seg("open", "<tool_call>"))
    for i, c in enumerate(text):
        at += [(i, e) for e in p.feed(seg("chunk", c))]
    at += [(len(text), e) for e in p.feed(seg("close", ""))]
    sent: dict[int, str] = {}
    for i, ev in at:
        if isinstance(ev, ToolCallDelta):
            sent[ev.index] = sent.get(ev.index, "") + ev.text
            continue
        call = calls[ev.index]
        held_until = call["name_end"] if call.get("order") == "args_first" else -1
        if isinstance(ev, ToolCallStart):
            assert i == call["name_end"]
        elif isinstance(ev, ToolCallEnd):
            assert i == (call["end"] if fmt != "harmony" else call["spans"][()][1] - 1)
        elif isinstance(ev, ToolCallValue):
            b = call["spans"][ev.path][1]
            settles = b if isinstance(ev.value, (int, float)) and not isinstance(ev.value, bool) else b - 1
            assert i == max(settles, held_until), (ev, i, settles)  # never before its delimiter
            assert len(sent[ev.index]) >= b - call["spans"][()][0]  # after the deltas holding its text


def test_hermes_style_calls() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_current_weather",
                "description": "Get the current weather in a given location",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "location": {"type": "string"},
                        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    },
                    "required": ["location"],
                },
            },
        },
        {
            "type": "function",
            "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
        },
    ]
    text = (
        '\n{"name": "get_current_weather", '
        '"arguments": {"location": "S\\u00e3o Paulo, \\"SP\\"", "unit": "celsius"}}\n'
    )
    events = parse("json", [text[:30], text[30:47], text[47:60], text[60:]], tools)
    assert events[0] == ToolCallStart(0, "call_0", "get_current_weather")
    end = events[-1]
    assert isinstance(end, ToolCallEnd)
    assert end.arguments == {"location": 'São Paulo, "SP"', "unit": "celsius"}
    assert end.arguments_text == '{"location": "S\\u00e3o Paulo, \\"SP\\"", "unit": "celsius"}'
    assert [e for e in events if isinstance(e, ToolCallValue)] == [
        ToolCallValue(0, ("location",), 'São Paulo, "SP"'),
        ToolCallValue(0, ("unit",), "celsius"),
    ]
    # a tool without arguments, the next region
    p = ToolCallParser("json", tools, id_factory=ids)
    parse("json", [text], parser=p)
    second = parse("json", ['{"name": "get_time", "arguments": {}}'], parser=p)
    assert second == [
        ToolCallStart(1, "call_1", "get_time"),
        ToolCallDelta(1, "{}"),
        ToolCallEnd(1, "call_1", "get_time", {}, "{}"),
    ]


def test_mistral_list_with_several_calls() -> None:
    text = (
        '[{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "mul", "arguments": {"x": [0.5, -1e3]}}]'
    )
    events = parse("json-list", [text[i : i + 7] for i in range(0, len(text), 7)])
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert [(e.index, e.name, e.arguments) for e in ends] == [
        (0, "add", {"a": 1, "b": 2}),
        (1, "mul", {"x": [0.5, -1000.0]}),
    ]
    assert parse("json-list", ["[]"]) == []


def test_llama3_parameters_and_semicolons() -> None:
    text = '{"name": "a", "parameters": {"q": "x"}}; {"type": "function", "name": "b", "parameters": {}}'
    ends = [e for e in parse("llama3", [text]) if isinstance(e, ToolCallEnd)]
    assert [(e.name, e.arguments) for e in ends] == [("a", {"q": "x"}), ("b", {})]


def test_harmony_name_from_the_opening_delimiter() -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    events = parse("harmony", ['{"location":', '"Tokyo"}'], tools, name="functions.get_weather")
    assert events == [
        ToolCallStart(0, "call_0", "get_weather"),
        ToolCallDelta(0, '{"location":'),
        ToolCallDelta(0, '"Tokyo"'),
        ToolCallValue(0, ("location",), "Tokyo"),
        ToolCallDelta(0, "}"),
        ToolCallEnd(0, "call_0", "get_weather", {"location": "Tokyo"}, '{"location":"Tokyo"}'),
    ]
    bad = parse("harmony", ["{}"], tools, name="get_wether")
    assert bad == [ToolCallInvalid(0, "unknown tool 'get_wether' (known: 'get_weather')", 0, bad[0].raw)]


def test_arguments_before_the_name_are_held_until_the_name_is_known() -> None:
    p = ToolCallParser("json", id_factory=ids)
    p.feed(seg("open", "<tool_call>"))
    assert p.feed(seg("chunk", '{"arguments": {"n": 1, "s": "x"}')) == []
    assert p.feed(seg("chunk", ', "name": "f"')) == [
        ToolCallStart(0, "call_0", "f"),
        ToolCallDelta(0, '{"n": 1'),
        ToolCallValue(0, ("n",), 1),
        ToolCallDelta(0, ', "s": "x"'),
        ToolCallValue(0, ("s",), "x"),
        ToolCallDelta(0, "}"),
    ]
    assert p.feed(seg("chunk", "}")) == [
        ToolCallEnd(0, "call_0", "f", {"n": 1, "s": "x"}, '{"n": 1, "s": "x"}')
    ]


def test_default_ids_are_random_hex() -> None:
    p = ToolCallParser("json")
    p.feed(seg("open", ""))
    events = p.feed(seg("chunk", '{"name": "f"}')) + p.feed(seg("chunk", '{"name": "f"}'))
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert len(starts) == 2 and starts[0].id != starts[1].id
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", s.id) for s in starts)
    bad = ToolCallParser("json", id_factory=lambda i: i)  # type: ignore[arg-type,return-value]
    bad.feed(seg("open", ""))
    with pytest.raises(TypeError, match="id_factory must return a str"):
        bad.feed(seg("chunk", '{"name": "f"}'))


# -- invalid calls ------------------------------------------------------------------------------
WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "unit": {"enum": ["c", "f"]},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
    {"type": "function", "function": {"name": "get_time"}},
]


@pytest.mark.parametrize(
    ("text", "position", "error"),
    [
        ('{"name": "get_wx"}', 15, "unknown tool 'get_wx...'"),
        ('{"name": "get_"}', 14, "unknown tool 'get_'"),
        ('{"name": "get_\\u0074ime"}', 24, None),  # escaped 't': valid
        ('{"name": "get_\\u0078"}', 19, "unknown tool"),  # \u007 could be 't' (U+0074), \u0078 cannot
        ('{"name": 5}', 9, "the tool name must be a string"),
        ('{"arguments": {}}', 16, 'no "name"'),
        ('{"name": "get_time", "arguments": []}', 34, "must be a JSON object"),
        ('{"name": "get_time", "name": "get_time"}', 26, "second 'name'"),
        ('{"name": "get_weather", "arguments": {"city": "x", "country": "y"}}', 53, "key 'co'..."),
        ('{"name": "get_weather", "arguments": {"city": "x", "days": 2.5}}', 62, "not a whole number"),
        ('{"name": "get_weather", "arguments": {"city": "x", "days": 2.5e-1}}', 63, "cannot be whole"),
        ('{"name": "get_weather", "arguments": {"city": "x", "unit": "k"}}', 60, "'k'..."),
        ('{"name": "get_weather", "arguments": {"days": 1}}', 47, "missing required key(s): 'city'"),
        ('{"name": "get_weather"}', 22, "missing required key(s): 'city'"),
        ('{"name": "get_weather", "arguments": {"city": 7}}', 46, "expected string, got number"),
        ('[{"name": "get_time"}]', 0, "expected a tool call object"),
        ('{"name": "get_time"} x', 21, "invalid JSON"),
        ('{"name": "get_time", "arguments": {"a": tru}}', 43, "invalid JSON"),
    ],
)
def test_invalid_calls_are_reported_at_the_deciding_character(
    text: str, position: int, error: str | None
) -> None:
    events = parse("json", [text], WEATHER)
    invalid = [e for e in events if isinstance(e, ToolCallInvalid)]
    if error is None:
        assert not invalid and isinstance(events[-1], ToolCallEnd)
        return
    assert len(invalid) == 1 and invalid[0] is events[-1]
    assert invalid[0].position == position and error in invalid[0].error, invalid[0]
    assert invalid[0].raw == "<tool_call>" + text + "</tool_call>"
    # the deltas sent hold only text before the deciding character
    args = text.find('"arguments": ')
    sent = deltas_of(events, invalid[0].index)
    if sent:
        start = args + len('"arguments": ')
        assert text[start : start + len(sent)] == sent and start + len(sent) <= position
    # a whole-call schema: the same positions from the brute-force reference
    schema = {
        "type": "object",
        "properties": {
            "name": {"enum": ["get_weather", "get_time"]},
            "arguments": WEATHER[0]["function"]["parameters"]
            if "get_weather" in text
            else {"type": "object"},
        },
        "required": ["name"],
    }
    # (the reference knows no duplicate-key rule, no text after the call, and that a call
    # without arguments has {} for them)
    if "second 'name'" not in error and '"get_time"} x' not in text and "arguments" in text:
        assert first_dead(text, schema) == position + 1


def test_a_violation_decided_inside_an_escape_cut_by_chunks() -> None:
    text = '{"name": "get_\\u0078"}'
    for i in range(1, len(text)):
        events = parse("json", [text[:i], text[i:]], WEATHER, invalid_at="decision")
        (invalid,) = [e for e in events if isinstance(e, ToolCallInvalid)]
        assert invalid.position == 19  # \u007 could still be 't' (U+0074); \u0078 is 'x'
    p = ToolCallParser("json", WEATHER, invalid_at="decision")
    p.feed(seg("open", ""))
    assert p.feed(seg("chunk", '{"name": "get_\\u007')) == []
    assert isinstance(p.feed(seg("chunk", "8"))[0], ToolCallInvalid)


def test_the_rest_of_an_invalid_region_is_skipped_and_the_next_parses() -> None:
    p = ToolCallParser("json", WEATHER, id_factory=ids)
    first = parse("json", ['{"name": "nope", "arguments": {}}\n{"name": "get_time"}'], parser=p)
    assert len(first) == 1 and isinstance(first[0], ToolCallInvalid) and first[0].index == 0
    assert first[0].raw == '<tool_call>{"name": "nope", "arguments": {}}\n{"name": "get_time"}</tool_call>'
    second = parse("json", ['{"name": "get_time"}'], parser=p)
    assert second[0] == ToolCallStart(0, "call_0", "get_time")  # the index was not used up


def test_invalid_after_start_keeps_the_index_and_decision_mode_reports_at_once() -> None:
    p = ToolCallParser("json", WEATHER, id_factory=ids, invalid_at="decision")
    p.feed(seg("open", "<tool_call>"))
    assert p.feed(seg("chunk", '{"name": "get_weather", "arguments": {"ci')) == [
        ToolCallStart(0, "call_0", "get_weather"),
        ToolCallDelta(0, '{"ci'),
    ]
    events = p.feed(seg("chunk", 'ty": 1, "x": 2}}'))
    assert events == [
        ToolCallDelta(0, 'ty": '),
        ToolCallInvalid(
            0,
            "arguments do not match the schema of 'get_weather': $.city: expected string, got number",
            46,
            '<tool_call>{"name": "get_weather", "arguments": {"city": 1, "x": 2}}',
        ),
    ]
    assert p.feed(seg("close", "</tool_call>")) == []
    assert p.next_index == 1


@pytest.mark.parametrize(
    ("fmt", "text", "error"),
    [
        ("json", '{"name": "get_time", "arguments": {"a": [1', "the stream ended inside a tool call region"),
        ("json", "", "no tool call"),
        ("harmony", "", "no arguments"),
        ("json", '{"name": "get_time", "argu', "before the JSON was complete"),
    ],
)
def test_a_region_that_never_closes(fmt: str, text: str, error: str) -> None:
    events = parse(fmt, [text] if text else [], name="get_time", close="<unclosed>")
    assert isinstance(events[-1], ToolCallInvalid)
    assert error in events[-1].error and events[-1].position == len(text)


def test_a_complete_call_needs_no_closing_delimiter() -> None:
    events = parse("json-list", ['[{"name": "f", "arguments": {}}]'], close="<unclosed>")
    assert isinstance(events[-1], ToolCallEnd)


def test_empty_region_and_stray_segments() -> None:
    assert parse("json", ["  \n"])[-1].error == "empty tool call"  # type: ignore[union-attr]
    p = ToolCallParser("json")
    stray = seg("malformed", "</tool_call>", reason="a closing delimiter with no region open")
    assert p.feed(stray) == [stray]
    assert p.finish() == []
    implicit = p.feed(seg("chunk", '{"name": "f"}'))  # a chunk with no open segment opens a region
    assert isinstance(implicit[0], ToolCallStart)


# -- schema positions against the brute-force reference ------------------------------------------
SCHEMA_KEYS = ["a", "ab", "abc", "b", "cité", "c", 'x"y']
SCALAR_SCHEMAS = [
    {"type": "string"},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "null"},
    {"enum": ["red", "re", "green"]},
    {"type": "string", "enum": ["é", "ée", 'x"y']},
    {"type": ["string", "null"]},
    {"anyOf": [{"type": "integer"}, {"enum": ["auto", "au"]}]},
    {"type": ["integer", "boolean"]},
    {},
    {"const": "fixed"},
    {"enum": [True, None]},
]


def _object(props: dict[str, Any], required: list[str], closed: bool) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props, "required": required}
    if closed:
        schema["additionalProperties"] = False
    return schema


@st.composite
def objects(draw: st.DrawFn, children: st.SearchStrategy[Any]) -> dict[str, Any]:
    props = draw(st.dictionaries(st.sampled_from(SCHEMA_KEYS), children, max_size=4))
    required = draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
    return _object(props, required, draw(st.booleans()))


SCHEMAS = st.recursive(
    st.sampled_from(SCALAR_SCHEMAS),
    lambda c: objects(c) | st.builds(lambda s: {"type": "array", "items": s}, c),
    max_leaves=5,
)


def instance(draw: st.DrawFn, schema: dict[str, Any]) -> Any:
    if "anyOf" in schema:
        schema = draw(st.sampled_from(schema["anyOf"]))
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return draw(st.sampled_from(schema["enum"]))
    kind = schema.get("type", draw(st.sampled_from(["string", "integer", "null", "object", "array"])))
    if isinstance(kind, list):
        kind = draw(st.sampled_from(kind))
    if kind == "string":
        return draw(st.text('aé"\\😀x', max_size=4))
    if kind == "integer":
        return draw(st.integers(-100, 10**6))
    if kind == "number":
        return draw(st.floats(-1e6, 1e6) | st.integers(-5, 5))
    if kind == "boolean":
        return draw(st.booleans())
    if kind == "null":
        return None
    if kind == "array":
        return [instance(draw, schema.get("items", {})) for _ in range(draw(st.integers(0, 3)))]
    props = schema.get("properties", {})
    out = {
        k: instance(draw, s)
        for k, s in props.items()
        if k in schema.get("required", []) or draw(st.booleans())
    }
    if schema.get("additionalProperties") is not False and draw(st.booleans()):
        out[draw(st.sampled_from(["zz", "a"]))] = 1
    return out


@st.composite
def schema_cases(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    schema = draw(objects(SCHEMAS))
    doc = instance(draw, schema)
    ascii_only = draw(st.booleans())
    text = json.dumps(doc, ensure_ascii=ascii_only, indent=draw(st.sampled_from([None, 1])))
    how = draw(st.sampled_from(["none", "char", "char", "value", "key", "cut"]))
    if how == "char":
        i = draw(st.integers(0, len(text)))
        c = draw(st.sampled_from(list('{}[]":, 0123456789.-eEtrufalsnabcé\\')))
        text = text[:i] + c + text[i + draw(st.integers(0, 1)) :]
    elif how == "value" and doc:
        key = draw(st.sampled_from(sorted(doc)))
        doc[key] = draw(
            st.sampled_from([1, 1.5, -2e-3, "s", "re", "gre", True, None, [], {}, "au", 7, 'x"y'])
        )
        text = json.dumps(doc, ensure_ascii=ascii_only)
    elif how == "key":
        doc[draw(st.sampled_from(["ac", "abd", "cit", "zz", "ci\u00e9", "b", "x"]))] = draw(
            st.sampled_from([1, "x", None])
        )
        text = json.dumps(doc, ensure_ascii=ascii_only)
    elif how == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    return schema, text


def expected_position(text: str, schema: Any) -> int | None:
    """The brute-force answer: the deciding character, the text's length when only the end was
    missing, None for a valid whole text."""
    dead = first_dead(text, schema)
    if dead is not None:
        return dead - 1
    try:
        ok = valid(_load(text), schema)
    except ValueError:
        ok = False
    return None if ok else len(text)


def checker_position(chunks: list[str], schema: Any) -> int | None:
    stream = JsonStream(detail=True)
    checker = SchemaChecker(compile_schema(schema))
    for chunk in [*chunks, None]:
        for ev in stream.feed(chunk) if chunk is not None else stream.end():
            if ev[0] == ERROR:
                return int(ev[1])
            violation = checker.feed(ev)
            if violation is not None:
                return violation[0]
    return None


@settings(max_examples=400)
@given(schema_cases(), st.lists(st.integers(1, 200), max_size=6))
@example(
    (
        {"type": "object", "properties": {"cité": {"type": "string"}}, "additionalProperties": False},
        '{"ci\\u00e9": 1}',
    ),
    [],
)
@example(({"type": "object", "properties": {"n": {"type": "integer"}}}, '{"n": 1.5e-1}'), [8])
@example(({"type": "object", "properties": {"n": {"type": "integer"}}}, '{"n": 1.5e+1}'), [])
@example(({"type": "object", "properties": {"e": {"enum": ["red", "re"]}}}, '{"e": "r\\u0065x"}'), [9, 12])
def test_violation_position_equals_the_brute_force_reference(case: Any, points: list[int]) -> None:
    schema, text = case
    expected = expected_position(text, schema)
    event("valid" if expected is None else "too short" if expected == len(text) else "ruled out")
    if expected is not None and expected < len(text) and first_dead(text) != expected + 1:
        event("ruled out by the schema")
    assert checker_position(split(text, points), schema) == expected
    # the same through the parser (harmony: the region is the arguments object)
    tools = [{"type": "function", "function": {"name": "t", "parameters": schema}}]
    events = parse("harmony", split(text, points), tools, name="t")
    invalid = [e for e in events if isinstance(e, ToolCallInvalid)]
    if expected is None:
        assert not invalid and isinstance(events[-1], ToolCallEnd)
    else:
        assert len(invalid) == 1 and invalid[0].position == expected, (invalid, expected)
        sent = deltas_of(events, 0)  # only text before the deciding character went out
        begin = len(text) - len(text.lstrip())
        assert text[begin : begin + len(sent)] == sent and begin + len(sent) <= expected


@settings(max_examples=150)
@given(
    st.text(st.sampled_from(list('get_wahmrc"\\u0074')), max_size=14),
    st.lists(st.integers(1, 30), max_size=3),
)
@example("get_\\u0074ime", [])
@example("get_\\u007", [])
def test_unknown_name_position_equals_the_brute_force_reference(name_text: str, points: list[int]) -> None:
    text = '{"name": "' + name_text + '", "arguments": {}}'
    schema = {
        "type": "object",
        "properties": {
            "name": {"enum": ["get_weather", "get_time", "search"]},
            "arguments": {"type": "object"},
        },
        "required": ["name"],
    }
    tools = [{"type": "function", "function": {"name": n}} for n in ("get_weather", "get_time", "search")]
    events = parse("json", split(text, points), tools)
    invalid = [e for e in events if isinstance(e, ToolCallInvalid)]
    expected = expected_position(text, schema)
    assert (invalid[0].position if invalid else None) == expected


def test_integral_dead_at() -> None:
    assert integral_dead_at("1.5") is None  # 1.5e1
    assert integral_dead_at("1.5e-") == 4
    assert integral_dead_at("1.50e-0") == 5 and integral_dead_at("150e-1") is None
    assert integral_dead_at("150e-2") == 5
    assert integral_dead_at("0.0e-9") is None


# -- xml (Qwen3-Coder) --------------------------------------------------------------------------
XML_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"},
                    "mode": {"type": "integer"},
                    "ratio": {"type": "number"},
                    "force": {"type": "boolean"},
                    "options": {"type": "object", "properties": {"a": {"type": "integer"}}},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "note": {"type": ["string", "null"]},
                    "level": {"enum": ["low", "high"]},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    }
]

XML_CALL = (
    "\n<function=write_file>\n<parameter=path>\nsrc/main.py\n</parameter>\n"
    '<parameter=content>\ndef f(x):\n    return "<b>" + x\n\n</parameter>\n'
    "<parameter=mode>\n420\n</parameter>\n<parameter=ratio>\n-1.5e2\n</parameter>\n"
    "<parameter=force>\nTrue\n</parameter>\n"
    '<parameter=options>\n{"a": 1}\n</parameter>\n<parameter=tags>\n["x", "y"]\n</parameter>\n'
    "<parameter=note>\nnull\n</parameter>\n<parameter=level>\nhigh\n</parameter>\n</function>\n"
)
XML_ARGS = {
    "path": "src/main.py",
    "content": 'def f(x):\n    return "<b>" + x\n',
    "mode": 420,
    "ratio": -150.0,
    "force": True,
    "options": {"a": 1},
    "tags": ["x", "y"],
    "note": None,
    "level": "high",
}


@settings(max_examples=200)
@given(st.lists(st.integers(1, len(XML_CALL) - 1), max_size=20))
@example(list(range(1, len(XML_CALL))))
def test_xml_call_with_typed_values_whatever_the_chunking(points: list[int]) -> None:
    events = parse("xml", split(XML_CALL, points), XML_TOOLS)
    assert merged(events) == merged(parse("xml", [XML_CALL], XML_TOOLS))
    end = events[-1]
    assert isinstance(end, ToolCallEnd) and same(end.arguments, XML_ARGS)
    assert deltas_of(events, 0) == end.arguments_text
    values = {e.path: e.value for e in events if isinstance(e, ToolCallValue)}
    assert values == {
        **{(k,): v for k, v in XML_ARGS.items()},
        ("options", "a"): 1,
        ("tags", 0): "x",
        ("tags", 1): "y",
    }


def test_xml_strings_stream_as_json_as_they_come() -> None:
    p = ToolCallParser("xml", XML_TOOLS, id_factory=ids)
    p.feed(seg("open", "<tool_call>"))
    assert p.feed(seg("chunk", "<function=write_file>\n<parameter=path>\nsrc/")) == [
        ToolCallStart(0, "call_0", "write_file"),
        ToolCallDelta(0, '{"path": "'),
        ToolCallDelta(0, "src/"),
    ]
    assert p.feed(seg("chunk", 'a "b"\n</par')) == [ToolCallDelta(0, 'a \\"b\\"')]  # "\n</par" held
    assert p.feed(seg("chunk", "ameter>\n<parameter=mode>\n4")) == [
        ToolCallDelta(0, '"'),
        ToolCallValue(0, ("path",), 'src/a "b"'),
        ToolCallDelta(0, ', "mode": '),
    ]
    assert p.feed(seg("chunk", "2\n</parameter></function>")) == [
        ToolCallDelta(0, "42"),
        ToolCallValue(0, ("mode",), 42),
        ToolCallDelta(0, "}"),
        ToolCallEnd(
            0,
            "call_0",
            "write_file",
            {"path": 'src/a "b"', "mode": 42},
            '{"path": "src/a \\"b\\"", "mode": 42}',
        ),
    ]


def test_xml_without_schema_takes_json_when_the_text_is_json() -> None:
    text = (
        "<function=f>\n<parameter=n>\n12\n</parameter>\n<parameter=s>\n12 monkeys\n</parameter>\n"
        '<parameter=q>\n"quoted"\n</parameter>\n<parameter=o>\n{"k": [true]}\n</parameter>\n'
        "<parameter=e>\n\n</parameter>\n<parameter=b>\nTrue\n</parameter>\n</function>"
    )
    end = parse("xml", [text])[-1]
    assert isinstance(end, ToolCallEnd)
    assert end.arguments == {
        "n": 12,
        "s": "12 monkeys",
        "q": '"quoted"',
        "o": {"k": [True]},
        "e": "",
        "b": "True",
    }
    assert json.loads(end.arguments_text) == end.arguments


def test_xml_parameter_given_twice() -> None:
    invalid = parse("xml", ["<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=a>"])[-1]
    assert isinstance(invalid, ToolCallInvalid) and invalid.position == 54 and "given twice" in invalid.error


def test_xml_missing_end_tag_and_several_functions() -> None:
    text = "<function=f>\n<parameter=a>\nx\n<parameter=b>\ny\n</function>\n<function=g>\n</function>"
    ends = [e for e in parse("xml", [text]) if isinstance(e, ToolCallEnd)]
    assert [(e.name, e.arguments) for e in ends] == [("f", {"a": "x", "b": "y"}), ("g", {})]


@pytest.mark.parametrize(
    ("text", "position", "error"),
    [
        ("<function=write_fil>", 19, "unknown tool 'write_fil'"),
        ("<function=wrong>", 12, "unknown tool 'wro...'"),
        ("<function=write_file>\n<parameter=pat>", 36, "key 'pat' is not allowed"),
        ("<function=write_file>\n<parameter=size>", 33, "key 's...' is not allowed"),
        ("<function=write_file>\n<parameter=mode>\nabc\n</parameter>", 39, "invalid JSON"),
        ("<function=write_file>\n<parameter=mode>\n1.5\n</parameter>", 54, "not a whole number"),
        ("<function=write_file>\n<parameter=force>\nyes\n</parameter>", 40, "expected true or false"),
        ("<function=write_file>\n<parameter=level>\nmid\n</parameter>", 40, "'m'..."),
        ("<function=write_file>\n<parameter=level>\nhi\n</parameter>", 54, "'hi' is not one of"),
        ("<function=write_file>\n<parameter=mode>\n1\n</parameter>\n</function>", 64, "missing required"),
        # a parameter comes once: with a closed schema its second name is ruled out at once
        (
            "<function=write_file>\n<parameter=path>\na\n</parameter>\n<parameter=path>",
            65,
            "key 'p...' is not",
        ),
        ("<funktion=f>", 4, "expected '<function='"),
        ("<function=write_file>\nxyz", 22, "expected '<parameter='"),
    ],
)
def test_xml_invalid_calls(text: str, position: int, error: str) -> None:
    events = parse("xml", [text], XML_TOOLS)
    invalid = events[-1]
    assert isinstance(invalid, ToolCallInvalid), events
    assert invalid.position == position and error in invalid.error, invalid


# -- tools --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tools", "error"),
    [
        ("get_weather", r"tools must be a list"),
        ([{"type": "retrieval"}], r"tools\[0\]: only type 'function'"),
        (
            [{"type": "function", "function": {"name": ""}}],
            r"tools\[0\]: the function needs a non-empty string 'name'",
        ),
        ([{"function": {"name": "a"}}, 5], r"tools\[1\]: expected a mapping, got int"),
        (
            [{"function": {"name": "a"}}, {"function": {"name": "a"}}],
            r"tools\[1\]: tool 'a' is defined twice",
        ),
        (
            [{"function": {"name": "a", "parameters": {"type": "strin"}}}],
            r"tools\[0\] \(a\): parameters.type: unknown type 'strin'",
        ),
        (
            [{"function": {"name": "a", "parameters": {"properties": []}}}],
            r"tools\[0\] \(a\): parameters.properties: expected a mapping",
        ),
        (
            [{"function": {"name": "a", "parameters": {"required": "x"}}}],
            r"parameters.required: expected a list",
        ),
        (
            [{"function": {"name": "a", "parameters": {"anyOf": []}}}],
            r"parameters.anyOf: expected a non-empty list",
        ),
    ],
)
def test_bad_tools_are_rejected_with_the_entry_named(tools: Any, error: str) -> None:
    with pytest.raises((TypeError, ValueError), match=error):
        compile_tools(tools)


def test_flat_tool_entries_and_parser_arguments() -> None:
    tools = compile_tools([{"type": "function", "name": "a", "parameters": {"type": "object"}}])
    assert tools is not None and list(tools) == ["a"]
    assert ToolCallParser("json", tools).tools == tools
    with pytest.raises(ValueError, match="unknown format"):
        ToolCallParser("yaml")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid_at"):
        ToolCallParser("json", invalid_at="never")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="id_factory must be callable"):
        ToolCallParser("json", id_factory="x")  # type: ignore[arg-type]


def test_one_of_and_any_of_alternatives() -> None:
    schema = {
        "type": "object",
        "properties": {
            "target": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"id": {"type": "integer"}},
                        "required": ["id"],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                        "required": ["name"],
                        "additionalProperties": False,
                    },
                ]
            }
        },
    }
    check: Callable[[str], int | None] = lambda text: checker_position([text], schema)  # noqa: E731
    assert check('{"target": {"id": 1}}') is None
    assert check('{"target": {"name": "x"}}') is None
    assert check('{"target": {"id": "x"}}') == 18  # the only branch with "id" wants an integer
    assert check('{"target": {"nid": 1}}') == 14
    assert check('{"target": {}}') == 12  # neither branch's required key
    for text in ('{"target": {"id": "x"}}', '{"target": {"nid": 1}}', '{"target": {}}'):
        assert check(text) == expected_position(text, schema)
