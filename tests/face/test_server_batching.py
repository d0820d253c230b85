"""``rxstream serve`` with continuous batching: real sockets, the official ``openai`` client, the tiny
models in both KV layouts (GroupQueryAttention slots, plain-attention left padding)."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import reactivex
from reactivex import operators as ops

from rxstream.backends import BatchConfig, OnnxModel, build_tiny_model
from rxstream.operators import detokenize
from rxstream.server import ServerLimits, create_app, run_in_thread
from rxstream.server import _generation as server_generation
from rxstream.server._generation import Generation
from rxstream.server._requests import validate_request
from rxstream.server._state import ServerState
from rxstream.server._stats import ServerStats

SAMPLING: dict[str, Any] = {"temperature": 1.0, "seed": 1234}

QUESTIONS = [f"Question number {i}: what comes next?" for i in range(40)]


@pytest.fixture(scope="module")
def gqa_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "gqa", seed=0, attention="gqa")


@pytest.fixture(params=["slots", "padded"])
def model_dir(request: pytest.FixtureRequest, tiny_dir: Path) -> Path:
    if request.param == "padded":
        return tiny_dir
    directory: Path = request.getfixturevalue("gqa_dir")
    return directory


@pytest.fixture
def batched(model_dir: Path) -> OnnxModel:
    return OnnxModel.load(model_dir, provider="cpu", batching=BatchConfig(max_batch=32))


@pytest.fixture
def server(batched: OnnxModel) -> Iterator[tuple[str, Any]]:
    # a short grace period: each stream a client left is cancelled 0.2 s later (as by default, sooner)
    limits = ServerLimits(max_concurrency=32, resume_grace=0.2)
    app = create_app(batched, model_name="tiny", limits=limits)
    with run_in_thread(app) as url:
        yield url, app


def expected_text(model_dir: Path, messages: list[dict[str, str]], max_tokens: int) -> str:
    """What one request alone gives: the ids of a non-batching model, detokenized by the operators."""
    alone = OnnxModel.load(model_dir, provider="cpu", batching=False)
    prompt = alone.encode_chat(messages)
    ids = alone.generate(prompt, max_new_tokens=max_tokens, **SAMPLING).pipe(ops.to_list()).run()
    source = reactivex.from_iterable(ids).pipe(detokenize(alone.tokenizer, prompt_ids=prompt))
    return "".join(source.pipe(ops.to_list()).run())


def batch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "rxstream-batch"]


def wait_for(condition: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())


def assert_idle(url: str, model: OnnxModel) -> dict[str, Any]:
    def idle() -> bool:
        h = httpx.get(f"{url}/health").json()
        return h["active"] == 0 and h["batch"]["rows"] == 0 and h["batch"]["kv_bytes"] == 0

    assert wait_for(idle), httpx.get(f"{url}/health").json()
    assert wait_for(lambda: not batch_threads()), batch_threads()
    assert model.active_generations == 0
    health: dict[str, Any] = httpx.get(f"{url}/health").json()
    return health


def test_concurrent_streams_share_the_batch_and_each_gets_its_own_answer(
    server: tuple[str, Any], batched: OnnxModel, model_dir: Path
) -> None:
    url, _app = server
    messages = [[{"role": "user", "content": q}] for q in QUESTIONS[:12]]

    async def one(client: openai.AsyncOpenAI, msgs: list[dict[str, str]]) -> str:
        stream = await client.chat.completions.create(
            model="tiny",
            messages=msgs,  # type: ignore[arg-type]
            max_tokens=30,
            stream=True,
            **SAMPLING,
        )
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    async def main() -> list[str]:
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
            return await asyncio.gather(*(one(client, m) for m in messages))

    texts = asyncio.run(asyncio.wait_for(main(), 120))
    for msgs, text in zip(messages, texts, strict=True):
        assert text == expected_text(model_dir, msgs, 30)
    health = assert_idle(url, batched)
    assert health["batching"] is True
    assert health["batch"]["peak_rows"] >= 4  # they really ran together
    assert health["batch"]["max_batch"] == 32
    assert health["batch"]["shared_prefix_tokens"] > 0  # the template's prefix was read once


def test_32_streams_with_random_disconnects_leave_nothing_behind(
    server: tuple[str, Any], batched: OnnxModel
) -> None:
    url, app = server
    rng = random.Random(3)
    plans = [(rng.choice(["full", "early", "instant"]), rng.randrange(1, 12)) for _ in range(32)]

    async def one(client: openai.AsyncOpenAI, i: int, plan: str, after: int) -> None:
        stream = await client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": QUESTIONS[i]}],
            max_tokens=200,
            stream=True,
            **SAMPLING,
        )
        if plan == "instant":
            await stream.close()
            return
        count = 0
        async for _chunk in stream:
            count += 1
            if plan == "early" and count >= after:
                await stream.close()  # the connection goes: the server must cancel that row
                return

    async def main() -> None:
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
            await asyncio.gather(*(one(client, i, p, a) for i, (p, a) in enumerate(plans)))

    asyncio.run(asyncio.wait_for(main(), 120))
    health = assert_idle(url, batched)
    assert health["waiting"] == 0
    finished = app.state.stats.snapshot()["finished"]
    assert sum(finished.values()) == 32, finished
    if any(p != "full" for p, _ in plans):
        assert finished.get("cancelled", 0) >= 1


def test_full_queue_answers_503_with_batching(batched: OnnxModel) -> None:
    limits = ServerLimits(max_concurrency=1, max_queued=0)
    app = create_app(batched, model_name="busy", limits=limits, batching=True)
    with run_in_thread(app) as url, httpx.Client(timeout=10) as client:
        body = {"prompt": "first", "max_tokens": 400, "stream": True, "temperature": 0}
        with client.stream("POST", f"{url}/v1/completions", json=body) as first:
            assert first.status_code == 200
            lines = first.iter_lines()  # keep the iterator: dropping it closes the connection
            next(lines)
            busy = client.post(f"{url}/v1/completions", json={"prompt": "second", "max_tokens": 5})
            assert busy.status_code == 503 and busy.json()["error"]["type"] == "server_busy"
        assert wait_for(lambda: batched.active_generations == 0)
        ok = client.post(f"{url}/v1/completions", json={"prompt": "third", "max_tokens": 5})
        assert ok.status_code == 200
        assert_idle(url, batched)


def test_one_generation_per_request_stays_selectable(batched: OnnxModel, model_dir: Path) -> None:
    app = create_app(batched, model_name="tiny", limits=ServerLimits(max_concurrency=4), batching=False)
    with run_in_thread(app) as url:
        health = httpx.get(f"{url}/health").json()
        assert health["batching"] is False and health["batch"] is None
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        msgs = [{"role": "user", "content": QUESTIONS[0]}]
        reply = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=20, **SAMPLING)  # type: ignore[arg-type]
        assert reply.choices[0].message.content == expected_text(model_dir, msgs, 20)
    assert batched.batch_stats() is not None and batched.batch_stats()["rows"] == 0  # type: ignore[index]
    assert not batch_threads()


def test_batching_true_needs_a_model_that_batches(model_dir: Path) -> None:
    plain = OnnxModel.load(model_dir, provider="cpu", batching=False)
    with pytest.raises(ValueError, match="does not batch"):
        create_app(plain, batching=True)
    with pytest.raises(TypeError, match="batching"):
        create_app(plain, batching="yes")  # type: ignore[arg-type]


def test_a_reader_that_falls_behind_pauses_its_row_only(
    batched: OnnxModel, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A response that stops taking text: its row pauses once ~40 characters wait (the limit set
    for the test), without blocking the batch's thread; the other request finishes meanwhile; the
    paused one, read again, ends with the whole text it would have had alone."""
    monkeypatch.setattr(server_generation, "_QUEUED_CHARS", 40)
    limits = ServerLimits(max_concurrency=4)
    state = ServerState(batched, "tiny", limits, ServerStats(), batched.context_length, None)  # type: ignore[arg-type]
    state.batching = True
    msgs = [{"role": "user", "content": QUESTIONS[5]}]
    other_msgs = [{"role": "user", "content": QUESTIONS[6]}]

    def request(m: list[dict[str, str]]) -> Any:
        body = {"messages": m, "max_tokens": 120, "stream": True, **SAMPLING}
        return validate_request(body, chat=True, limits=limits)

    async def main() -> tuple[str, str, int, int, int, int]:
        slow = Generation(state, request(msgs), batched.encode_chat(msgs))
        fast = Generation(state, request(other_msgs), batched.encode_chat(other_msgs))
        slow_texts = slow.items()
        first = await slow_texts.__anext__()
        fast_text = "".join([d async for d in fast.items()])
        await asyncio.sleep(0.3)
        paused_at = slow.tokens
        await asyncio.sleep(0.3)
        still = slow.tokens
        rows = (batched.batch_stats() or {})["rows"]
        rest = "".join([d async for d in slow_texts])
        return first + rest, fast_text, paused_at, still, rows, slow.tokens

    slow_text, fast_text, paused_at, still, rows, total = asyncio.run(asyncio.wait_for(main(), 60))
    assert rows == 1  # the slow row is still there, paused
    assert paused_at == still < total  # it stopped generating while nobody read, then went on
    assert slow_text == expected_text(model_dir, msgs, 120)
    assert fast_text == expected_text(model_dir, other_msgs, 120)
    assert wait_for(lambda: batched.active_generations == 0 and not batch_threads())


def test_n_choices_read_the_prompt_once(batched: OnnxModel, model_dir: Path) -> None:
    """A request with ``n = 4``: four generations of one prompt in the batch, prefilled once (the
    others copy its KV cache), each choice still the text it gives alone with seed + i."""
    app = create_app(batched, model_name="tiny", limits=ServerLimits(max_concurrency=8))
    msgs = [{"role": "user", "content": QUESTIONS[7]}]
    with run_in_thread(app) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        # 80 tokens: long enough that no choice can end before the last one has joined the batch
        # (a prompt is shared only while a row holds it), even on a loaded machine
        reply = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=80, n=4, **SAMPLING)  # type: ignore[arg-type]
        assert_idle(url, batched)
    prompt = batched.encode_chat(msgs)
    stats = batched.batch_stats()
    assert stats is not None and stats["prefill_tokens"] == len(prompt)
    alone = OnnxModel.load(model_dir, provider="cpu", batching=False)
    for choice in reply.choices:
        seed = SAMPLING["seed"] + choice.index
        ids = alone.generate(prompt, max_new_tokens=80, temperature=1.0, seed=seed).pipe(ops.to_list()).run()
        text = "".join(
            reactivex.from_iterable(ids)
            .pipe(detokenize(alone.tokenizer, prompt_ids=prompt), ops.to_list())
            .run()
        )
        assert choice.message.content == text
