"""The ``tool_calls`` operator: when each tool-call event goes out, and what ``on_invalid`` does.

Marble tests pin every emission to the frame of the segment that decides it: a number's value
in the frame its delimiter arrives, an invalid call at its region's end (``report``) or at the
deciding segment, where ``cancel`` and ``error`` also dispose the upstream.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops
from reactivex.subject import Subject

from rxstream.channels import (
    Segment,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallError,
    ToolCallInvalid,
    ToolCallParser,
    ToolCallStart,
    ToolCallValue,
)
from rxstream.operators import tool_calls
from rxstream.testing import MarbleTest

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
]


def tc(event: str, text: str = "", **kw: Any) -> Segment:
    return Segment("tool_call", event, text, **kw)


def content(text: str) -> Segment:
    return Segment("content", "chunk", text)


def ids(index: int) -> str:
    return f"call_{index}"


def test_a_number_goes_out_in_the_frame_of_the_character_after_it() -> None:
    m = MarbleTest()
    src = m.cold(
        "-a-b-c-d-e-f-|",
        {
            "a": tc("open", "<tool_call>"),
            "b": tc("chunk", '{"name": "get_weather", "arguments": {"city": "Oslo", "days": 1'),
            "c": tc("chunk", "0"),
            "d": tc("chunk", "}}"),
            "e": tc("close", "</tool_call>"),
            "f": content("Done."),
        },
    )
    args = '{"city": "Oslo", "days": 10}'
    m.expect(
        src.pipe(tool_calls(TOOLS, id_factory=ids)),
        "---(svdw)-u-(xyz)---f-|",
        {
            "s": ToolCallStart(0, "call_0", "get_weather"),
            "v": ToolCallDelta(0, '{"city": "Oslo"'),
            "d": ToolCallValue(0, ("city",), "Oslo"),
            "w": ToolCallDelta(0, ', "days": 1'),
            "u": ToolCallDelta(0, "0"),  # 1 became 10: still not settled
            "x": ToolCallValue(0, ("days",), 10),  # the "}" settles it
            "y": ToolCallDelta(0, "}"),
            "z": ToolCallEnd(0, "call_0", "get_weather", {"city": "Oslo", "days": 10}, args),
            "f": content("Done."),
        },
    )


def test_a_number_at_the_end_of_the_stream_is_settled_by_the_end() -> None:
    m = MarbleTest()
    src = m.cold(
        "-a-b-c-|",
        {"a": tc("open"), "b": tc("chunk", '{"name": "f", "arguments": {"n": 1'), "c": tc("chunk", "0")},
    )
    m.expect(
        src.pipe(tool_calls(id_factory=ids)),
        "---(sd)-e-(vi|)",
        {
            "s": ToolCallStart(0, "call_0", "f"),
            "d": ToolCallDelta(0, '{"n": 1'),
            "e": ToolCallDelta(0, "0"),
            "v": ToolCallValue(0, ("n",), 10),
            "i": ToolCallInvalid(
                0,
                "the stream ended inside a tool call region before the JSON was complete "
                "(the text ends inside an object (2 open))",
                35,
                '{"name": "f", "arguments": {"n": 10',
            ),
        },
    )


def test_other_channels_pass_through_unchanged_and_in_order() -> None:
    segs = [
        Segment("reasoning", "open", "<think>"),
        Segment("reasoning", "chunk", "hmm", ids=(5,)),
        Segment("reasoning", "close", "</think>"),
        content("Let me check."),
        tc("open", "<tool_call>"),
        tc("chunk", '{"name": "get_weather", "arguments": {"city": "Rome"}}'),
        tc("close", "</tool_call>"),
        content("!"),
    ]
    out = rx.from_iterable(segs).pipe(tool_calls(TOOLS, id_factory=ids), ops.to_list()).run()
    assert out[:4] == segs[:4] and out[-1] == segs[-1]
    assert [type(e) for e in out[4:-1]] == [
        ToolCallStart,
        ToolCallDelta,
        ToolCallValue,
        ToolCallDelta,
        ToolCallEnd,
    ]
    # another channel name for the tool calls
    renamed = [Segment("calls", s.event, s.text) if s.channel == "tool_call" else s for s in segs]
    out2 = (
        rx.from_iterable(renamed)
        .pipe(tool_calls(TOOLS, channel="calls", id_factory=ids), ops.to_list())
        .run()
    )
    assert out2 == out


def test_report_emits_the_invalid_call_when_its_region_ends_and_goes_on() -> None:
    m = MarbleTest()
    src = m.cold(
        "-a-b-c-d-e-f-g-|",
        {
            "a": tc("open", "<tool_call>"),
            "b": tc("chunk", '{"name": "get_weather", "arguments": {"town": '),
            "c": tc("chunk", '"Oslo"}}'),
            "d": tc("close", "</tool_call>"),
            "e": tc("open", "<tool_call>"),
            "f": tc("chunk", '{"name": "get_weather", "arguments": {"city": "Oslo"}}'),
            "g": tc("close", "</tool_call>"),
        },
    )
    raw = '<tool_call>{"name": "get_weather", "arguments": {"town": "Oslo"}}</tool_call>'
    error = "arguments do not match the schema of 'get_weather': $: key 't'... matches none of 'city', 'days'"
    m.expect(
        src.pipe(tool_calls(TOOLS, id_factory=ids)),
        "---(sd)---i---(tuvwx)---|",
        {
            "s": ToolCallStart(0, "call_0", "get_weather"),
            "d": ToolCallDelta(0, '{"'),  # decided at the "t" of "town", reported when the region ends
            "i": ToolCallInvalid(0, error, 39, raw),
            "t": ToolCallStart(1, "call_1", "get_weather"),
            "u": ToolCallDelta(1, '{"city": "Oslo"'),
            "v": ToolCallValue(1, ("city",), "Oslo"),
            "w": ToolCallDelta(1, "}"),
            "x": ToolCallEnd(1, "call_1", "get_weather", {"city": "Oslo"}, '{"city": "Oslo"}'),
        },
    )
    m.expect_subscriptions(src, "^--------------!")


def test_cancel_disposes_the_upstream_at_the_deciding_segment() -> None:
    m = MarbleTest()
    src = m.cold(
        "-a-b-c-d-e-|",
        {
            "a": content("Sure."),
            "b": tc("open", "<tool_call>"),
            "c": tc("chunk", '{"name": "get_weather", "arguments": {"city": "Oslo", "days": "'),
            "d": tc("chunk", 'three"}}'),
            "e": tc("close", "</tool_call>"),
        },
    )
    error = "arguments do not match the schema of 'get_weather': $.days: expected integer, got string"
    m.expect(
        src.pipe(tool_calls(TOOLS, on_invalid="cancel", id_factory=ids)),
        "-a---(svdwi|)",
        {
            "a": content("Sure."),
            "s": ToolCallStart(0, "call_0", "get_weather"),
            "v": ToolCallDelta(0, '{"city": "Oslo"'),
            "d": ToolCallValue(0, ("city",), "Oslo"),
            "w": ToolCallDelta(0, ', "days": '),
            "i": ToolCallInvalid(
                0, error, 62, '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "days": "'
            ),
        },
    )
    m.expect_subscriptions(src, "^----!")


def test_cancel_at_a_later_segment_emits_the_invalid_event_with_the_text_so_far() -> None:
    m = MarbleTest()
    src = m.cold(
        "-a-b-c-d-|",
        {
            "a": tc("open", "<tool_call>"),
            "b": tc("chunk", '{"name": "get_weather", "arguments": {"city": "Oslo", "days": '),
            "c": tc("chunk", '"3"}}'),
            "d": tc("close", "</tool_call>"),
        },
    )
    events = m.run(src.pipe(tool_calls(TOOLS, on_invalid="cancel", id_factory=ids)))
    assert [(e.frame, e.kind) for e in events][-2:] == [(5, "N"), (5, "C")]
    invalid = events[-2].value
    assert isinstance(invalid, ToolCallInvalid)
    assert (
        invalid.position == 62
        and invalid.raw == '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "days": "3"}}'
    )
    m.expect_subscriptions(src, "^----!")


def test_error_sends_a_tool_call_error_and_disposes_the_upstream() -> None:
    m = MarbleTest()
    src = m.cold(
        "-a-b-c-|",
        {
            "a": tc("open", "<tool_call>"),
            "b": tc("chunk", '{"name": "get_weathr"'),
            "c": tc("close", "</tool_call>"),
        },
    )
    events = m.run(src.pipe(tool_calls(TOOLS, on_invalid="error")))
    assert [(e.frame, e.kind) for e in events] == [(3, "E")]
    error = events[0].value
    assert isinstance(error, ToolCallError) and isinstance(error, ValueError)
    assert error.event == ToolCallInvalid(
        0, "unknown tool 'get_weathr...' (known: 'get_weather')", 19, '<tool_call>{"name": "get_weathr"'
    )
    assert "invalid tool call 0 at 19" in str(error)
    m.expect_subscriptions(src, "^--!")


def test_the_stream_ends_inside_a_region() -> None:
    m = MarbleTest()
    src = m.cold(
        "-a-b-|", {"a": tc("open", "<tool_call>"), "b": tc("chunk", '{"name": "get_weather", "argu')}
    )
    m.expect(
        src.pipe(tool_calls(TOOLS, id_factory=ids)),
        "---s-(i|)",
        {
            "s": ToolCallStart(0, "call_0", "get_weather"),
            "i": ToolCallInvalid(
                0,
                "the stream ended inside a tool call region before the JSON was complete "
                "(the text ends inside a string)",
                29,
                '<tool_call>{"name": "get_weather", "argu',
            ),
        },
    )
    done = rx.from_iterable([tc("open"), tc("chunk", '{"name": "get_weather", "arguments": {"city": "x"}}')])
    out = done.pipe(tool_calls(TOOLS, id_factory=ids), ops.to_list()).run()
    assert isinstance(out[-1], ToolCallEnd)  # complete: no closing delimiter needed


def test_subscriber_disposal_disposes_the_upstream() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-c-|", {"a": tc("open"), "b": tc("chunk", '{"name": "f"'), "c": tc("chunk", "}")})
    m.expect(
        src.pipe(tool_calls(id_factory=ids)), "---s-", {"s": ToolCallStart(0, "call_0", "f")}, dispose_at=4
    )
    m.expect_subscriptions(src, "^---!")


def test_each_subscription_has_its_own_parser() -> None:
    source = rx.from_iterable([tc("open"), tc("chunk", '{"name": "f"}'), tc("close")])
    op = tool_calls(id_factory=ids)
    first = source.pipe(op, ops.to_list()).run()
    assert source.pipe(op, ops.to_list()).run() == first
    assert first[0] == ToolCallStart(0, "call_0", "f")


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"format": "yaml"}, ValueError, "tool_calls: unknown format 'yaml'"),
        ({"channel": ""}, ValueError, "tool_calls: channel must be a non-empty str"),
        ({"on_invalid": "ignore"}, ValueError, "tool_calls: on_invalid is 'report', 'cancel' or 'error'"),
        ({"id_factory": 5}, TypeError, "tool_calls: id_factory must be callable"),
        (
            {"tools": [{"type": "function", "function": {"name": "a"}}, {"function": {}}]},
            ValueError,
            "tool_calls: tools[1]",
        ),
        ({"tools": {"name": "a"}}, TypeError, "tool_calls: tools must be a list of tool definitions"),
        (
            {
                "tools": [
                    {"function": {"name": "a", "parameters": {"type": "object", "properties": {"x": 3}}}}
                ]
            },
            ValueError,
            "tool_calls: tools[0] (a): parameters.properties.x: a schema is a mapping",
        ),
    ],
)
def test_construction_errors_name_the_bad_argument(
    kwargs: dict[str, Any], error: type[Exception], text: str
) -> None:
    with pytest.raises(error) as info:
        tool_calls(**kwargs)
    assert text in str(info.value) and "\n" not in str(info.value)


def test_a_non_segment_item_goes_to_on_error_and_disposes_the_upstream() -> None:
    subject: Subject[Any] = Subject()
    errors: list[Exception] = []
    subject.pipe(tool_calls()).subscribe(lambda _: None, errors.append)
    subject.on_next("text")  # must not raise here
    assert len(errors) == 1 and "tool_calls: expected Segment items, got str: 'text'" in str(errors[0])
    assert not subject.observers


def test_a_subscriber_exception_stops_the_operator_and_disposes_the_upstream() -> None:
    subject: Subject[Any] = Subject()

    def on_next(_: Any) -> None:
        raise RuntimeError("subscriber failed")

    subject.pipe(tool_calls()).subscribe(on_next)
    with pytest.raises(RuntimeError, match="subscriber failed"):
        subject.on_next(content("x"))
    assert subject.observers == []


@settings(max_examples=60)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["content", "call", "bad"]),
            st.dictionaries(st.sampled_from(["city", "days"]), st.sampled_from(["x", 1, "é\n"]), max_size=2),
            st.integers(1, 9),
        ),
        max_size=5,
    )
)
def test_the_operator_is_the_parser_between_passed_through_segments(
    parts: list[tuple[str, Any, int]],
) -> None:
    segs: list[Segment] = []
    for kind, args, cut in parts:
        if kind == "content":
            segs.append(content(json.dumps(args)))
            continue
        name = "get_weather" if kind == "call" else "get_wether"
        text = json.dumps({"name": name, "arguments": args})
        segs += [
            tc("open", "<tool_call>"),
            tc("chunk", text[:cut]),
            tc("chunk", text[cut:]),
            tc("close", "</tool_call>"),
        ]
    out = rx.from_iterable(segs).pipe(tool_calls(TOOLS, id_factory=ids), ops.to_list()).run()
    parser = ToolCallParser("json", TOOLS, id_factory=ids)
    expected: list[Any] = []
    for s in segs:
        expected += parser.feed(s) if s.channel == "tool_call" else [s]
    assert out == expected


# -- nesting the model chooses ---------------------------------------------------------------------
@pytest.mark.parametrize("depth", [300, 1000, 20_000])
def test_arguments_nested_past_the_bound_are_an_invalid_call_and_the_stream_goes_on(depth: int) -> None:
    """The nesting is the model's choice: past 256 levels the call is a ToolCallInvalid at the
    bracket that goes too deep (it was a bare RecursionError that ended the stream), and the text
    after the call still arrives."""
    args = '{"a": ' + "[" * depth + "]" * depth + "}"
    text = '{"name": "f", "arguments": ' + args + "}"
    chunks = [text[i : i + 97] for i in range(0, len(text), 97)]
    source = [content("before "), tc("open", "<tool_call>"), *(tc("chunk", c) for c in chunks)]
    source += [tc("close", "</tool_call>"), content(" after")]
    out: list[Any] = []
    errors: list[Exception] = []
    rx.from_iterable(source).pipe(tool_calls()).subscribe(out.append, errors.append)
    assert errors == []
    invalid = [e for e in out if isinstance(e, ToolCallInvalid)]
    assert len(invalid) == 1
    assert "nested deeper than 256 levels" in invalid[0].error
    # the call object and its arguments are levels 1 and 2: the 255th bracket opens level 257
    assert invalid[0].position == text.index("[") + 254
    assert [e.text for e in out if isinstance(e, Segment)] == ["before ", " after"]


def test_deep_values_cost_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every container event built its whole path (quadratic in depth: 20,000 brackets took 17 s);
    now only leaves carry a path, and the work is linear in the text."""
    from rxstream.channels import _tool_region

    built = [0]
    original = _tool_region.Tracker.path

    def counted(self: Any) -> tuple[str | int, ...]:
        path = original(self)
        built[0] += len(path) + 1
        return path

    monkeypatch.setattr(_tool_region.Tracker, "path", counted)
    for siblings in (10, 40):
        built[0] = 0
        inner = "[" * 250 + "]" * 250  # no leaf: no path needs building
        args = '{"a": [' + ",".join([inner] * siblings) + "]}"
        parser = ToolCallParser()
        events = parser.feed(tc("open", "<tool_call>"))
        events += parser.feed(tc("chunk", '{"name": "f", "arguments": ' + args + "}"))
        events += parser.feed(tc("close", "</tool_call>"))
        assert isinstance(events[-1], ToolCallEnd)
        assert built[0] <= 10, built[0]
