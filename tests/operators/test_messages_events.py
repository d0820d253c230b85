"""``messages_events``: a chat's items as the Anthropic Messages streaming events. The official
``anthropic`` SDK parses and accumulates them; the events are the same for every grouping of the
ids through ``chat_pipeline`` (real byte-level and SentencePiece-style tokenizers); timing and
disposal pinned by marbles."""

from __future__ import annotations

import json
from typing import Any

import pytest
import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st

from rxstream import Finish, FinishReason, FinishRecorder
from rxstream import rx as regex
from rxstream.channels import ToolCallDelta, ToolCallEnd, ToolCallInvalid, ToolCallStart
from rxstream.chat import ChatPlan, TextDelta, TokenUsage
from rxstream.families import family
from rxstream.operators import MessageEvents, chat_pipeline, messages_events
from rxstream.testing import MarbleTest
from rxstream.text import RegexStop
from tests.operators.test_chat_usage import WORDS, items_of, tokenizer

anthropic = pytest.importorskip("anthropic")
from anthropic.lib.streaming._messages import accumulate_event  # noqa: E402
from anthropic.types import RawMessageStreamEvent  # noqa: E402

QWEN3 = family("qwen3").spec
TOOLS = [
    {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}},
    }
]


def events_of(items: list[Any], **kwargs: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    rx.from_iterable(items).pipe(messages_events("msg_1", "m", **kwargs)).subscribe(out.append)
    return out


def sdk_message(events: list[dict[str, Any]]) -> Any:
    """The message the SDK's stream helper assembles from the events (each parsed by its type)."""
    from anthropic._models import construct_type

    snapshot = None
    bufs: dict[int, bytes] = {}
    for event in events:
        parsed = construct_type(type_=RawMessageStreamEvent, value=event)
        assert type(parsed).__name__.startswith("Raw"), event
        snapshot = accumulate_event(event=parsed, current_snapshot=snapshot, json_bufs=bufs)
    return snapshot


def joined(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events with adjacent deltas of one block joined (what the chunking cannot change)."""
    out: list[dict[str, Any]] = []
    for e in events:
        last = out[-1] if out else None
        if (
            last is not None
            and e["type"] == last["type"] == "content_block_delta"
            and e["index"] == last["index"]
            and e["delta"]["type"] == last["delta"]["type"]
        ):
            key = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}[
                e["delta"]["type"]
            ]
            out[-1] = {**last, "delta": {**last["delta"], key: last["delta"][key] + e["delta"][key]}}
        else:
            out.append(e)
    return out


def test_reasoning_text_and_tool_calls_make_blocks_the_sdk_assembles() -> None:
    items = [
        TextDelta("reasoning", "Think"),
        TextDelta("reasoning", "ing."),
        TextDelta("content", "Let me call."),
        ToolCallStart(0, "call_x", "f"),
        ToolCallDelta(0, '{"a": '),
        ToolCallDelta(0, "1}"),
        ToolCallEnd(0, "call_x", "f", {"a": 1}, '{"a": 1}'),
        ToolCallStart(1, "call_y", "g"),
        ToolCallEnd(1, "call_y", "g", {}, "{}"),
    ]
    events = events_of(items, input_tokens=7, usage=lambda: TokenUsage(content=3, reasoning=2, tool_calls=4))
    assert [e["type"] for e in events][:3] == ["message_start", "content_block_start", "content_block_delta"]
    message = sdk_message(events)
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use", "tool_use"]
    assert message.content[0].thinking == "Thinking." and message.content[0].signature == ""
    assert message.content[1].text == "Let me call."
    first, second = message.content[2], message.content[3]
    assert (first.name, first.input, second.name, second.input) == ("f", {"a": 1}, "g", {})
    assert first.id.startswith("toolu_") and first.id != second.id
    assert message.stop_reason == "tool_use" and message.stop_sequence is None
    assert (message.usage.input_tokens, message.usage.output_tokens) == (7, 9)
    # the engine's own final message is the SDK's
    engine = MessageEvents("msg_1", "m", input_tokens=7)
    for item in items:
        engine.add(item)
    engine.finish(None, TokenUsage(content=3, reasoning=2, tool_calls=4))
    assert engine.message() == message.to_dict(exclude_none=True) | {"stop_sequence": None}
    # a missing arguments text is sent at the call's end: the deltas join to the arguments
    parts = [e["delta"]["partial_json"] for e in events if e.get("index") == 3 and "delta" in e]
    assert parts == ["{}"]


@pytest.mark.parametrize(
    ("finish", "tool", "expected"),
    [
        (None, False, ("end_turn", None)),
        (Finish(FinishReason.EOS), False, ("end_turn", None)),
        (Finish(FinishReason.LENGTH), True, ("max_tokens", None)),
        (Finish(FinishReason.STOP, stop="STOP"), False, ("stop_sequence", "STOP")),
        (Finish(FinishReason.STOP, stop=RegexStop(regex("S+"), "SS")), False, ("stop_sequence", "SS")),
        (Finish(FinishReason.STOP, stop=7), False, ("end_turn", None)),
        (Finish(FinishReason.STOP, stop="STOP"), True, ("tool_use", None)),
        (Finish(FinishReason.CANCELLED), False, ("end_turn", None)),
    ],
)
def test_stop_reasons(finish: Finish | None, tool: bool, expected: tuple[str, str | None]) -> None:
    items: list[Any] = [TextDelta("content", "x")]
    if tool:
        items += [ToolCallStart(0, "c", "f"), ToolCallEnd(0, "c", "f", {}, "{}")]
    events = events_of(items, finish=lambda: finish)
    delta = events[-2]
    assert delta["type"] == "message_delta"
    assert (delta["delta"]["stop_reason"], delta["delta"]["stop_sequence"]) == expected


def test_thinking_off_drops_the_reasoning_and_an_invalid_call_is_reported() -> None:
    items = [
        TextDelta("reasoning", "hm"),
        TextDelta("content", "Hi"),
        ToolCallStart(0, "c", "f"),
        ToolCallDelta(0, '{"a": "'),
        ToolCallInvalid(0, "bad type", 6, '<tool_call>{"name": "f", "arguments": {"a": "'),
    ]
    events = events_of(items, thinking=False)
    assert sum(e["type"] == "content_block_start" for e in events) == 2
    assert events[-2]["rxstream"]["invalid_tool_calls"][0]["error"] == "bad type"
    assert events[-2]["delta"]["stop_reason"] == "end_turn"
    engine = MessageEvents("msg_1", "m", thinking=False)
    for item in items:
        engine.add(item)
    engine.finish(None)
    body = engine.message()
    assert body["content"] == [{"type": "text", "text": "Hi"}]
    assert body["rxstream"]["invalid_tool_calls"][0]["index"] == 1


def test_a_recorder_and_a_count_give_the_end() -> None:
    rec = FinishRecorder()
    rec(Finish(FinishReason.LENGTH))
    events = events_of([TextDelta("content", "x")], finish=rec, usage=lambda: 5)
    assert events[-2]["delta"]["stop_reason"] == "max_tokens"
    assert events[-2]["usage"] == {"output_tokens": 5}


def test_bad_arguments_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="message_id"):
        messages_events("", "m")
    with pytest.raises(TypeError, match="model"):
        messages_events("msg_1", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="input_tokens"):
        messages_events("msg_1", "m", input_tokens=-1)
    with pytest.raises(TypeError, match="usage"):
        messages_events("msg_1", "m", usage=3)  # type: ignore[arg-type]
    errors: list[Exception] = []
    rx.of("text").pipe(messages_events("msg_1", "m")).subscribe(on_error=errors.append)
    assert isinstance(errors[0], TypeError) and "messages_events" in str(errors[0])


def test_marbles_start_at_subscription_and_disposal_goes_upstream() -> None:
    m = MarbleTest()
    src = m.cold("-a--b-|", {"a": TextDelta("content", "H"), "b": TextDelta("content", "i")})
    seen = [
        (e.frame, e.kind, e.value["type"] if e.kind == "N" else None)
        for e in m.run(src.pipe(messages_events("msg_1", "m")))
    ]
    assert seen == [
        (0, "N", "message_start"),
        (1, "N", "content_block_start"),
        (1, "N", "content_block_delta"),
        (4, "N", "content_block_delta"),
        (6, "N", "content_block_stop"),
        (6, "N", "message_delta"),
        (6, "N", "message_stop"),
        (6, "C", None),
    ]
    m3 = MarbleTest()
    src3 = m3.cold("-a--b-|", {"a": TextDelta("content", "H"), "b": TextDelta("content", "i")})
    m3.expect(
        src3.pipe(messages_events("msg_1", "m")),
        "s(xy)-",
        {
            "s": events_of([])[0],
            "x": {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            "y": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "H"}},
        },
        dispose_at="---!",
    )
    m3.expect_subscriptions(src3, "^--!")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(WORDS), max_size=16),
    st.lists(st.integers(1, 3), max_size=40),
    st.sampled_from(["bytelevel", "llama"]),
    st.booleans(),
)
def test_the_events_are_the_same_for_every_grouping_of_the_ids(
    words: list[str], sizes: list[int], name: str, stops: bool
) -> None:
    tok = tokenizer(name)
    ids = tok.encode("".join(words), add_special_tokens=False).ids
    plan = ChatPlan(QWEN3, parse_tools=True, tools=tuple(TOOLS))
    stop = ["STOP"] if stops else []

    def run(items: list[Any]) -> list[dict[str, Any]]:
        rec = FinishRecorder()
        usage: list[TokenUsage] = []
        out: list[dict[str, Any]] = []
        rx.from_iterable(items).pipe(
            chat_pipeline(tok, plan, stop=stop, on_finish=rec, usage=usage.append),
            messages_events("msg_1", "m", finish=rec, usage=lambda: usage[0]),
        ).subscribe(out.append)
        return out

    grouped, single = run(items_of(ids, sizes, False)), run(list(ids))
    a, b = joined(grouped), joined(single)
    if stops:  # a stop cancels the generation: how many ids came before it depends on the grouping
        a[-2], b[-2] = {**a[-2], "usage": None}, {**b[-2], "usage": None}
    assert a == b
    message = sdk_message(grouped)
    starts = [e for e in grouped if e["type"] == "content_block_start"]
    for block, event in zip(message.content, starts, strict=True):
        if block.type == "tool_use":
            parts = [
                e["delta"]["partial_json"]
                for e in grouped
                if e["type"] == "content_block_delta" and e["index"] == event["index"]
            ]
            assert json.loads("".join(parts)) == block.input
