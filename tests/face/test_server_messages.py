"""``POST /v1/messages`` (the Anthropic Messages API) in ``rxstream serve``: real sockets, the
official ``anthropic`` SDK; the streamed message (``messages.stream`` + ``get_final_message``)
equals the non-streamed one for plain, reasoning and tool-calling outputs; 400s in Anthropic's
shape; a client that leaves cancels the generation. A scripted model replays recorded completions
as SmolLM2's real token ids through a real chat template; the tiny ONNX model answers plain text."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from tokenizers import Tokenizer

from rxstream.backends import OnnxModel, build_tiny_model
from rxstream.server import ServerLimits, create_app, run_in_thread
from tests.face.test_server_channels import QWEN3_ANSWER, wait_for
from tests.face.test_server_tool_calls import QWEN3_CALLS, WEATHER_ARGS
from tests.scripted_model import CHATML, QWEN3_TEMPLATE, ScriptedModel

anthropic = pytest.importorskip("anthropic")

USER = [{"role": "user", "content": "What is 2 + 2?"}]
TOOLS = [
    {
        "name": "get_weather",
        "description": "The weather of a city for some days",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
    {"name": "get_time", "input_schema": {"type": "object", "properties": {}}},
]
TOOL_ID = re.compile(r"toolu_[0-9a-f]{24}")


@contextmanager
def serving(model: Any, name: str = "scripted", **kwargs: Any) -> Iterator[tuple[Any, str, Any]]:
    app = create_app(model, model_name=name, **kwargs)
    with run_in_thread(app) as url:
        yield anthropic.Anthropic(base_url=url, api_key="x", max_retries=0), url, app


def shape(message: Any) -> dict[str, Any]:
    """What a client reads of a message (tool ids checked apart: each message makes new ones)."""
    blocks: list[Any] = []
    for b in message.content:
        if b.type == "text":
            blocks.append(("text", b.text))
        elif b.type == "thinking":
            blocks.append(("thinking", b.thinking))
        else:
            assert b.type == "tool_use" and TOOL_ID.fullmatch(b.id), b
            blocks.append(("tool_use", b.name, b.input))
    assert message.id.startswith("msg_") and message.role == "assistant" and message.type == "message"
    return {
        "content": blocks,
        "stop_reason": message.stop_reason,
        "stop_sequence": message.stop_sequence,
        "usage": (message.usage.input_tokens, message.usage.output_tokens),
    }


def both(client: Any, model: str = "scripted", **request: Any) -> dict[str, Any]:
    """The request non-streamed and streamed (the SDK's stream helper): the same message."""
    request.setdefault("max_tokens", 1000)
    request.setdefault("messages", USER)
    whole = client.messages.create(model=model, **request)
    with client.messages.stream(model=model, **request) as stream:
        final = stream.get_final_message()
    assert shape(whole) == shape(final)
    ids = [b.id for b in whole.content if b.type == "tool_use"]
    assert len(set(ids)) == len(ids) and not set(ids) & {b.id for b in final.content if b.type == "tool_use"}
    return shape(whole)


def test_plain_text_and_stop_sequences(smollm2_tokenizer: Tokenizer) -> None:
    text = "The answer is 4. STOP There is nothing more."
    model = ScriptedModel(smollm2_tokenizer, CHATML, text)
    total = len(model.completion_ids(""))
    with serving(model) as (client, _url, _app):
        plain = both(client, system=[{"type": "text", "text": "Be brief."}])
        stopped = both(
            client,
            stop_sequences=["STOP"],
            metadata={"user_id": "u1"},
            extra_body={"temperature": 0.5, "top_p": 0.9, "top_k": 5},
        )
        cut = both(client, max_tokens=3)
    assert plain["content"] == [("text", text)] and plain["stop_reason"] == "end_turn"
    assert plain["usage"][1] == total and plain["usage"][0] > 0
    assert "Be brief." in model.prompts[0]
    assert stopped["content"] == [("text", "The answer is 4. ")]
    assert (stopped["stop_reason"], stopped["stop_sequence"]) == ("stop_sequence", "STOP")
    assert stopped["usage"][1] < total
    assert cut["stop_reason"] == "max_tokens" and cut["usage"][1] == 3


def test_thinking_blocks_when_enabled_and_dropped_when_not(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_ANSWER)
    with serving(model) as (client, _url, _app):
        on = both(client, thinking={"type": "enabled", "budget_tokens": 500}, stop_sequences=["STOP"])
        off = both(client, extra_body={"rxstream": {"replace": {"STOP": "(stop)"}}})
    assert on["content"] == [
        ("thinking", "\nThe user asks 2 + 2. STOP is not the end. Four, surely.\n"),
        ("text", "The answer is 4. "),
    ]
    assert on["stop_sequence"] == "STOP"
    assert off["content"] == [("text", "The answer is 4. (stop) There is nothing more.")]
    assert off["stop_reason"] == "end_turn"


def test_tool_use_blocks_streamed_and_not(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_CALLS)
    with serving(model) as (client, url, _app):
        calls = both(client, tools=TOOLS, thinking={"type": "enabled", "budget_tokens": 100})
        single = both(client, tools=TOOLS, tool_choice={"type": "auto", "disable_parallel_tool_use": True})
        body = {"model": "scripted", "max_tokens": 500, "messages": USER, "tools": TOOLS, "stream": True}
        with httpx.stream("POST", f"{url}/v1/messages", json=body) as r:
            lines = list(r.iter_lines())
    assert calls["content"] == [
        ("thinking", "\nTwo tools: weather, then time. A stop word: Paris.\n"),
        ("text", "Let me check both.\n"),
        ("tool_use", "get_weather", {"city": "Zürich", "days": 3}),
        ("tool_use", "get_time", {}),
    ]
    assert calls["stop_reason"] == "tool_use"
    assert single["content"] == [
        ("text", "Let me check both.\n"),
        ("tool_use", "get_weather", {"city": "Zürich", "days": 3}),
    ]
    # named events; the input_json deltas of a call join to exactly its arguments
    names = [line[7:] for line in lines if line.startswith("event: ")]
    events = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    assert names == [e["type"] for e in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    starts = {e["index"]: e["content_block"] for e in events if e["type"] == "content_block_start"}
    weather = next(i for i, b in starts.items() if b.get("name") == "get_weather")
    parts = [
        e["delta"]["partial_json"]
        for e in events
        if e["type"] == "content_block_delta" and e["index"] == weather
    ]
    # decoding did not constrain the call: it is held until valid, then sent in one delta
    assert parts == [WEATHER_ARGS]
    assert '<tools>\n{"function": {"description": "The weather' in model.prompts[0]


def test_forced_tool_choice_and_a_conversation_with_tool_results(smollm2_tokenizer: Tokenizer) -> None:
    # a forced call is opened in the prompt: the model writes the arguments on
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, '{"city": "Bern"}}\n</tool_call>')
    with serving(model) as (client, _url, _app):
        named = both(client, tools=TOOLS, tool_choice={"type": "tool", "name": "get_weather"})
        model.script = lambda _prompt: "It is sunny in Zürich."
        history = [
            USER[0],
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "SECRET THOUGHT", "signature": ""},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Zürich"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "SUNNY"}],
                    },
                    {"type": "text", "text": "And now?"},
                ],
            },
        ]
        answer = both(client, tools=TOOLS, messages=history, tool_choice={"type": "none"})
    assert named["content"] == [("tool_use", "get_weather", {"city": "Bern"})]
    assert named["stop_reason"] == "tool_use"
    assert answer["content"] == [("text", "It is sunny in Zürich.")]
    prompt = model.prompts[-1]
    assert "SUNNY" in prompt and "And now?" in prompt and '"arguments": {"city": ' in prompt
    assert "SECRET THOUGHT" not in prompt  # thinking blocks of earlier turns are dropped


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"foo": 1}, "foo"),
        ({"max_tokens": None}, "max_tokens"),
        ({"service_tier": "auto"}, "service_tier"),
        ({"thinking": {"type": "enabled", "budget_tokens": 5000}}, "thinking.budget_tokens"),
        ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, "image"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "extra": 1}]}]}, "extra"),
        ({"tools": [{"name": "f", "input_schema": {"type": "object"}, "strict": True}]}, "strict"),
        ({"tool_choice": {"type": "required"}}, "tool_choice.type"),
        ({"stop_sequences": "STOP"}, "stop_sequences"),
        ({"rxstream": {"stop_regex": ["("]}}, "rxstream"),
    ],
)
def test_bad_requests_are_400s_in_anthropics_shape(
    smollm2_tokenizer: Tokenizer, body: dict[str, Any], param: str
) -> None:
    model = ScriptedModel(smollm2_tokenizer, CHATML, "Hi")
    with serving(model) as (client, url, _app):
        full = {"model": "scripted", "max_tokens": 1000, "messages": USER, **body}
        r = httpx.post(f"{url}/v1/messages", json=full, headers={"anthropic-version": "2023-06-01"})
        assert r.status_code == 400
        error = r.json()
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
        assert param in error["error"]["message"]
        if "foo" in body:
            with pytest.raises(anthropic.BadRequestError, match="foo"):
                client.messages.create(model="scripted", max_tokens=10, messages=USER, extra_body=body)
        base = {"model": "claude-x", "max_tokens": 1000, "messages": USER}
        other = httpx.post(f"{url}/v1/messages", json=base)
        assert other.status_code == 404 and other.json()["error"]["type"] == "not_found_error"
    assert not model.prompts


def test_a_client_that_leaves_mid_stream_cancels_the_generation(smollm2_tokenizer: Tokenizer) -> None:
    text = " ".join(f"word{i}" for i in range(300))
    model = ScriptedModel(smollm2_tokenizer, CHATML, text, delay=0.005)
    # cancelled once the grace period after the client left is over
    with serving(model, limits=ServerLimits(resume_grace=0.2)) as (client, url, app):
        host, port = url.removeprefix("http://").rsplit(":", 1)
        body = json.dumps(
            {"model": "scripted", "max_tokens": 2000, "messages": USER, "stream": True}
        ).encode()
        for _ in range(2):
            with socket.create_connection((host, int(port))) as sock:
                head = (
                    f"POST /v1/messages HTTP/1.1\r\nHost: {host}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                )
                sock.sendall(head.encode() + body)
                got = b""
                while got.count(b"text_delta") < 3:
                    got += sock.recv(4096)
        assert wait_for(lambda: model.active == 0)
        assert model.cancelled == 2
        assert all(n < len(model.completion_ids("")) for n in model.emitted)
        assert wait_for(lambda: app.state.stats.snapshot()["active"] == 0)
        model.delay = 0.0
        assert both(client, max_tokens=5)["stop_reason"] == "max_tokens"  # it goes on serving


def test_the_tiny_onnx_model_answers_plain_text(tmp_path: Path) -> None:
    directory = build_tiny_model(tmp_path / "tiny", seed=5)
    model = OnnxModel.load(directory, provider="cpu")
    with serving(model, name="tiny") as (client, _url, _app):
        message = both(client, model="tiny", max_tokens=12, extra_body={"temperature": 0})
    assert [kind for kind, *_ in message["content"]] in (["text"], [])
    assert message["stop_reason"] in ("max_tokens", "end_turn")
    assert message["usage"][1] <= 12


class FailingModel(ScriptedModel):
    """Fails after its first three ids."""

    def generate(
        self, prompt_ids: Any, params: Any = None, *, on_finish: Any = None, scheduler: Any = None
    ) -> Any:
        import reactivex
        from reactivex import operators as ops

        ids = super().generate(prompt_ids, params, on_finish=on_finish, scheduler=scheduler)
        return reactivex.concat(ids.pipe(ops.take(3)), reactivex.throw(RuntimeError("the model failed")))


def test_a_failure_mid_stream_is_an_error_event(smollm2_tokenizer: Tokenizer) -> None:
    model = FailingModel(smollm2_tokenizer, CHATML, "one two three four five six")
    with serving(model) as (client, url, _app):
        body = {"model": "scripted", "max_tokens": 100, "messages": USER, "stream": True}
        with httpx.stream("POST", f"{url}/v1/messages", json=body) as r:
            lines = list(r.iter_lines())
        names = [line[7:] for line in lines if line.startswith("event: ")]
        assert names[0] == "message_start" and names[-1] == "error" and "message_stop" not in names
        error = json.loads([line for line in lines if line.startswith("data: ")][-1][6:])
        assert error["type"] == "error" and error["error"]["type"] == "api_error"
        assert "the model failed" in error["error"]["message"]
        with pytest.raises(anthropic.APIStatusError, match="the model failed"):
            with client.messages.stream(model="scripted", max_tokens=100, messages=USER) as stream:
                stream.get_final_message()
        whole = httpx.post(f"{url}/v1/messages", json={**body, "stream": False})
        assert whole.status_code == 500 and whole.json()["error"]["type"] == "api_error"
