"""``POST /v1/responses`` in ``rxstream serve``: the official ``openai`` client's Responses API
over real sockets -- streamed events parsed by the SDK, ``responses.stream(...)``'s final response
equal to the non-streamed one for plain, reasoning and tool-calling outputs, the budget,
``previous_response_id``, 400s for fields not honoured, and a client that leaves mid-stream.
A scripted model replays recorded completions as SmolLM2's real token ids through a real chat
template; the real tiny ONNX model answers plain text."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from tokenizers import Tokenizer

from rxstream.backends import OnnxModel, build_tiny_model
from rxstream.server import ServerLimits
from tests.face.test_server_channels import serving, wait_for
from tests.scripted_model import CHATML, QWEN3_TEMPLATE, ScriptedModel

THINKING = "<think>\nTwo and two: four. STOP here is no stop.\n</think>\n\nIt is 4. STOP Nothing more."
CALLS = (
    "Let me look.<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Zürich", "days": 3}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
)
TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "The weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
    {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}},
]


def reduced(response: Any) -> dict[str, Any]:
    """What a client reads of a response (ids aside: each response has its own)."""
    output = []
    for item in response.output:
        if item.type == "message":
            output.append(("message", "".join(p.text for p in item.content), item.status))
        elif item.type == "reasoning":
            output.append(("reasoning", "".join(c.text for c in item.content or []), item.status))
        else:
            output.append(("function_call", item.name, item.arguments, item.status))
    usage = response.usage
    return {
        "status": response.status,
        "text": response.output_text,
        "output": output,
        "incomplete": response.incomplete_details.reason if response.incomplete_details else None,
        "usage": (
            usage.input_tokens,
            usage.output_tokens,
            usage.output_tokens_details.reasoning_tokens,
            usage.total_tokens,
        ),
    }


def both(client: openai.OpenAI, **request: Any) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    """The request non-streamed and through ``responses.stream``, reduced; and the raw stream's
    events, as the SDK parsed them."""
    whole = client.responses.create(model="scripted", **request)
    with client.responses.stream(model="scripted", **request) as stream:
        last = list(stream)[-1]
        # the SDK's final response is a completed one's; an incomplete one's is its last event's
        final = stream.get_final_response() if last.type == "response.completed" else last.response
    events = list(client.responses.create(model="scripted", stream=True, **request))
    return reduced(whole), reduced(final), events


def test_plain_text_streamed_and_not(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, CHATML, "Hello there, Zürich! 🗼", delay=0.01)
    with serving(model) as (client, _url, _app):
        whole, streamed, events = both(client, input="Hi", instructions="Be brief.")
    assert whole == streamed
    assert whole["text"] == "Hello there, Zürich! 🗼" and whole["status"] == "completed"
    assert whole["output"] == [("message", "Hello there, Zürich! 🗼", "completed")]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    types = [e.type for e in events]
    assert types[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert types[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1 and "".join(deltas) == whole["text"]
    assert "Be brief." in model.prompts[0]  # instructions are the system message
    n = len(model.completion_ids(""))
    assert whole["usage"][1:] == (n, 0, whole["usage"][0] + n)


def test_reasoning_goes_out_as_a_reasoning_item(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, THINKING)
    with serving(model) as (client, _url, _app):
        whole, streamed, events = both(
            client, input="What is 2 + 2?", reasoning={"effort": "low"}, extra_body={"stop": ["STOP"]}
        )
    assert whole == streamed
    assert whole["output"] == [
        ("reasoning", "\nTwo and two: four. STOP here is no stop.\n", "completed"),
        ("message", "It is 4. ", "completed"),
    ]
    assert whole["usage"][2] > 0  # reasoning tokens
    assert any(e.type == "response.reasoning_text.delta" for e in events)


def test_tool_calls_as_function_call_items(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, CALLS)
    with serving(model) as (client, _url, _app):
        whole, streamed, events = both(client, input="Weather and time?", tools=TOOLS)
        one, _, _ = both(client, input="Weather and time?", tools=TOOLS, parallel_tool_calls=False)
    assert whole == streamed
    assert whole["output"] == [
        ("message", "Let me look.", "completed"),
        ("function_call", "get_weather", '{"city": "Zürich", "days": 3}', "completed"),
        ("function_call", "get_time", "{}", "completed"),
    ]
    added = [
        e.item for e in events if e.type == "response.output_item.added" and e.item.type == "function_call"
    ]
    assert all(item.call_id.startswith("call_") for item in added)
    for item in added:
        deltas = [
            e.delta
            for e in events
            if e.type == "response.function_call_arguments.delta" and e.item_id == item.id
        ]
        done = [
            e.arguments
            for e in events
            if e.type == "response.function_call_arguments.done" and e.item_id == item.id
        ]
        assert done == ["".join(deltas)]
    assert [o[1] for o in one["output"] if o[0] == "function_call"] == ["get_weather"]


def test_budget_makes_an_incomplete_response(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, THINKING)
    with serving(model) as (client, _url, _app):
        whole, streamed, events = both(client, input="What is 2 + 2?", max_output_tokens=5)
    assert whole == streamed
    assert whole["status"] == "incomplete" and whole["incomplete"] == "max_output_tokens"
    assert whole["usage"][1] == 5 and events[-1].type == "response.incomplete"


def test_previous_response_id_continues_the_conversation(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, CALLS)
    with serving(model) as (client, url, _app):
        first = client.responses.create(model="scripted", input="Weather and time?", tools=TOOLS)
        calls = [item for item in first.output if item.type == "function_call"]
        outputs = [{"type": "function_call_output", "call_id": c.call_id, "output": "sunny"} for c in calls]
        client.responses.create(model="scripted", input=outputs, previous_response_id=first.id, tools=TOOLS)
        missing = httpx.post(f"{url}/v1/responses", json={"input": "x", "previous_response_id": "resp_nope"})
        unstored = client.responses.create(model="scripted", input="again", store=False)
        gone = httpx.post(f"{url}/v1/responses", json={"input": "x", "previous_response_id": unstored.id})
    prompt = model.prompts[1]
    assert "Weather and time?" in prompt and "Let me look." in prompt
    assert prompt.count('"name": "get_weather"') == 1 + prompt.count("<tools>")  # the call, and the tool list
    assert prompt.count("<tool_response>\nsunny\n</tool_response>") == 2
    assert missing.status_code == 404 and missing.json()["error"]["param"] == "previous_response_id"
    assert gone.status_code == 404


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "x", "foo": 1}, "foo"),
        (
            {
                "input": "x",
                "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "wat"}}},
            },
            "text.format.schema",
        ),
        ({"input": "x", "text": {"format": {"type": "xml"}}}, "text.format.type"),
        ({"input": "x", "reasoning": {"summary": "auto"}}, "reasoning.summary"),
        ({"input": "x", "truncation": "auto"}, "truncation"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "input[0].content[0]",
        ),
        ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "x", "temperature": 9}, "temperature"),
        ({"input": "x", "seed": 1}, "seed"),
        ({}, "input"),
    ],
)
def test_fields_not_honoured_are_a_400_naming_them(
    smollm2_tokenizer: Tokenizer, body: dict[str, Any], param: str
) -> None:
    model = ScriptedModel(smollm2_tokenizer, CHATML, "ok")
    with serving(model) as (_client, url, _app):
        r = httpx.post(f"{url}/v1/responses", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param and r.json()["error"]["type"] == "invalid_request_error"
    assert not model.prompts


def test_the_sdk_raises_on_an_unknown_field(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, CHATML, "ok")
    with (
        serving(model) as (client, _url, _app),
        pytest.raises(openai.BadRequestError, match="unknown field 'foo'"),
    ):
        client.responses.create(model="scripted", input="x", extra_body={"foo": 1})


def test_metadata_and_request_fields_are_echoed(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, CHATML, "ok")
    with serving(model) as (client, _url, _app):
        r = client.responses.create(
            model="scripted", input="x", metadata={"k": "v"}, temperature=0.5, top_p=0.9, tools=TOOLS
        )
    assert r.metadata == {"k": "v"} and r.temperature == 0.5 and r.top_p == 0.9
    assert [t.name for t in r.tools] == ["get_weather", "get_time"] and r.model == "scripted"


def test_disconnect_mid_stream_cancels_the_generation(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, THINKING * 20, delay=0.01)
    # cancelled once the grace period after the client left is over
    with serving(model, limits=ServerLimits(resume_grace=0.2)) as (_client, url, app):
        host, port = url.removeprefix("http://").rsplit(":", 1)
        body = json.dumps({"input": "x", "stream": True, "max_output_tokens": 2000}).encode()
        with socket.create_connection((host, int(port))) as sock:
            head = (
                f"POST /v1/responses HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            sock.sendall(head.encode() + body)
            got = b""
            while b"response.reasoning_text.delta" not in got:
                got += sock.recv(4096)
        assert wait_for(lambda: model.active == 0)
        assert model.cancelled == 1 and model.emitted[0] < len(model.completion_ids(""))
        assert wait_for(lambda: app.state.stats.snapshot()["active"] == 0)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("responses") / "tiny", seed=3)


def test_the_real_tiny_model_streamed_equals_not_streamed(tiny_dir: Path) -> None:
    from rxstream.server import create_app, run_in_thread

    model = OnnxModel.load(tiny_dir, provider="cpu")
    app = create_app(model, model_name="tiny")
    with run_in_thread(app) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        request: dict[str, Any] = {
            "model": "tiny",
            "input": "Hello",
            "max_output_tokens": 12,
            "temperature": 0,
        }
        whole = client.responses.create(**request)
        with client.responses.stream(**request) as stream:
            events = list(stream)
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert events[-1].type == "response.incomplete"
        final = events[-1].response
    assert reduced(whole) == reduced(final)
    assert text == whole.output_text and whole.usage is not None
    assert whole.usage.output_tokens == 12 and whole.status == "incomplete"
