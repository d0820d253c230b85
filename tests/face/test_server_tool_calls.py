"""Tool calls in ``rxstream serve``: OpenAI's ``tool_calls`` format streamed and not, with the
official ``openai`` client reassembling identical calls; ``tool_choice`` none / required / named;
invalid calls reported; a client that leaves mid-call. A scripted model replays recorded
completions as SmolLM2's real token ids through a real chat template."""

from __future__ import annotations

import json
import re
import socket
import time
from typing import Any

import httpx
import pytest
from tokenizers import Tokenizer

from rxstream.server import ServerLimits
from tests.face.test_server_channels import both, serving, wait_for
from tests.scripted_model import CHATML, QWEN3_TEMPLATE, ScriptedModel

USER = [{"role": "user", "content": "Weather in Zürich, and the time?"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather of a city for some days",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
TIME = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
}
TOOLS = [WEATHER, TIME]

WEATHER_ARGS = '{"city": "Zürich", "days": 3}'
QWEN3_CALLS = (
    "<think>\nTwo tools: weather, then time. A stop word: Paris.\n</think>\n\n"
    "Let me check both.\n"
    f'<tool_call>\n{{"name": "get_weather", "arguments": {WEATHER_ARGS}}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
)
CALL_ID = re.compile(r"call_[0-9a-f]{24}")


def calls_without_ids(calls: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(name, arguments) of each call; the ids are checked apart (each request makes new ones)."""
    assert all(CALL_ID.fullmatch(c["id"]) for c in calls), calls
    assert len({c["id"] for c in calls}) == len(calls)
    return [(c["name"], c["arguments"]) for c in calls]


def same(whole: dict[str, Any], streamed: dict[str, Any]) -> dict[str, Any]:
    """``whole`` and ``streamed`` are the same answer (ids apart); returns ``whole``."""
    assert calls_without_ids(whole["tool_calls"]) == calls_without_ids(streamed["tool_calls"])
    assert {k: v for k, v in whole.items() if k != "tool_calls"} == {
        k: v for k, v in streamed.items() if k != "tool_calls"
    }
    return whole


def test_tool_calls_streamed_and_not_are_identical(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_CALLS)
    with serving(model) as (client, _url, _app):
        whole = same(*both(client, messages=USER, tools=TOOLS))
        # the official client's own stream helper reassembles the same message
        with client.chat.completions.stream(model="scripted", messages=USER, tools=TOOLS) as stream:
            final = stream.get_final_completion()
    assert whole["reasoning"] == "\nTwo tools: weather, then time. A stop word: Paris.\n"
    assert whole["content"] == "Let me check both.\n"
    assert calls_without_ids(whole["tool_calls"]) == [("get_weather", WEATHER_ARGS), ("get_time", "{}")]
    assert json.loads(whole["tool_calls"][0]["arguments"]) == {"city": "Zürich", "days": 3}
    assert whole["finish_reason"] == "tool_calls"
    message = final.choices[0].message
    assert final.choices[0].finish_reason == "tool_calls"
    assert [(c.type, c.function.name, c.function.arguments) for c in message.tool_calls or []] == [
        ("function", "get_weather", WEATHER_ARGS),
        ("function", "get_time", "{}"),
    ]
    assert message.content == "Let me check both.\n"
    # the template rendered the tools itself
    assert '<tools>\n{"function": {"description": "The weather' in model.prompts[0]


def test_stream_chunks_are_openai_tool_call_deltas(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_CALLS)
    with serving(model) as (_client, url, _app):
        body = {"messages": USER, "tools": TOOLS, "stream": True}
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
            lines = [line for line in r.iter_lines() if line.startswith("data: {")]
    chunks = [json.loads(line[6:]) for line in lines]
    deltas = [
        c["choices"][0]["delta"]["tool_calls"] for c in chunks if "tool_calls" in c["choices"][0]["delta"]
    ]
    assert all(len(d) == 1 for d in deltas)
    first = [d[0] for d in deltas if "id" in d[0]]
    assert [(f["index"], f["type"], f["function"]) for f in first] == [
        (0, "function", {"name": "get_weather", "arguments": ""}),
        (1, "function", {"name": "get_time", "arguments": ""}),
    ]
    for index, args in ((0, WEATHER_ARGS), (1, "{}")):
        parts = [d[0] for d in deltas if d[0]["index"] == index and "id" not in d[0]]
        assert all(set(p) == {"index", "function"} and set(p["function"]) == {"arguments"} for p in parts)
        assert "".join(p["function"]["arguments"] for p in parts) == args
    # not constrained by decoding, each call is held until valid: its start, then its arguments whole
    assert len([d for d in deltas if d[0]["index"] == 0]) == 2
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_fallback_prompt_for_a_template_without_tools(smollm2_tokenizer: Tokenizer) -> None:
    text = (
        f'Checking.\n<tool_call>\n{{"name": "get_weather", "arguments": {WEATHER_ARGS}}}\n</tool_call>\nDone.'
    )
    model = ScriptedModel(smollm2_tokenizer, CHATML, text)
    with serving(model) as (client, _url, app):
        assert app.state.reasoning_format is None
        whole = same(*both(client, messages=USER, tools=TOOLS))
    prompt = model.prompts[0]
    assert prompt.startswith("<|im_start|>system\nYou can call functions to answer.")
    assert json.dumps(WEATHER, ensure_ascii=False) in prompt and json.dumps(TIME) in prompt
    assert "between <tool_call> and </tool_call>" in prompt
    assert calls_without_ids(whole["tool_calls"]) == [("get_weather", WEATHER_ARGS)]
    assert whole["content"] == "Checking.\nDone."  # text after a call is answer text
    assert whole["finish_reason"] == "tool_calls" and whole["reasoning"] is None


def test_tool_choice_none_offers_no_tools_and_parses_nothing(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_CALLS)
    with serving(model) as (client, _url, _app):
        whole = same(*both(client, messages=USER, tools=TOOLS, tool_choice="none"))
    assert "<tools>" not in model.prompts[0]
    assert whole["tool_calls"] == [] and whole["finish_reason"] == "stop"
    assert whole["content"] == QWEN3_CALLS.split("</think>\n\n")[1]  # the calls' text is answer text


def required_script(prompt: str) -> str:
    """Continues a prompt that opened a tool call (and maybe named it), as a model would."""
    if prompt.endswith('<tool_call>\n{"name": "get_weather", "arguments": '):
        return '{"city": "Paris"}}\n</tool_call>'
    if prompt.endswith("<|im_start|>assistant\n<tool_call>\n"):
        return '{"name": "get_time", "arguments": {}}\n</tool_call>'
    return "I would rather not call anything."


@pytest.mark.parametrize("template", [CHATML, QWEN3_TEMPLATE], ids=["fallback", "native"])
def test_tool_choice_required_and_named_open_the_call_in_the_prompt(
    smollm2_tokenizer: Tokenizer, template: str
) -> None:
    model = ScriptedModel(smollm2_tokenizer, template, required_script)
    named = {"type": "function", "function": {"name": "get_weather"}}
    with serving(model) as (client, _url, _app):
        required = same(*both(client, messages=USER, tools=TOOLS, tool_choice="required"))
        chosen = same(*both(client, messages=USER, tools=TOOLS, tool_choice=named))
        auto = same(*both(client, messages=USER, tools=TOOLS))
    assert calls_without_ids(required["tool_calls"]) == [("get_time", "{}")]
    assert calls_without_ids(chosen["tool_calls"]) == [("get_weather", '{"city": "Paris"}')]
    for answer in (required, chosen):
        assert answer["content"] is None and answer["finish_reason"] == "tool_calls"
    assert auto["tool_calls"] == [] and auto["content"] == "I would rather not call anything."


def test_named_choice_with_arguments_against_the_schema_is_reported_invalid(
    smollm2_tokenizer: Tokenizer,
) -> None:
    model = ScriptedModel(smollm2_tokenizer, CHATML, '{"city": 5}}\n</tool_call>\nSorry.')
    named = {"type": "function", "function": {"name": "get_weather"}}
    with serving(model) as (client, url, _app):
        whole, streamed = both(client, messages=USER, tools=TOOLS, tool_choice=named)
        raw = httpx.post(
            f"{url}/v1/chat/completions", json={"messages": USER, "tools": TOOLS, "tool_choice": named}
        ).json()
        body = {"messages": USER, "tools": TOOLS, "tool_choice": named, "stream": True}
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
            chunks = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    assert whole["tool_calls"] == [] and whole["finish_reason"] == "stop" and whole["content"] == "Sorry."
    choice = raw["choices"][0]
    assert "tool_calls" not in choice["message"]
    [report] = choice["rxstream"]["invalid_tool_calls"]
    assert report["index"] is None  # held until valid, it never reached the client as a call
    assert "schema" in report["error"] and report["raw"].startswith('<tool_call>\n{"name": "get_weather"')
    assert report["raw"][report["position"] + len("<tool_call>") :].startswith("5")
    # streamed: no part of the call went out (decoding did not constrain it), only the report
    reports = [c["choices"][0]["rxstream"] for c in chunks if "rxstream" in c["choices"][0]]
    assert [r["invalid_tool_calls"][0]["error"] for r in reports] == [report["error"]]
    assert not any("tool_calls" in c["choices"][0]["delta"] for c in chunks if c["choices"])
    assert streamed["tool_calls"] == [] and streamed["content"] == "Sorry."


def test_unknown_tool_is_reported_and_never_started(smollm2_tokenizer: Tokenizer) -> None:
    text = '<tool_call>\n{"name": "launch_rocket", "arguments": {}}\n</tool_call>'
    model = ScriptedModel(smollm2_tokenizer, CHATML, text)
    with serving(model) as (client, url, _app):
        whole, streamed = both(client, messages=USER, tools=TOOLS)
        raw = httpx.post(f"{url}/v1/chat/completions", json={"messages": USER, "tools": TOOLS}).json()
    assert whole == streamed
    assert whole["tool_calls"] == [] and whole["content"] is None and whole["finish_reason"] == "stop"
    [report] = raw["choices"][0]["rxstream"]["invalid_tool_calls"]
    assert report["index"] is None and report["error"].startswith("unknown tool") and report["raw"] == text
    assert report["raw"][report["position"] + len("<tool_call>") :].startswith("l")  # decided at its "l"


def test_stop_strings_apply_to_the_answer_not_to_the_calls(smollm2_tokenizer: Tokenizer) -> None:
    text = QWEN3_CALLS + "\nSo: Zürich is sunny. The end."
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, text)
    with serving(model) as (client, _url, _app):
        whole = same(*both(client, messages=USER, tools=TOOLS, stop=["Zürich", "Paris"]))
    # "Paris" in the reasoning and "Zürich" in the arguments cut nothing; "Zürich" in the answer does
    assert calls_without_ids(whole["tool_calls"]) == [("get_weather", WEATHER_ARGS), ("get_time", "{}")]
    assert whole["content"] == "Let me check both.\nSo: "
    assert whole["finish_reason"] == "tool_calls"


def test_parallel_tool_calls_false_ends_after_the_first_call(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_CALLS + "\nMore text." * 50)
    with serving(model) as (client, url, _app):
        whole = same(*both(client, messages=USER, tools=TOOLS, parallel_tool_calls=False))
        raw = httpx.post(
            f"{url}/v1/chat/completions",
            json={"messages": USER, "tools": TOOLS, "parallel_tool_calls": False},
        ).json()
    assert calls_without_ids(whole["tool_calls"]) == [("get_weather", WEATHER_ARGS)]
    assert whole["finish_reason"] == "tool_calls"
    assert raw["usage"]["completion_tokens"] < len(model.completion_ids(""))  # generation ended there
    assert wait_for(lambda: model.active == 0) and model.cancelled == 3


def test_budget_cut_inside_a_call_is_length_and_reports_it(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, CHATML, QWEN3_CALLS.split("</think>\n\n")[1])
    cut = len(model.encode('Let me check both.\n<tool_call>\n{"name": "get_weather", "arguments": {"ci'))
    with serving(model) as (client, url, _app):
        whole, streamed = both(client, messages=USER, tools=TOOLS, max_tokens=cut)
        raw = httpx.post(
            f"{url}/v1/chat/completions", json={"messages": USER, "tools": TOOLS, "max_tokens": cut}
        ).json()
    assert whole["finish_reason"] == streamed["finish_reason"] == "length"
    assert whole["tool_calls"] == streamed["tool_calls"] == []  # the cut call never went out
    [report] = raw["choices"][0]["rxstream"]["invalid_tool_calls"]
    assert report["index"] is None and report["raw"].startswith("<tool_call>")


def test_a_client_that_leaves_mid_call_does_not_hurt_the_server(smollm2_tokenizer: Tokenizer) -> None:
    long_args = '{"city": "' + "Zürich " * 300 + '"}'
    text = f'<tool_call>\n{{"name": "get_weather", "arguments": {long_args}}}\n</tool_call>'
    model = ScriptedModel(smollm2_tokenizer, CHATML, text, delay=0.005)
    # cancelled once the grace period after the client left is over
    with serving(model, limits=ServerLimits(resume_grace=0.2)) as (client, url, app):
        host, port = url.removeprefix("http://").rsplit(":", 1)
        body = json.dumps({"messages": USER, "tools": TOOLS, "stream": True, "max_tokens": 2000}).encode()
        for _ in range(3):
            with socket.create_connection((host, int(port))) as sock:
                head = (
                    f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                )
                sock.sendall(head.encode() + body)
                got = b""
                while b'"role"' not in got:  # the stream started; the call is held until it ends
                    got += sock.recv(4096)
                time.sleep(0.1)  # leave inside the call (it takes seconds to write)
        assert wait_for(lambda: model.active == 0)
        assert model.cancelled == 3
        assert all(n < len(model.completion_ids("")) for n in model.emitted)
        assert wait_for(lambda: app.state.stats.snapshot()["active"] == 0)
        # the server goes on serving
        model.delay = 0.0
        model.script = lambda _prompt: '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
        reply = client.chat.completions.create(model="scripted", messages=USER, tools=TOOLS)
        assert reply.choices[0].finish_reason == "tool_calls"


def test_conversation_with_tool_results_goes_on(smollm2_tokenizer: Tokenizer) -> None:
    seen: list[str] = []

    def script(prompt: str) -> str:
        seen.append(prompt)
        return "It is sunny in Zürich."

    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, script)
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": WEATHER_ARGS},
    }
    messages = [
        *USER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"sky": "clear"}'},
    ]
    with serving(model) as (client, _url, _app):
        whole = same(*both(client, messages=messages, tools=TOOLS))
    assert whole["content"] == "It is sunny in Zürich." and whole["finish_reason"] == "stop"
    assert '{"name": "get_weather", "arguments": {"city": "Z\\u00fcrich", "days": 3}}' in seen[0]
    assert '<tool_response>\n{"sky": "clear"}\n</tool_response>' in seen[0]
