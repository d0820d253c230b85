"""``rxstream serve`` with channels: reasoning in ``reasoning_content``, tool calls in OpenAI's
format, stop strings on the answer only. Real sockets, the official ``openai`` client, a scripted
model replaying recorded completions as SmolLM2's real token ids through a real chat template."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import pytest
from tokenizers import Tokenizer

from rxstream.server import ServerLimits, create_app, run_in_thread
from tests.scripted_model import CHATML, DEEPSEEK_R1_TEMPLATE, QWEN3_TEMPLATE, ScriptedModel

USER = [{"role": "user", "content": "What is 2 + 2?"}]

QWEN3_ANSWER = (
    "<think>\nThe user asks 2 + 2. STOP is not the end. Four, surely.\n</think>\n\n"
    "The answer is 4. STOP There is nothing more."
)


@contextmanager
def serving(model: ScriptedModel, **kwargs: Any) -> Iterator[tuple[openai.OpenAI, str, Any]]:
    app = create_app(model, model_name="scripted", **kwargs)
    with run_in_thread(app) as url:
        yield openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0), url, app


def both(client: openai.OpenAI, **request: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same request non-streamed and streamed, each reduced to (content, reasoning, tool calls,
    finish_reason) as a client reassembles them."""
    reply = client.chat.completions.create(model="scripted", **request)
    choice = reply.choices[0]
    whole = {
        "content": choice.message.content,
        "reasoning": getattr(choice.message, "reasoning_content", None),
        "tool_calls": [
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
            for c in choice.message.tool_calls or []
        ],
        "finish_reason": choice.finish_reason,
    }
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish = None
    for chunk in client.chat.completions.create(model="scripted", stream=True, **request):
        if not chunk.choices:
            continue
        c = chunk.choices[0]
        delta = c.delta
        if delta.content:
            content.append(delta.content)
        if getattr(delta, "reasoning_content", None):
            reasoning.append(delta.reasoning_content)  # type: ignore[attr-defined]
        for call in delta.tool_calls or []:
            entry = calls.setdefault(call.index, {"id": None, "name": None, "arguments": ""})
            if call.id:
                entry["id"] = call.id
            if call.function and call.function.name:
                entry["name"] = call.function.name
            if call.function and call.function.arguments:
                entry["arguments"] += call.function.arguments
        finish = c.finish_reason or finish
    streamed = {
        "content": "".join(content) or None,
        "reasoning": "".join(reasoning) or None,
        "tool_calls": [calls[k] for k in sorted(calls)],
        "finish_reason": finish,
    }
    return whole, streamed


def test_reasoning_goes_to_reasoning_content(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_ANSWER)
    with serving(model) as (client, _url, app):
        assert app.state.reasoning_format == "qwen3"  # detected from the template
        whole, streamed = both(client, messages=USER)
    assert whole == streamed
    assert whole["reasoning"] == "\nThe user asks 2 + 2. STOP is not the end. Four, surely.\n"
    assert whole["content"] == "The answer is 4. STOP There is nothing more."  # no "\n\n" framing
    assert whole["finish_reason"] == "stop"


def test_stop_inside_the_reasoning_does_not_cut_the_answer(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_ANSWER)
    total = len(model.completion_ids(""))
    with serving(model) as (client, url, _app):
        whole, streamed = both(client, messages=USER, stop=["STOP"])
        r = httpx.post(f"{url}/v1/chat/completions", json={"messages": USER, "stop": ["STOP"]}).json()
    assert whole == streamed
    assert whole["reasoning"] == "\nThe user asks 2 + 2. STOP is not the end. Four, surely.\n"
    assert whole["content"] == "The answer is 4. "
    assert whole["finish_reason"] == "stop" and r["choices"][0]["stop_reason"] == "STOP"
    # the stop in the answer cancelled the generation: not every id was generated
    assert r["usage"]["completion_tokens"] < total
    assert model.cancelled >= 1


def test_replace_applies_to_the_answer_only(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_ANSWER)
    with serving(model) as (client, _url, _app):
        whole, streamed = both(
            client, messages=USER, extra_body={"rxstream": {"replace": {"STOP": "(stop)"}}}
        )
    assert whole == streamed
    assert "STOP is not the end" in whole["reasoning"]
    assert whole["content"] == "The answer is 4. (stop) There is nothing more."


def test_template_that_opens_think_starts_in_the_reasoning(smollm2_tokenizer: Tokenizer) -> None:
    answer = "Two plus two: 4 </thinking> fine.\n</think>\n\nIt is **4**."
    model = ScriptedModel(smollm2_tokenizer, DEEPSEEK_R1_TEMPLATE, answer)
    with serving(model) as (client, _url, app):
        assert app.state.reasoning_format == "deepseek-r1"
        whole, streamed = both(client, messages=USER)
    assert whole == streamed
    assert whole["reasoning"] == "Two plus two: 4 </thinking> fine.\n"
    assert whole["content"] == "It is **4**."


def test_reasoning_format_none_and_plain_templates_keep_everything_as_content(
    smollm2_tokenizer: Tokenizer,
) -> None:
    for template, fmt in ((QWEN3_TEMPLATE, "none"), (CHATML, "auto")):
        model = ScriptedModel(smollm2_tokenizer, template, QWEN3_ANSWER)
        with serving(model, reasoning_format=fmt) as (client, url, app):
            assert app.state.reasoning_format is None
            whole, streamed = both(client, messages=USER)
            raw = httpx.post(f"{url}/v1/chat/completions", json={"messages": USER}).json()
        assert whole == streamed
        assert whole["content"] == QWEN3_ANSWER and whole["reasoning"] is None
        assert "reasoning_content" not in raw["choices"][0]["message"]


def test_reasoning_format_given_overrides_detection(smollm2_tokenizer: Tokenizer) -> None:
    text = "[THINK]short[/THINK]Done."
    model = ScriptedModel(smollm2_tokenizer, CHATML, text)
    with serving(model, reasoning_format="magistral") as (client, _url, app):  # an alias of mistral
        assert app.state.reasoning_format == "mistral"
        whole, streamed = both(client, messages=USER)
    assert whole == streamed
    assert (whole["reasoning"], whole["content"]) == ("short", "Done.")


def test_bad_reasoning_format_is_a_value_error(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, CHATML, "x")
    with pytest.raises(ValueError, match=r"reasoning_format must be one of auto, none, .*got 'thinking'"):
        create_app(model, reasoning_format="thinking")


def test_reasoning_cut_by_the_budget_leaves_no_content(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_ANSWER)
    with serving(model) as (client, url, _app):
        whole, streamed = both(client, messages=USER, max_tokens=5)
        raw = httpx.post(f"{url}/v1/chat/completions", json={"messages": USER, "max_tokens": 5}).json()
    assert whole == streamed
    assert whole["content"] is None and whole["finish_reason"] == "length"
    assert whole["reasoning"] and "\nThe user asks".startswith(whole["reasoning"])
    assert raw["choices"][0]["message"]["content"] is None


def test_disconnect_mid_reasoning_cancels_the_generation(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_ANSWER * 20, delay=0.01)
    # cancelled once the grace period after the client left is over
    with serving(model, limits=ServerLimits(resume_grace=0.2)) as (_client, url, app):
        host, port = url.removeprefix("http://").rsplit(":", 1)
        body = json.dumps({"messages": USER, "stream": True, "max_tokens": 2000}).encode()
        with socket.create_connection((host, int(port))) as sock:
            head = (
                f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            sock.sendall(head.encode() + body)
            got = b""
            while b"reasoning_content" not in got:
                got += sock.recv(4096)
        assert wait_for(lambda: model.active == 0)
        assert model.cancelled == 1 and model.emitted[0] < len(model.completion_ids(""))
        assert wait_for(lambda: app.state.stats.snapshot()["active"] == 0)
        assert httpx.get(f"{url}/health").json()["status"] == "ok"


def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()
