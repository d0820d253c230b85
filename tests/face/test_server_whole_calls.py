"""A call that decoding does not constrain (``tool_choice`` auto, tools not ``strict``) reaches a
client only once it is valid, in all three APIs: the official ``openai`` client (Chat
Completions, Responses) and ``anthropic`` client (Messages) never see part of the invalid call
the model wrote before a valid one; the valid one arrives whole, numbered as the first. A
call the grammar makes valid (``strict``) streams its arguments as it is written."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from tokenizers import Tokenizer

from rxstream.server import create_app, run_in_thread
from tests.face.test_server_channels import serving
from tests.face.test_server_tool_calls import TOOLS, USER, WEATHER
from tests.replay_logits import ReplayLogitsModel
from tests.scripted_model import CHATML, QWEN3_TEMPLATE, ScriptedModel

anthropic = pytest.importorskip("anthropic")

BAD_THEN_GOOD = (
    'Checking.<tool_call>\n{"name": "get_weather", "arguments": {"city": 5}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich", "days": 3}}\n</tool_call>'
)
GOOD_ARGS = {"city": "Zürich", "days": 3}


def chunks(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream("POST", f"{url}/v1/chat/completions", json={**body, "stream": True}) as r:
        return [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]


def test_chat_completions_sends_only_the_valid_call_whole(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, CHATML, BAD_THEN_GOOD)
    with serving(model) as (client, url, _app):
        got = chunks(url, {"messages": USER, "tools": TOOLS})
        stream = client.chat.completions.create(model="scripted", messages=USER, tools=TOOLS, stream=True)
        calls: dict[int, dict[str, str]] = {}
        for chunk in stream:  # as a client following OpenAI's format assembles calls
            for d in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                c = calls.setdefault(d.index, {"name": "", "arguments": ""})
                c["name"] += (d.function and d.function.name) or ""
                c["arguments"] += (d.function and d.function.arguments) or ""
    deltas = [d for c in got if c["choices"] for d in c["choices"][0]["delta"].get("tool_calls", [])]
    start, delta = deltas  # the call's start, then all its arguments at once
    assert start["index"] == delta["index"] == 0 and start["function"]["name"] == "get_weather"
    assert json.loads(delta["function"]["arguments"]) == GOOD_ARGS
    reports = [c["choices"][0]["rxstream"] for c in got if c["choices"] and "rxstream" in c["choices"][0]]
    assert len(reports) == 1 and reports[0]["invalid_tool_calls"][0]["index"] is None
    assert [got[-1]["choices"][0]["finish_reason"]] == ["tool_calls"]
    assert list(calls) == [0] and json.loads(calls[0]["arguments"]) == GOOD_ARGS


def test_responses_and_messages_never_open_an_item_for_the_invalid_call(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, CHATML, BAD_THEN_GOOD)
    flat = [{"type": "function", **t["function"]} for t in TOOLS]
    with run_in_thread(create_app(model, model_name="scripted")) as url:
        oa = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
        events = list(oa.responses.create(model="scripted", input="Weather?", tools=flat, stream=True))
        an = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
        tools = [{"name": t["name"], "input_schema": t["parameters"]} for t in flat]
        with an.messages.stream(model="scripted", max_tokens=500, messages=USER, tools=tools) as stream:
            kinds = [e.type for e in stream]
            message = stream.get_final_message()
    added = [e.item for e in events if e.type == "response.output_item.added"]
    assert [i.type for i in added] == ["message", "function_call"]
    args = [e for e in events if e.type == "response.function_call_arguments.delta"]
    assert len(args) == 1 and json.loads(args[0].delta) == GOOD_ARGS
    final = events[-1].response
    assert final.status == "completed"
    assert [i.type for i in final.output] == ["message", "function_call"]
    uses = [b for b in message.content if b.type == "tool_use"]
    assert len(uses) == 1 and uses[0].input == GOOD_ARGS and message.stop_reason == "tool_use"
    assert kinds.count("content_block_start") == 2  # the text and the one valid call


def test_a_strict_call_streams_its_arguments_as_written(smollm2_tokenizer: Tokenizer) -> None:
    eos = smollm2_tokenizer.token_to_id("<|im_end|>")
    call = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    recorded = f"<think>\nA city.\n</think>\n\n<tool_call>\n{call}\n</tool_call>"
    model = ReplayLogitsModel(smollm2_tokenizer, QWEN3_TEMPLATE, recorded, eos=eos)
    strict = {"type": "function", "function": {**WEATHER["function"], "strict": True}}
    with serving(model) as (_client, url, _app):
        got = chunks(url, {"messages": USER, "tools": [strict]})
    deltas = [d for c in got if c["choices"] for d in c["choices"][0]["delta"].get("tool_calls", [])]
    assert len(deltas) > 2  # the start, then the arguments as they come
    text = "".join(d["function"].get("arguments", "") for d in deltas)
    assert json.loads(text)["city"] == "Paris"
