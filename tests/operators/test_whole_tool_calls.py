"""``whole_tool_calls``: a call goes out only once it is valid, whole and in order; an invalid
or unfinished one leaves nothing but its report. Timing (marbles) and the order of everything
else (a property over random streams of calls and text)."""

from __future__ import annotations

from typing import Any

import reactivex as rx
from hypothesis import given
from hypothesis import strategies as st
from reactivex import operators as ops

from rxstream.channels import ToolCallDelta, ToolCallEnd, ToolCallInvalid, ToolCallStart, ToolCallValue
from rxstream.chat import TextDelta
from rxstream.operators import whole_tool_calls
from rxstream.testing import MarbleTest


def run(items: list[Any]) -> list[Any]:
    out: list[Any] = rx.from_iterable(items).pipe(whole_tool_calls(), ops.to_list()).run()
    return out


def call(index: int, valid: bool, parts: int) -> list[Any]:
    events: list[Any] = [ToolCallStart(index, f"call_{index}", "f")]
    events += [ToolCallDelta(index, f"p{k}") for k in range(parts)]
    if parts:
        events.append(ToolCallValue(index, ("n",), parts))
    if valid:
        events.append(ToolCallEnd(index, f"call_{index}", "f", {"n": parts}, "x"))
    else:
        events.append(ToolCallInvalid(index, "bad", 0, "raw"))
    return events


def test_a_valid_call_goes_out_whole_at_its_end() -> None:
    m = MarbleTest()
    values = {
        "s": ToolCallStart(0, "c", "f"),
        "d": ToolCallDelta(0, '{"a"'),
        "e": ToolCallDelta(0, ": 1}"),
        "z": ToolCallEnd(0, "c", "f", {"a": 1}, '{"a": 1}'),
        "t": TextDelta("content", "ok"),
    }
    src = m.cold("-s-d-e-z-t-|", values)
    joined = {**values, "j": ToolCallDelta(0, '{"a": 1}')}
    m.expect(src.pipe(whole_tool_calls()), "-------(sjz)-t-|", joined)
    m.expect_subscriptions(src, "^----------!")


def test_an_invalid_call_leaves_only_its_report_and_text_after_it_waits_for_nothing() -> None:
    items = [TextDelta("content", "a"), *call(0, False, 2), TextDelta("content", "b")]
    assert run(items) == [
        TextDelta("content", "a"),
        ToolCallInvalid(0, "bad", 0, "raw"),
        TextDelta("content", "b"),
    ]


def test_a_call_still_open_at_the_end_is_dropped_and_what_followed_it_goes_out() -> None:
    items = [*call(0, True, 1), ToolCallStart(1, "call_1", "g"), ToolCallDelta(1, "{")]
    assert run(items) == call(0, True, 1)  # (one delta: nothing to join)


def test_an_error_drops_the_held_call_and_passes_on() -> None:
    boom = ValueError("boom")
    source = rx.concat(rx.from_iterable(call(0, True, 1)[:2]), rx.throw(boom))
    seen: list[Any] = []
    errors: list[Exception] = []
    source.pipe(whole_tool_calls()).subscribe(seen.append, errors.append)
    assert seen == [] and errors == [boom]


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[Any], list[Any]]:
    """A stream of text and calls (some invalid, some interleaved with text while open), and
    what must come out: the text in order, each valid call's events together at its end."""
    items: list[Any] = []
    expected: list[Any] = []
    for index in range(draw(st.integers(0, 5))):
        if draw(st.booleans()):
            text = TextDelta("content", draw(st.text(min_size=1, max_size=3)))
            items.append(text)
            expected.append(text)
        valid = draw(st.booleans())
        events = call(index, valid, draw(st.integers(0, 3)))
        inside = draw(st.booleans()) and len(events) > 1  # text written while the call is open
        between = TextDelta("content", "~") if inside else None
        if between is not None:
            items += [events[0], between, *events[1:]]
        else:
            items += events
        if valid:
            deltas = [e for e in events if isinstance(e, ToolCallDelta)]
            rest = [e for e in events[1:] if not isinstance(e, ToolCallDelta)]
            joined = [ToolCallDelta(index, "".join(d.text for d in deltas))] if deltas else []
            expected += [events[0], *([between] if between else []), *joined, *rest]
        else:
            expected += [*([between] if between else []), events[-1]]
    return items, expected


@given(streams())
def test_valid_calls_whole_and_in_order_invalid_ones_only_reported(case: tuple[list[Any], list[Any]]) -> None:
    items, expected = case
    out = run(items)
    assert out == expected
    for k, item in enumerate(out):  # a call's start goes out in the same frame as its end
        if isinstance(item, ToolCallStart):
            assert any(isinstance(e, ToolCallEnd) and e.index == item.index for e in out[k:])
