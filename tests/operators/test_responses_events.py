"""``responses_events``: a routed chat's items as OpenAI Responses API events -- shapes the official
SDK validates, timing and disposal pinned to frames, and the same events (once adjacent deltas of
an item are joined) for every grouping of a real tokenizer's ids (SEMANTICS §11)."""

from __future__ import annotations

import json
import re
from typing import Any

import pydantic
import pytest
import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses import Response, ResponseStreamEvent

from rxstream import Finish, FinishReason, FinishRecorder
from rxstream.channels import ToolCallDelta, ToolCallEnd, ToolCallInvalid, ToolCallStart
from rxstream.chat import ChatPlan, TextDelta, TokenUsage
from rxstream.families import family
from rxstream.operators import chat_pipeline, responses_events
from rxstream.testing import MarbleTest
from rxstream.testing.tokenizers import bytelevel

ECHO = {"parallel_tool_calls": True, "tool_choice": "auto", "tools": []}
"""Fields a response object must have (the server echoes the request's)."""

EVENTS: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ResponseStreamEvent)

QWEN3 = family("qwen3").spec
ANSWER = (
    "<think>\nAdd them: 2 + 2 = 4. café 🗼\n</think>\n\nThe answer is 4."
    '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": [2, "中文"]}}\n</tool_call>\n'
    '<tool_call>\n{"name": "mul", "arguments": {}}\n</tool_call>'
)


def events_of(items: list[Any], **kwargs: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    params = {"created_at": 1, "model": "m", "fields": ECHO, **kwargs}
    rx.from_iterable(items).pipe(responses_events("resp_abc", **params)).subscribe(out.append)
    return out


def test_every_event_validates_with_the_sdk_types() -> None:
    usage = TokenUsage(content=3, reasoning=2, tool_calls=4, delimiters=1)
    items = [
        TextDelta("reasoning", "hm"),
        TextDelta("reasoning", "m"),
        TextDelta("content", "Hi"),
        ToolCallStart(0, "call_1", "f"),
        ToolCallDelta(0, '{"a": '),
        ToolCallDelta(0, "1}"),
        ToolCallEnd(0, "call_1", "f", {"a": 1}, '{"a": 1}'),
    ]
    events = events_of(items, usage=lambda: usage, input_tokens=7)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    for event in events:
        EVENTS.validate_python(event)  # strict: every required field, every literal
    final = Response.model_validate(events[-1]["response"])
    assert final.status == "completed" and final.output_text == "Hi"
    reasoning, message, call = final.output
    assert (reasoning.id, message.id, call.id) == ("rs_abc_0", "msg_abc_1", "fc_abc_2")
    assert reasoning.type == "reasoning" and reasoning.content is not None
    assert reasoning.content[0].text == "hmm"
    assert call.type == "function_call" and (call.call_id, call.name, call.arguments) == (
        "call_1",
        "f",
        '{"a": 1}',
    )
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens, final.usage.total_tokens) == (7, 10, 17)
    assert final.usage.output_tokens_details.reasoning_tokens == 2
    deltas = [e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"]
    assert "".join(deltas) == call.arguments


def test_budget_end_is_incomplete_and_error_is_failed() -> None:
    rec = FinishRecorder()
    rec(Finish(FinishReason.LENGTH))
    events = events_of([TextDelta("content", "Hi")], finish=rec)
    last = events[-1]
    assert last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert last["response"]["output"][0]["status"] == "incomplete"
    EVENTS.validate_python(last)

    out: list[dict[str, Any]] = []
    errors: list[Exception] = []
    source = rx.concat(rx.of(TextDelta("content", "Hi")), rx.throw(RuntimeError("boom")))
    source.pipe(responses_events("resp_x", created_at=0, model="m", fields=ECHO)).subscribe(
        out.append, errors.append
    )
    assert not errors and out[-1]["type"] == "response.failed"
    assert out[-1]["response"]["error"] == {"code": "server_error", "message": "RuntimeError: boom"}
    EVENTS.validate_python(out[-1])


def test_invalid_call_ends_its_item_incomplete_and_is_reported() -> None:
    items = [
        ToolCallStart(0, "call_1", "f"),
        ToolCallDelta(0, '{"a": '),
        ToolCallInvalid(0, "bad", 6, '<tool_call>{"a": ]'),
        ToolCallInvalid(1, "unknown tool", 0, "<tool_call>x"),
    ]
    events = events_of(items)
    final = events[-1]["response"]
    assert final["output"][0]["status"] == "incomplete" and final["output"][0]["arguments"] == '{"a": '
    assert [r["output_index"] for r in final["rxstream"]["invalid_tool_calls"]] == [0, None]
    for event in events:
        EVENTS.validate_python(event)


def test_events_go_out_in_the_frame_of_their_item_and_disposal_reaches_upstream() -> None:
    m = MarbleTest()
    src = m.cold("-a--b--|", {"a": TextDelta("content", "x"), "b": ToolCallStart(0, "c", "f")})
    out = src.pipe(responses_events("resp_1", created_at=0, model="m"))
    types = out.pipe(rx.operators.map(lambda e: e["type"][len("response.") :]))
    m.expect(
        types,
        "(cp)(abd)--(efgA)--(Bgz|)",
        {
            "c": "created",
            "p": "in_progress",
            "a": "output_item.added",
            "b": "content_part.added",
            "d": "output_text.delta",
            "e": "output_text.done",
            "f": "content_part.done",
            "g": "output_item.done",
            "A": "output_item.added",
            "B": "function_call_arguments.done",  # an open call ends with the stream
            "z": "completed",
        },
    )
    m2 = MarbleTest()
    src2 = m2.cold("-a--b--|", {"a": TextDelta("content", "x"), "b": TextDelta("content", "y")})
    out2 = src2.pipe(responses_events("resp_1", created_at=0, model="m"))
    kinds = out2.pipe(rx.operators.map(lambda e: e["type"]))
    m2.expect(kinds, "(cp)(abd)", _names("cpabd"), dispose_at="---!")
    m2.expect_subscriptions(src2, "^--!")


def _names(keys: str) -> dict[str, str]:
    table = {
        "c": "response.created",
        "p": "response.in_progress",
        "a": "response.output_item.added",
        "b": "response.content_part.added",
        "d": "response.output_text.delta",
    }
    return {k: table[k] for k in keys}


def test_bad_arguments_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="response_id"):
        responses_events("", created_at=0, model="m")
    with pytest.raises(TypeError, match="usage"):
        responses_events("r", created_at=0, model="m", usage=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="finish"):
        responses_events("r", created_at=0, model="m", finish=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fields"):
        responses_events("r", created_at=0, model="m", fields=[1])  # type: ignore[arg-type]


# -------------------------------------------------------------------- for every chunking of the ids
_TOK = bytelevel()
_IDS = _TOK.encode(ANSWER, add_special_tokens=False).ids


def _joined(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Adjacent deltas of one item joined, sequence numbers dropped, call ids normalized (they
    are random): what does not depend on the chunking."""
    out: list[dict[str, Any]] = []
    for event in events:
        event = json.loads(re.sub(r"call_[0-9a-f]{24}", "call", json.dumps(event)))
        event.pop("sequence_number")
        last = out[-1] if out else None
        if (
            last is not None
            and event["type"].endswith(".delta")
            and last["type"] == event["type"]
            and last["item_id"] == event["item_id"]
        ):
            last["delta"] += event["delta"]
            continue
        out.append(event)
    return out


def _through_pipeline(groups: list[list[int]]) -> list[dict[str, Any]]:
    usage: list[TokenUsage] = []
    plan = ChatPlan(QWEN3, parse_tools=True)
    out: list[dict[str, Any]] = []
    rx.from_iterable(groups).pipe(
        chat_pipeline(_TOK, plan, usage=usage.append),
        responses_events("resp_p", created_at=0, model="m", fields=ECHO, usage=lambda: usage[-1]),
    ).subscribe(out.append)
    return out


def _groups(sizes: list[int]) -> list[list[int]]:
    groups, k = [], 0
    for n in [*sizes, *([1] * len(_IDS))]:
        if k >= len(_IDS):
            break
        groups.append(list(_IDS[k : k + n]))
        k += n
    return groups


_WHOLE = _through_pipeline([list(_IDS)])


def test_the_recorded_answer_gives_reasoning_message_and_two_calls() -> None:
    final = Response.model_validate(_WHOLE[-1]["response"])
    assert [item.type for item in final.output] == ["reasoning", "message", "function_call", "function_call"]
    assert final.output_text == "The answer is 4."
    calls = [item for item in final.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("add", {"a": 2, "b": [2, "中文"]}),
        ("mul", {}),
    ]
    assert final.usage is not None and final.usage.output_tokens == len(_IDS)


@settings(max_examples=60)
@given(st.lists(st.integers(1, 5), max_size=len(_IDS)))
def test_events_are_the_same_for_every_grouping_of_the_ids(sizes: list[int]) -> None:
    events = _through_pipeline(_groups(sizes))
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert _joined(events) == _joined(_WHOLE)
    for event in events:
        if event["type"] == "response.function_call_arguments.done":
            deltas = [
                e["delta"]
                for e in events
                if e["type"] == "response.function_call_arguments.delta" and e["item_id"] == event["item_id"]
            ]
            assert "".join(deltas) == event["arguments"]
