"""``rxstream serve --upstream URL --upstream-mode text``: the gateway in front of an engine that
gives text only. The engine is a real ``rxstream serve`` (the tiny ONNX model on a socket) asked
for no ids; the clients are the official ``openai`` SDK. The gateway's answers are the engine's,
with the request's stop and replace rules applied in the gateway."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from rxstream.backends import GatewayModel, OnnxModel
from rxstream.server import create_app, run_in_thread

CHAT = [{"role": "user", "content": "Tell me a story about a cat"}]


@pytest.fixture(scope="module")
def engine(model: OnnxModel) -> Iterator[tuple[str, Any]]:
    app = create_app(model, model_name="tiny")
    with run_in_thread(app) as url:
        yield url, app


@pytest.fixture(scope="module")
def gateway(engine: tuple[str, Any], tiny_dir: Path) -> Iterator[str]:
    model = GatewayModel(engine[0], tiny_dir, mode="text", health_interval=None)
    with run_in_thread(create_app(model, model_name="gw")) as url:
        yield url
    model.close()


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)


def streamed_chat(url: str, **kw: Any) -> tuple[str, str | None, Any]:
    chunks = list(
        client(url).chat.completions.create(
            model=kw.pop("model"), messages=CHAT, stream=True, stream_options={"include_usage": True}, **kw
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reasons = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    usage = [c.usage for c in chunks if c.usage is not None]
    return text, reasons[-1] if reasons else None, usage[-1] if usage else None


def test_chat_through_a_text_gateway_is_the_engines_chat(engine: tuple[str, Any], gateway: str) -> None:
    direct = streamed_chat(engine[0], model="tiny", max_tokens=24, temperature=0)
    started = engine[1].state.stats.snapshot()["started"]
    through = streamed_chat(gateway, model="gw", max_tokens=24, temperature=0)
    assert engine[1].state.stats.snapshot()["started"] == started + 1  # one request upstream
    assert through[0] == direct[0] and direct[0]
    assert through[1] == direct[1]
    assert through[2].completion_tokens == direct[2].completion_tokens  # the engine's own count
    one = client(gateway).chat.completions.create(model="gw", messages=CHAT, max_tokens=24, temperature=0)
    assert one.choices[0].message.content == direct[0]


def test_completions_through_a_text_gateway(engine: tuple[str, Any], gateway: str) -> None:
    direct = client(engine[0]).completions.create(
        model="tiny", prompt="Once upon", max_tokens=16, temperature=0
    )
    through = client(gateway).completions.create(model="gw", prompt="Once upon", max_tokens=16, temperature=0)
    assert through.choices[0].text == direct.choices[0].text
    assert through.choices[0].finish_reason == direct.choices[0].finish_reason


def test_stop_and_replace_run_in_the_gateway(engine: tuple[str, Any], gateway: str) -> None:
    direct = streamed_chat(engine[0], model="tiny", max_tokens=40, temperature=0)[0]
    assert len(direct) > 12
    cut = direct[6:9]
    expected = streamed_chat(engine[0], model="tiny", max_tokens=400, temperature=0, stop=[cut])
    before = engine[1].state.stats.snapshot()["finished"].get("cancelled", 0)
    # a long budget: the engine is still generating when the gateway cuts (with 40 tokens the
    # tiny model could finish first on a busy machine, and nothing would be left to cancel)
    text, reason, usage = streamed_chat(gateway, model="gw", max_tokens=400, temperature=0, stop=[cut])
    assert (text, reason) == (expected[0], "stop") and cut not in text
    assert usage.completion_tokens > 0  # counted here: the engine's usage never came
    # the gateway sent no stop upstream: it cut the stream itself, which cancelled the engine's
    deadline = time.monotonic() + 5
    while engine[1].state.stats.snapshot()["finished"].get("cancelled", 0) == before:
        assert time.monotonic() < deadline, "the engine's generation was not cancelled"
        time.sleep(0.01)
    old = direct[2]
    replaced = streamed_chat(
        gateway, model="gw", max_tokens=40, temperature=0, extra_body={"rxstream": {"replace": {old: "<X>"}}}
    )[0]
    assert replaced == direct.replace(old, "<X>")


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": CHAT, "logprobs": True, "top_logprobs": 2}, "logprobs"),
        (
            {"messages": CHAT, "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
            "tools",
        ),
        ({"prompt": [1, 2, 3]}, "prompt"),
        ({"prompt": "hi", "return_token_ids": True}, "return_token_ids"),
    ],
)
def test_what_needs_ids_is_a_clear_400(gateway: str, body: dict[str, Any], param: str) -> None:
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    r = httpx.post(gateway + path, json={**body, "max_tokens": 4}, timeout=10)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["param"] == param and "--upstream-mode ids" in error["message"]
    assert "\n" not in error["message"]


def test_the_responses_api_through_a_text_gateway(engine: tuple[str, Any], gateway: str) -> None:
    direct = streamed_chat(engine[0], model="tiny", max_tokens=24, temperature=0)[0]
    stream = client(gateway).responses.create(
        model="gw", input=CHAT, max_output_tokens=24, temperature=0, stream=True
    )
    text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
    assert text == direct


def test_a_client_that_leaves_cancels_the_engines_generation(engine: tuple[str, Any], gateway: str) -> None:
    stats = engine[1].state.stats
    before = stats.snapshot()["finished"].get("cancelled", 0)
    with (
        httpx.Client(timeout=10) as http,
        http.stream(
            "POST", f"{gateway}/v1/completions", json={"prompt": "go", "max_tokens": 300, "stream": True}
        ) as r,
    ):
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                break
    deadline = time.monotonic() + 10
    while stats.snapshot()["finished"].get("cancelled", 0) == before and stats.snapshot()["active"]:
        assert time.monotonic() < deadline, "the engine kept generating for a client that left"
        time.sleep(0.01)
    assert stats.snapshot()["active"] == 0


def test_a_text_gateway_routes_nothing_and_says_so(tiny_dir: Path, engine: tuple[str, Any]) -> None:
    model = GatewayModel(engine[0], tiny_dir, mode="text", health_interval=None)
    with pytest.raises(ValueError, match="text mode"):
        create_app(model, reasoning_format="qwen3")
    assert create_app(model, reasoning_format="auto").state.reasoning_format is None
    model.close()


def test_the_faces_name_the_mode(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "rxstream"]
    chat = subprocess.run(
        [*cmd, "chat", "--upstream", "http://127.0.0.1:9", "--upstream-mode", "text", "hi"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert chat.returncode == 2 and "rxstream serve --upstream URL --upstream-mode text" in chat.stderr
    assert len(chat.stderr.strip().splitlines()) == 1
    serve = subprocess.run(
        [*cmd, "serve", "--port", "0", "--upstream-mode", "text"], capture_output=True, text=True, timeout=60
    )
    assert serve.returncode != 0 and "--upstream-mode text is for --upstream engines" in serve.stderr
    assert "Traceback" not in serve.stderr


def test_the_messages_api_through_a_text_gateway(engine: tuple[str, Any], gateway: str) -> None:
    import anthropic

    direct = streamed_chat(engine[0], model="tiny", max_tokens=24, temperature=0)[0]
    messages = anthropic.Anthropic(base_url=gateway, api_key="x", max_retries=0)
    request: Any = {"model": "gw", "max_tokens": 24, "messages": CHAT, "extra_body": {"temperature": 0}}
    with messages.messages.stream(**request) as stream:
        text = "".join(stream.text_stream)
    assert text == direct
