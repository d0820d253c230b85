"""End-to-end tests of ``rxstream serve``: uvicorn on a real socket, the tiny ONNX model, real clients."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import reactivex
from reactivex import operators as ops

from rxstream import Finish, FinishReason, FinishRecorder
from rxstream.backends import OnnxModel, build_tiny_model
from rxstream.backends.openai import OpenAIBackend
from rxstream.operators import detokenize, replace, stop
from rxstream.server import ServerLimits, create_app, run_in_thread

MAX_CONCURRENCY = 3


@pytest.fixture(scope="module")
def server(model: OnnxModel) -> Iterator[tuple[str, Any]]:
    app = create_app(model, model_name="tiny", limits=ServerLimits(max_concurrency=MAX_CONCURRENCY))
    with run_in_thread(app) as url:
        yield url, app


class SlowModel:
    """The tiny model with a pause after each token (on the worker thread), optionally failing.

    EOS is ignored so a generation runs until its budget or until it is cancelled.
    """

    def __init__(self, inner: OnnxModel, delay: float, fail_after: int | None = None) -> None:
        self.inner = inner
        self.delay = delay
        self.fail_after = fail_after

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def generate(self, prompt_ids: list[int], **kw: Any) -> reactivex.Observable[int]:
        count = 0

        def pause(_token: int) -> None:
            nonlocal count
            count += 1
            if self.fail_after is not None and count > self.fail_after:
                raise RuntimeError("the accelerator caught fire")
            time.sleep(self.delay)

        return self.inner.generate(prompt_ids, ignore_eos=True, **kw).pipe(ops.do_action(on_next=pause))


SAMPLING: dict[str, Any] = {"temperature": 1.0, "seed": 1234}
"""Seeded sampling: deterministic, and more varied text from the random model than greedy decoding."""


def generated_ids(model: OnnxModel, prompt_ids: list[int], max_tokens: int) -> tuple[list[int], Finish]:
    """What the model generates for ``prompt_ids`` with :data:`SAMPLING`, and why it ended."""
    rec = FinishRecorder()
    obs = model.generate(prompt_ids, max_new_tokens=max_tokens, on_finish=rec, **SAMPLING)
    ids: list[int] = obs.pipe(ops.to_list()).run()
    assert rec.finish is not None
    return ids, rec.finish


def operator_text(
    model: OnnxModel, prompt_ids: list[int], ids: list[int], pipeline: list[Callable[..., Any]]
) -> str:
    """The text the operators make of ``ids`` (the expected answer)."""
    source = reactivex.from_iterable(ids).pipe(detokenize(model.tokenizer, prompt_ids=prompt_ids), *pipeline)
    return "".join(source.pipe(ops.to_list()).run())


def pick_substring(text: str, start: int, length: int) -> str:
    """A substring of ``text`` without U+FFFD, near ``start`` (to use as a stop string or pattern)."""
    for i in range(start, len(text) - length):
        candidate = text[i : i + length]
        if "\ufffd" not in candidate and candidate.strip():
            return candidate
    pytest.fail("the (seeded, deterministic) tiny model produced no usable substring; pick another prompt")


def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


# ------------------------------------------------------------------------------------------------


def test_models_health_and_page(server: tuple[str, Any]) -> None:
    url, _app = server
    assert httpx.get(f"{url}/health").json()["status"] == "ok"
    models = httpx.get(f"{url}/v1/models").json()
    assert [m["id"] for m in models["data"]] == ["tiny"]
    page = httpx.get(f"{url}/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert (
        "/v1/chat/completions" in page.text
        and "<script" in page.text
        and "http" not in page.text.split("<script")[0].replace("http-equiv", "")
    )
    for icon in ("/favicon.ico", "/favicon.svg"):
        r = httpx.get(f"{url}{icon}")
        assert r.status_code == 200 and r.headers["content-type"] == "image/svg+xml" and b"<svg" in r.content


def test_completion_stream_with_stop_matches_operators(server: tuple[str, Any], model: OnnxModel) -> None:
    url, _app = server
    prompt = "Once upon a time"
    prompt_ids = model.encode(prompt)
    ids, _finish = generated_ids(model, prompt_ids, 60)
    full = operator_text(model, prompt_ids, ids, [])
    stop_string = pick_substring(full, len(full) // 2, 2)
    expected = operator_text(model, prompt_ids, ids, [stop([stop_string])])
    assert expected == full[: full.find(stop_string)]

    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
    chunks = list(
        client.completions.create(
            model="tiny", prompt=prompt, max_tokens=60, **SAMPLING, stop=[stop_string], stream=True
        )
    )
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == expected
    last = [c for c in chunks if c.choices and c.choices[0].finish_reason][-1].choices[0]
    assert last.finish_reason == "stop"
    assert (last.model_extra or {}).get("stop_reason") == stop_string


def test_completion_without_stop_reports_length_or_eos(server: tuple[str, Any], model: OnnxModel) -> None:
    url, _app = server
    prompt = "The weather"
    prompt_ids = model.encode(prompt)
    ids, finish = generated_ids(model, prompt_ids, 25)
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
    result = client.completions.create(model="tiny", prompt=prompt, max_tokens=25, **SAMPLING)
    assert result.choices[0].text == operator_text(model, prompt_ids, ids, [])
    assert result.choices[0].finish_reason == ("length" if finish.reason is FinishReason.LENGTH else "stop")
    assert result.usage is not None and result.usage.completion_tokens == len(ids)
    assert result.usage.prompt_tokens == len(prompt_ids)


def test_chat_stream_with_replace_extension(server: tuple[str, Any], model: OnnxModel) -> None:
    url, _app = server
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me a story"}]
    prompt_ids = model.encode_chat(messages)
    ids, _finish = generated_ids(model, prompt_ids, 50)
    full = operator_text(model, prompt_ids, ids, [])
    pattern = pick_substring(full, 3, 2)
    rules = {pattern: "<R>"}
    expected = operator_text(model, prompt_ids, ids, [replace(rules)])
    assert "<R>" in expected

    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
    stream = client.chat.completions.create(
        model="tiny",
        messages=messages,  # type: ignore[arg-type]
        max_tokens=50,
        **SAMPLING,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"rxstream": {"replace": rules}},
    )
    chunks = list(stream)
    text = "".join((c.choices[0].delta.content or "") for c in chunks if c.choices)
    assert text == expected
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == len(ids)

    # the same answer without streaming
    result = client.chat.completions.create(
        model="tiny",
        messages=messages,  # type: ignore[arg-type]
        max_tokens=50,
        **SAMPLING,
        extra_body={"rxstream": {"replace": rules}},
    )
    assert result.choices[0].message.content == expected


def test_rxstream_backend_against_server(server: tuple[str, Any], model: OnnxModel) -> None:
    url, _app = server
    messages = [{"role": "user", "content": "What is up?"}]
    prompt_ids = model.encode_chat(messages)
    ids, _finish = generated_ids(model, prompt_ids, 40)
    full = operator_text(model, prompt_ids, ids, [])
    stop_string = pick_substring(full, len(full) // 3, 2)
    expected = operator_text(model, prompt_ids, ids, [stop([stop_string])])

    rec = FinishRecorder()
    with OpenAIBackend(f"{url}/v1", model="tiny") as backend:
        obs = backend.chat(messages, on_finish=rec, max_tokens=40, **SAMPLING, stop=[stop_string])
        text = "".join(obs.pipe(ops.to_list()).run())
        assert text == expected
        assert rec.finish == Finish(FinishReason.STOP, stop=stop_string)

        # client-side operators on the remote stream give the same text as server-side stop
        obs2 = backend.chat(messages, max_tokens=40, **SAMPLING).pipe(stop([stop_string]))
        assert "".join(obs2.pipe(ops.to_list()).run()) == expected


def test_eight_concurrent_streaming_clients(server: tuple[str, Any], model: OnnxModel) -> None:
    url, app = server
    prompts = [f"Question number {i}: why?" for i in range(8)]
    expected = []
    for p in prompts:
        pids = model.encode(p)
        expected.append(operator_text(model, pids, generated_ids(model, pids, 40)[0], []))
    before = app.state.stats.snapshot()["started"]

    async def one(client: openai.AsyncOpenAI, prompt: str) -> str:
        stream = await client.completions.create(
            model="tiny", prompt=prompt, max_tokens=40, **SAMPLING, stream=True
        )
        return "".join([c.choices[0].text async for c in stream if c.choices])

    async def main() -> list[str]:
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
            return await asyncio.gather(*(one(client, p) for p in prompts))

    texts = asyncio.run(asyncio.wait_for(main(), 60))
    assert texts == expected
    snap = app.state.stats.snapshot()
    assert snap["started"] - before == 8
    assert 1 <= snap["peak_active"] <= MAX_CONCURRENCY
    assert wait_for(lambda: app.state.stats.snapshot()["active"] == 0)


@pytest.fixture
def slow_server(model: OnnxModel) -> Iterator[tuple[str, Any]]:
    # no grace period: a client that leaves ends its generation at once (see test_server_resume.py)
    limits = ServerLimits(max_concurrency=1, resume_grace=0)
    app = create_app(SlowModel(model, 0.02), model_name="slow", limits=limits)
    with run_in_thread(app) as url:
        yield url, app


def test_disconnect_mid_stream_cancels_generation(slow_server: tuple[str, Any], model: OnnxModel) -> None:
    url, app = slow_server
    body = {"prompt": "Go on and on", "max_tokens": 400, "temperature": 0, "stream": True}
    received = 0
    with httpx.Client(timeout=10) as client, client.stream("POST", f"{url}/v1/completions", json=body) as r:
        assert r.status_code == 200
        lines = r.iter_lines()  # keep the iterator: dropping it closes the connection
        for line in lines:
            if line.startswith("data: "):
                received += 1
            if received >= 3:
                break
        assert model.active_generations == 1
    # the response is closed: the server must notice, dispose, and the model loop must end
    assert wait_for(lambda: model.active_generations == 0), "the generation kept running"
    assert wait_for(lambda: app.state.stats.snapshot()["finished"].get("cancelled") == 1)
    snap = app.state.stats.snapshot()
    assert snap["active"] == 0 and snap["generated_tokens"] < 100


def test_non_streaming_disconnect_cancels_generation(slow_server: tuple[str, Any], model: OnnxModel) -> None:
    url, app = slow_server
    body = {"prompt": "Go on", "max_tokens": 400, "temperature": 0}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{url}/v1/completions", json=body, timeout=httpx.Timeout(5.0, read=0.3))
    assert wait_for(lambda: model.active_generations == 0), "the generation kept running"
    assert wait_for(lambda: app.state.stats.snapshot()["finished"].get("cancelled") == 1)


def test_no_thread_outlives_the_server(model: OnnxModel) -> None:
    before = set(threading.enumerate())
    app = create_app(SlowModel(model, 0.001), model_name="t", limits=ServerLimits(max_concurrency=2))
    with run_in_thread(app) as url:
        for i in range(3):
            body = {"prompt": f"p{i}", "max_tokens": 5, "stream": i % 2 == 0}
            assert httpx.post(f"{url}/v1/completions", json=body).status_code == 200
    assert wait_for(lambda: set(threading.enumerate()) <= before), set(threading.enumerate()) - before


def test_disconnect_while_queued_never_starts(slow_server: tuple[str, Any], model: OnnxModel) -> None:
    url, app = slow_server  # one generation slot
    first_done = threading.Event()
    first_text: list[str] = []

    def first() -> None:
        body = {"prompt": "first", "max_tokens": 15, "temperature": 0}
        first_text.append(
            httpx.post(f"{url}/v1/completions", json=body, timeout=20).json()["choices"][0]["text"]
        )
        first_done.set()

    t = threading.Thread(target=first)
    t.start()
    assert wait_for(lambda: app.state.stats.snapshot()["active"] == 1)
    body = {"prompt": "second", "max_tokens": 15, "temperature": 0, "stream": True}
    with httpx.Client(timeout=10) as client, client.stream("POST", f"{url}/v1/completions", json=body) as r:
        assert r.status_code == 200
        assert wait_for(lambda: app.state.stats.snapshot()["waiting"] == 1)
    assert wait_for(lambda: app.state.stats.snapshot()["waiting"] == 0)
    assert first_done.wait(20)
    t.join(5)
    time.sleep(0.1)
    snap = app.state.stats.snapshot()
    assert snap["started"] == 1, "the abandoned request still started a generation"
    assert first_text and first_text[0]


def test_full_queue_answers_503(model: OnnxModel) -> None:
    limits = ServerLimits(max_concurrency=1, max_queued=0)
    app = create_app(SlowModel(model, 0.02), model_name="busy", limits=limits)
    with run_in_thread(app) as url, httpx.Client(timeout=10) as client:
        body = {"prompt": "first", "max_tokens": 200, "stream": True}
        with client.stream("POST", f"{url}/v1/completions", json=body) as first:
            assert first.status_code == 200
            lines = first.iter_lines()  # keep the iterator: dropping it closes the connection
            next(lines)
            busy = client.post(f"{url}/v1/completions", json={"prompt": "second", "max_tokens": 5})
            assert busy.status_code == 503 and busy.json()["error"]["type"] == "server_busy"
        assert wait_for(lambda: model.active_generations == 0)
        ok = client.post(f"{url}/v1/completions", json={"prompt": "third", "max_tokens": 5})
        assert ok.status_code == 200


def test_rxstream_backend_dispose_cancels_server_generation(
    slow_server: tuple[str, Any], model: OnnxModel
) -> None:
    url, app = slow_server
    got = threading.Event()
    items: list[str] = []

    def on_next(x: str) -> None:
        items.append(x)
        if len(items) >= 2:
            got.set()

    with OpenAIBackend(f"{url}/v1") as backend:
        sub = backend.completions("Keep talking", max_tokens=400, **SAMPLING).subscribe(on_next)
        assert got.wait(10)
        sub.dispose()
        assert wait_for(lambda: model.active_generations == 0), "the server kept generating"
        assert wait_for(lambda: app.state.stats.snapshot()["finished"].get("cancelled") == 1)


def test_generation_error_becomes_error_event(model: OnnxModel) -> None:
    app = create_app(SlowModel(model, 0.0, fail_after=3), model_name="broken")
    with run_in_thread(app) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.APIError, match="caught fire"):
            for _chunk in client.completions.create(model="broken", prompt="x", max_tokens=20, stream=True):
                pass
        r = httpx.post(f"{url}/v1/completions", json={"prompt": "x", "max_tokens": 20})
        assert r.status_code == 500 and "caught fire" in r.json()["error"]["message"]
        assert app.state.stats.snapshot()["finished"].get("error") == 2


BAD_REQUESTS: list[tuple[str, Any, str | None]] = [
    ("completions", "not json", None),
    ("completions", [1, 2], None),
    ("completions", {}, "prompt"),
    ("completions", {"prompt": 5}, "prompt"),
    ("completions", {"prompt": []}, "prompt"),
    ("completions", {"prompt": ["a", "b"]}, "prompt"),
    ("completions", {"prompt": [1, 99999]}, "prompt"),
    ("completions", {"prompt": "x" * 200_000}, "prompt"),
    ("completions", {"prompt": "hi", "max_tokens": 0}, "max_tokens"),
    ("completions", {"prompt": "hi", "max_tokens": 10**6}, "max_tokens"),
    ("completions", {"prompt": "hi", "max_tokens": "12"}, "max_tokens"),
    ("completions", {"prompt": "hi", "max_tokens": 600}, "max_tokens"),  # beyond the tiny model's context
    ("completions", {"prompt": "hi", "stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ("completions", {"prompt": "hi", "stop": "x" * 500}, "stop"),
    ("completions", {"prompt": "hi", "stop": [""]}, "stop"),
    ("completions", {"prompt": "hi", "stop": 3}, "stop"),
    ("completions", {"prompt": "hi", "temperature": 3}, "temperature"),
    ("completions", {"prompt": "hi", "temperature": "hot"}, "temperature"),
    ("completions", {"prompt": "hi", "top_p": 0}, "top_p"),
    ("completions", {"prompt": "hi", "n": 9}, "n"),  # above ServerLimits.max_n
    ("completions", {"prompt": "hi", "n": 0}, "n"),
    ("completions", {"prompt": "hi", "stream": "yes"}, "stream"),
    ("completions", {"prompt": "hi", "logprobs": 21}, "logprobs"),
    ("completions", {"prompt": "hi", "logprobs": True}, "logprobs"),
    ("completions", {"prompt": "hi", "logprobs": -1}, "logprobs"),
    ("completions", {"prompt": "hi", "top_logprobs": 2}, "top_logprobs"),  # chat's field
    ("chat/completions", {"messages": [{"role": "user", "content": "x"}], "logprobs": 2}, "logprobs"),
    ("chat/completions", {"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}, "top_logprobs"),
    (
        "chat/completions",
        {"messages": [{"role": "user", "content": "x"}], "logprobs": True, "top_logprobs": 21},
        "top_logprobs",
    ),
    ("completions", {"prompt": "hi", "seed": -1}, "seed"),
    ("completions", {"prompt": "hi", "rxstream": {"replace": {"": "x"}}}, "rxstream.replace"),
    ("completions", {"prompt": "hi", "rxstream": {"replace": [["a"]]}}, "rxstream.replace"),
    ("completions", {"prompt": "hi", "rxstream": {"bogus": 1}}, "rxstream"),
    ("completions", "[" * 100_000 + "]" * 100_000, None),  # nested too deeply for json
    ("completions", b'{"prompt": "\xff\xfe"}', None),  # not UTF-8
    ("completions", {"prompt": "hi " * 600}, "prompt"),  # longer than the context by itself
    ("chat/completions", {"messages": []}, "messages"),
    ("chat/completions", {"messages": "hello"}, "messages"),
    ("chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ("chat/completions", {"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    (
        "chat/completions",
        {"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": -3},
        "max_completion_tokens",
    ),
    # text that JSON can spell but UTF-8 cannot (lone surrogates), in every kind of string field
    ("completions", {"prompt": "a\ud800b"}, "prompt"),
    ("completions", {"prompt": ["\udfff"]}, "prompt[0]"),
    ("completions", {"prompt": "hi", "stop": ["ok", "\ud800"]}, "stop[1]"),
    ("completions", {"prompt": "hi", "stop": "\ud800"}, "stop"),
    ("completions", {"prompt": "hi", "rxstream": {"replace": {"x": "\udc00"}}}, "rxstream.replace.x"),
    ("completions", {"prompt": "hi", "rxstream": {"replace": {"\udc00": "x"}}}, "rxstream.replace"),
    ("completions", {"prompt": "hi", "rxstream": {"replace": [["x", "\ud800"]]}}, "rxstream.replace[0][1]"),
    (
        "completions",
        {"prompt": "hi", "stream": True, "rxstream": {"replace": {"h": "\ud800"}}},
        "rxstream.replace.h",
    ),
    ("completions", {"prompt": "hi", "user": "\ud800"}, "user"),
    ("completions", {"prompt": "hi", "model": "\ud800"}, "model"),
    ("chat/completions", {"messages": [{"role": "user", "content": "\ud83d"}]}, "messages[0].content"),
    (
        "chat/completions",
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "\ud83d"}]}]},
        "messages[0].content[0].text",
    ),
    ("chat/completions", {"messages": [{"role": "\ud800", "content": "x"}]}, "messages[0].role"),
    (
        "chat/completions",
        {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}},
        "response_format.type",
    ),
    (
        "completions",
        {"prompt": "x", "response_format": {"type": "json_object"}},
        "response_format",
    ),
    # fields that are not implemented: a 400 naming them unless their value asks for nothing
    (
        "chat/completions",
        {"messages": [{"role": "user", "content": "x"}], "tool_choice": "auto"},
        "tool_choice",
    ),
    (
        "chat/completions",
        {"messages": [{"role": "user", "content": "x"}], "presence_penalty": 0.5},
        "presence_penalty",
    ),
    ("completions", {"prompt": "hi", "frequency_penalty": 1}, "frequency_penalty"),
    ("completions", {"prompt": "hi", "logit_bias": {"5": 10}}, "logit_bias"),
    ("completions", {"prompt": "hi", "echo": True}, "echo"),
    ("completions", {"prompt": "hi", "best_of": 3}, "best_of"),
    ("completions", {"prompt": "hi", "n": 2, "best_of": 3}, "best_of"),
    ("completions", {"prompt": "hi", "n": True}, "n"),
    ("completions", {"prompt": "hi", "temprature": 0.5}, "temprature"),
    ("completions", {"prompt": "hi", "messages": []}, "messages"),
    ("chat/completions", {"messages": [{"role": "user", "content": "x"}], "prompt": "hi"}, "prompt"),
]


@pytest.mark.parametrize(("endpoint", "body", "param"), BAD_REQUESTS)
def test_malformed_requests_get_400(
    server: tuple[str, Any], endpoint: str, body: Any, param: str | None
) -> None:
    url, app = server
    started = app.state.stats.snapshot()["started"]
    if isinstance(body, bytes):
        content = body
    else:
        content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    r = httpx.post(f"{url}/v1/{endpoint}", content=content, headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]
    assert error["param"] == param
    assert app.state.stats.snapshot()["started"] == started


def test_fields_that_ask_for_nothing_are_accepted(server: tuple[str, Any]) -> None:
    url, _app = server
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "x"}],
        "max_tokens": 2,
        "presence_penalty": 0.0,
        "frequency_penalty": 0,
        "logit_bias": {},
        "response_format": {"type": "text"},
        "tool_choice": "none",
        "logprobs": False,
        "n": 1,
        "user": "someone",
    }
    r = httpx.post(f"{url}/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text


def test_best_of_says_why(server: tuple[str, Any]) -> None:
    url, _app = server
    r = httpx.post(f"{url}/v1/completions", json={"prompt": "hi", "n": 2, "best_of": 4})
    assert r.status_code == 400 and "best_of" in r.json()["error"]["message"]
    r = httpx.post(f"{url}/v1/completions", json={"prompt": "hi", "n": 2, "best_of": 2, "max_tokens": 2})
    assert r.status_code == 200 and len(r.json()["choices"]) == 2


def test_unknown_model_is_404_model_not_found(server: tuple[str, Any]) -> None:
    url, app = server
    started = app.state.stats.snapshot()["started"]
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError) as info:
        client.completions.create(model="gpt-4", prompt="hi", max_tokens=2)
    error = info.value.body
    assert isinstance(error, dict) and error["code"] == "model_not_found" and error["param"] == "model"
    assert "tiny" in error["message"]  # names the model that is served
    assert client.completions.create(model="tiny", prompt="hi", max_tokens=2).choices
    r = httpx.post(
        f"{url}/v1/completions", json={"prompt": "hi", "max_tokens": 2}
    )  # no model: the served one
    assert r.status_code == 200 and r.json()["model"] == "tiny"
    assert app.state.stats.snapshot()["started"] == started + 2


def test_other_client_errors(server: tuple[str, Any]) -> None:
    url, _app = server
    json_type = {"Content-Type": "application/json"}
    assert httpx.post(f"{url}/v1/completions", content=b"x" * 2_000_000, headers=json_type).status_code == 413
    follow = httpx.get(f"{url}/v1/completions")  # a GET follows a stream: it must name one
    assert follow.status_code == 400 and "Last-Event-ID" in follow.json()["error"]["message"]
    assert httpx.put(f"{url}/v1/completions").status_code == 405
    missing = httpx.get(f"{url}/v1/nothing")
    assert missing.status_code == 404 and "error" in missing.json()
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="stop"):
        client.completions.create(model="tiny", prompt="hi", stop=["a", "b", "c", "d", "e"])


def test_cli_module_entry_point_parses(tmp_path: Path) -> None:
    import argparse

    from rxstream.server import add_serve_arguments

    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    args = parser.parse_args(["--port", "0", "--model", str(tmp_path), "--max-concurrency", "2"])
    assert args.port == 0 and args.model == str(tmp_path) and args.max_concurrency == 2


def test_default_budget_is_shortened_to_the_context(server: tuple[str, Any], model: OnnxModel) -> None:
    """Without max_tokens, a long prompt gets what the context leaves; an explicit one must fit."""
    url, _app = server
    context = model.max_length
    prompt = "hi " * 100
    n_prompt = len(model.encode(prompt))
    assert 0 < context - n_prompt < ServerLimits().default_max_tokens
    body: dict[str, Any] = {"prompt": prompt, "temperature": 0}
    r = httpx.post(f"{url}/v1/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    usage = r.json()["usage"]
    assert usage["prompt_tokens"] == n_prompt and usage["completion_tokens"] <= context - n_prompt
    r = httpx.post(f"{url}/v1/completions", json={**body, "max_tokens": context - n_prompt + 1})
    assert r.status_code == 400 and r.json()["error"]["param"] == "max_tokens"


class FailingTokenizerModel:
    """The tiny model whose ``encode`` raises."""

    def __init__(self, inner: OnnxModel) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def encode(self, text: str) -> list[int]:
        raise RuntimeError(f"cannot tokenize {text!r}")


def test_tokenizer_failure_is_a_json_500(model: OnnxModel) -> None:
    app = create_app(FailingTokenizerModel(model), model_name="t")
    with run_in_thread(app) as url:
        r = httpx.post(f"{url}/v1/completions", json={"prompt": "abc", "stream": True})
        assert r.status_code == 500
        error = r.json()["error"]
        assert error["type"] == "server_error" and "cannot tokenize 'abc'" in error["message"]
        assert app.state.stats.snapshot()["started"] == 0


def sse_payloads(text: str) -> list[str]:
    """The data of each event of a complete server-sent event stream (every event ends with a
    blank line and is an ``id:`` line, numbered from 1 in one stream, then one ``data:`` line)."""
    assert text.endswith("\n\n")
    events = text[:-2].split("\n\n")
    ids = [e.partition("\n")[0] for e in events]
    stream = ids[0].removeprefix("id: ").rpartition(":")[0]
    assert ids == [f"id: {stream}:{n}" for n in range(1, len(events) + 1)], ids
    data = [e.partition("\n")[2] for e in events]
    assert all(d.startswith("data: ") and "\n" not in d for d in data), events
    return [d[len("data: ") :] for d in data]


@pytest.mark.parametrize("chat", [False, True])
@pytest.mark.parametrize("include_usage", [False, True])
def test_stream_chunks_follow_the_openai_schema(
    server: tuple[str, Any], chat: bool, include_usage: bool
) -> None:
    url, _app = server
    body: dict[str, Any] = {"max_tokens": 12, "stream": True, "stop": "e", **SAMPLING}
    if chat:
        body["messages"] = [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]
    else:
        body["prompt"] = "Hello"
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    r = httpx.post(f"{url}/v1/{'chat/completions' if chat else 'completions'}", json=body, timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    payloads = sse_payloads(r.text)
    assert payloads[-1] == "[DONE]" and "[DONE]" not in payloads[:-1]
    chunks = [json.loads(p) for p in payloads[:-1]]
    if include_usage:
        *chunks, last = chunks
        assert last["choices"] == [] and set(last["usage"]) == {
            "prompt_tokens",
            "completion_tokens",
            "total_tokens",
            "completion_tokens_details",
            "rxstream",
        }
        spent = last["usage"]
        assert spent["completion_tokens_details"] == {"reasoning_tokens": 0}  # not routed: all answer
        assert spent["rxstream"] == {
            "content": spent["completion_tokens"],
            "reasoning": 0,
            "tool_calls": 0,
            "delimiters": 0,
        }
        assert last["id"] == chunks[0]["id"]
    assert chunks
    for i, c in enumerate(chunks):
        assert c["id"] == chunks[0]["id"] and c["id"].startswith("chatcmpl-" if chat else "cmpl-")
        assert c["object"] == ("chat.completion.chunk" if chat else "text_completion")
        assert isinstance(c["created"], int) and c["model"] == "tiny"
        assert len(c["choices"]) == 1 and c["choices"][0]["index"] == 0
        choice = c["choices"][0]
        assert "finish_reason" in choice and (choice["finish_reason"] is None) == (i < len(chunks) - 1)
        assert ("delta" in choice) if chat else isinstance(choice["text"], str)
        if include_usage:
            assert "usage" in c and c["usage"] is None
        else:
            assert "usage" not in c
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def raw_request(url: str, body: bytes, *, declared_length: int | None = None) -> socket.socket:
    """Open a connection and send a POST /v1/completions head and ``body`` (raw, to cut it anywhere)."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    length = len(body) if declared_length is None else declared_length
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    return sock


def read_until(sock: socket.socket, marker: bytes, count: int = 1) -> None:
    data = b""
    while data.count(marker) < count:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed before {count} x {marker!r}: {data[-300:]!r}"
        data += chunk


def test_disconnects_at_any_point_leave_nothing_behind(model: OnnxModel) -> None:
    """Clients vanish mid-body, before the headers, while queued, mid-stream: all is released."""
    errors: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            errors.append(record)

    handler = Collect(level=logging.ERROR)
    before = set(threading.enumerate())
    limits = ServerLimits(max_concurrency=2, resume_grace=0)  # every disconnect ends its generation
    app = create_app(SlowModel(model, 0.01), model_name="t", limits=limits)
    try:
        with run_in_thread(app) as url:
            logging.getLogger("uvicorn.error").addHandler(handler)  # after uvicorn configured logging
            stream = json.dumps({"prompt": "Go on", "max_tokens": 400, "stream": True}).encode()
            plain = json.dumps({"prompt": "Go on", "max_tokens": 400}).encode()
            open_socks = []
            for _ in range(2):  # mid-stream: these take both generation slots
                sock = raw_request(url, stream)
                read_until(sock, b"data: ", 3)
                open_socks.append(sock)
            for _ in range(3):  # after the headers, queued for a slot
                sock = raw_request(url, stream)
                read_until(sock, b"\r\n\r\n")
                open_socks.append(sock)
            for _ in range(3):  # before the response headers (non-streaming, queued)
                open_socks.append(raw_request(url, plain))
            for _ in range(3):  # while sending the body
                open_socks.append(raw_request(url, stream[:5], declared_length=len(stream)))
            assert wait_for(lambda: app.state.stats.snapshot()["waiting"] == 6)
            assert model.active_generations == 2
            random.Random(7).shuffle(open_socks)
            for sock in open_socks:
                sock.close()
            assert wait_for(lambda: model.active_generations == 0), "a generation kept running"
            assert wait_for(lambda: (s := app.state.stats.snapshot())["active"] == 0 and s["waiting"] == 0), (
                app.state.stats.snapshot()
            )
            snap = app.state.stats.snapshot()
            assert snap["finished"] == {"cancelled": snap["started"]}, snap
            assert snap["generated_tokens"] < 2 * 400
            # the server still answers
            ok = httpx.post(f"{url}/v1/completions", json={"prompt": "x", "max_tokens": 3}, timeout=10)
            assert ok.status_code == 200
    finally:
        logging.getLogger("uvicorn.error").removeHandler(handler)
    assert wait_for(lambda: set(threading.enumerate()) <= before), set(threading.enumerate()) - before
    assert not errors, [r.getMessage() for r in errors]


def test_sampling_defaults_come_from_the_model(tmp_path: Path) -> None:
    """A request that leaves sampling out gets the model's generation_config.json defaults
    (greedy for the tiny model), reported at /v1/models and /health; its own fields win."""
    directory = build_tiny_model(tmp_path / "tiny", seed=5)
    greedy_model = OnnxModel.load(directory, provider="cpu")
    prompt = "Tell me"
    with run_in_thread(create_app(greedy_model, model_name="tiny")) as url:
        assert httpx.get(f"{url}/v1/models").json()["data"][0]["sampling_defaults"]["temperature"] == 0.0
        plain = httpx.post(f"{url}/v1/completions", json={"prompt": prompt, "max_tokens": 20}).json()
        zero = httpx.post(
            f"{url}/v1/completions", json={"prompt": prompt, "max_tokens": 20, "temperature": 0}
        ).json()
        assert plain["choices"][0]["text"] == zero["choices"][0]["text"]
    config_file = directory / "generation_config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**config, "do_sample": True, "temperature": 1.5, "top_k": 50}))
    sampling_model = OnnxModel.load(directory, provider="cpu")
    with run_in_thread(create_app(sampling_model, model_name="tiny")) as url:
        health = httpx.get(f"{url}/health").json()
        assert (
            health["sampling_defaults"]["temperature"] == 1.5 and health["sampling_defaults"]["top_k"] == 50
        )
        texts = {
            httpx.post(f"{url}/v1/completions", json={"prompt": prompt, "max_tokens": 20, "seed": s}).json()[
                "choices"
            ][0]["text"]
            for s in range(4)
        }
        assert len(texts) > 1  # it samples
        again = httpx.post(
            f"{url}/v1/completions", json={"prompt": prompt, "max_tokens": 20, "temperature": 0}
        ).json()
        assert again["choices"][0]["text"] == zero["choices"][0]["text"]
