"""``return_token_ids`` on ``/v1/completions``: each choice carries the ids the model generated,
streamed or not, whatever the text rules make of them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from reactivex import operators as ops

from rxstream import FinishRecorder
from rxstream.backends import OnnxModel
from rxstream.server import ServerLimits, create_app, run_in_thread


@pytest.fixture(scope="module")
def server(model: OnnxModel) -> Iterator[str]:
    app = create_app(model, model_name="tiny", limits=ServerLimits(max_concurrency=2))
    with run_in_thread(app) as url:
        yield url


def direct_ids(model: OnnxModel, prompt_ids: list[int], max_tokens: int, **sampling: Any) -> list[int]:
    rec = FinishRecorder()
    ids: list[int] = (
        model.generate(prompt_ids, max_new_tokens=max_tokens, on_finish=rec, **sampling)
        .pipe(ops.to_list())
        .run()
    )
    return ids


def stream_chunks(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    chunks = []
    with httpx.stream("POST", f"{url}/v1/completions", json={**body, "stream": True}, timeout=30) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
    return chunks


def test_streamed_chunks_carry_the_generated_ids(server: str, model: OnnxModel) -> None:
    prompt = model.encode("Once upon a time")
    expected = direct_ids(model, prompt, 40)
    chunks = stream_chunks(
        server, {"prompt": prompt, "max_tokens": 40, "temperature": 0, "return_token_ids": True}
    )
    ids = [i for c in chunks for i in c["choices"][0]["token_ids"]]
    assert ids == expected
    text = "".join(c["choices"][0]["text"] for c in chunks)
    assert text == model.tokenizer.decode(expected)
    assert chunks[-1]["choices"][0]["finish_reason"] in ("length", "stop")


def test_seeded_sampling_and_n_choices(server: str, model: OnnxModel) -> None:
    prompt = model.encode("Tell me")
    body = {
        "prompt": prompt,
        "max_tokens": 25,
        "temperature": 1.0,
        "seed": 7,
        "n": 2,
        "return_token_ids": True,
    }
    chunks = stream_chunks(server, body)
    for i in range(2):
        ids = [t for c in chunks for ch in c["choices"] if ch["index"] == i for t in ch["token_ids"]]
        assert ids == direct_ids(model, prompt, 25, temperature=1.0, seed=7 + i)


def test_ids_come_whatever_a_stop_cuts(server: str, model: OnnxModel) -> None:
    prompt = model.encode("Once upon a time")
    expected = direct_ids(model, prompt, 40)
    text = model.tokenizer.decode(expected)
    stop = text[len(text) // 2 : len(text) // 2 + 3]
    body = {"prompt": prompt, "max_tokens": 40, "temperature": 0, "stop": [stop], "return_token_ids": True}
    chunks = stream_chunks(server, body)
    ids = [i for c in chunks for i in c["choices"][0]["token_ids"]]
    assert ids == expected[: len(ids)] and ids
    assert stop not in "".join(c["choices"][0]["text"] for c in chunks)


def test_non_streamed_choice_carries_all_ids(server: str, model: OnnxModel) -> None:
    prompt = model.encode("Hello")
    body = {"prompt": prompt, "max_tokens": 20, "temperature": 0, "return_token_ids": True}
    choice = httpx.post(f"{server}/v1/completions", json=body, timeout=30).json()["choices"][0]
    assert choice["token_ids"] == direct_ids(model, prompt, 20)


def test_without_the_field_no_ids_and_bad_values_are_400(server: str, model: OnnxModel) -> None:
    chunks = stream_chunks(server, {"prompt": "Hello", "max_tokens": 5})
    assert all("token_ids" not in c["choices"][0] for c in chunks)
    bad = httpx.post(f"{server}/v1/completions", json={"prompt": "Hi", "return_token_ids": 1})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "return_token_ids"
    chat = httpx.post(
        f"{server}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}], "return_token_ids": True},
    )
    assert chat.status_code == 400 and chat.json()["error"]["param"] == "return_token_ids"
