"""The gateway in front of a wire-format double of vLLM's OpenAI server (``vllm_double``, replaying
recorded streams): ids from ``token_ids``, or from ``token_id:N`` logprobs tokens for an engine
that ignores ``return_token_ids``; several ids per chunk; the usage chunk; and ``rxstream serve``
in front of it answering with the recorded completion, the gateway's own stop strings, reasoning
and tool calls applied."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from reactivex import operators as ops
from tokenizers import Tokenizer

from rxstream import FinishReason, FinishRecorder
from rxstream.backends import GatewayModel
from rxstream.server import ServerLimits, create_app, run_in_thread
from tests.channels.recorded import RECORDINGS
from tests.scripted_model import QWEN3_TEMPLATE, ScriptedModel

from .test_gateway import streamed
from .vllm_double import recording, vllm_double

STORY = recording("story")
TOOLS_RECORDING = recording("qwen3_tools")
WEATHER = [{"role": "user", "content": "What is the weather in Zürich and Tokyo, and what time is it?"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    for name in ("get_weather", "get_time")
]


def recorded_ids(rec: dict[str, Any]) -> list[int]:
    return [i for choice in rec["choices"] for i in choice["token_ids"]]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2's tokenizer (the recordings' ids) with a Qwen3-style chat template."""
    from rxstream.backends import pull_model
    from rxstream.backends.convert._download import DownloadError

    try:
        source = pull_model("smollm2", progress=False, quantization="fp32")
    except DownloadError as exc:  # pragma: no cover - offline outside CI
        pytest.skip(f"offline: cannot download the default model: {exc}")
    directory = tmp_path_factory.mktemp("qwen3-style")
    (directory / "tokenizer.json").write_bytes((source / "tokenizer.json").read_bytes())
    config = {"chat_template": QWEN3_TEMPLATE, "eos_token": "<|im_end|>", "bos_token": None}
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (directory / "config.json").write_text(json.dumps({"eos_token_id": 2, "max_position_embeddings": 8192}))
    return directory


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))


def test_ids_come_from_token_ids_several_per_chunk(tokenizer: Tokenizer, tokenizer_dir: Path) -> None:
    assert any(len(c["token_ids"]) > 1 for c in STORY["choices"])  # multi-token deltas
    with (
        vllm_double(tokenizer) as (url, double),
        GatewayModel(url, tokenizer_dir, health_interval=None) as gw,
    ):
        rec = FinishRecorder()
        prompt = gw.encode("Once upon a time")
        ids = gw.generate(prompt, max_new_tokens=200, on_finish=rec).pipe(ops.to_list()).run()
        assert ids == recorded_ids(STORY)
        assert rec.finish is not None and rec.finish.reason is FinishReason.EOS
        sent = double.requests[-1]
        assert sent["prompt"] == prompt and sent["return_token_ids"] is True and sent["stream"] is True
        assert sent["stream_options"] == {"include_usage": True} and "logprobs" not in sent
        cut = (
            gw.generate(prompt, max_new_tokens=6, on_finish=(rec := FinishRecorder()))
            .pipe(ops.to_list())
            .run()
        )
        assert cut == recorded_ids(STORY)[:6] and rec.finish is not None
        assert rec.finish.reason is FinishReason.LENGTH


def test_engine_without_return_token_ids_gives_ids_in_logprobs(
    tokenizer: Tokenizer, tokenizer_dir: Path
) -> None:
    with (
        vllm_double(tokenizer, old=True) as (url, double),
        GatewayModel(url, tokenizer_dir, health_interval=None) as gw,
    ):
        prompt = gw.encode("Once upon a time")
        for _ in range(2):
            assert gw.generate(prompt, max_new_tokens=200).pipe(ops.to_list()).run() == recorded_ids(STORY)
        first, again, second = double.requests
        assert first["return_token_ids"] is True  # ignored: text only, so asked again before any id
        for body in (again, second):  # learned for the replica: the next request asks so at once
            assert body["return_tokens_as_token_ids"] is True and body["logprobs"] == 1
            assert "return_token_ids" not in body
        assert gw.replica_stats()[0]["in_flight"] == 0


@pytest.mark.parametrize("old", [False, True])
def test_logprobs_from_the_engine(tokenizer: Tokenizer, tokenizer_dir: Path, old: bool) -> None:
    with (
        vllm_double(tokenizer, old=old) as (url, double),
        GatewayModel(url, tokenizer_dir, health_interval=None) as gw,
    ):
        pieces = (
            gw.generate(gw.encode("Once upon a time"), max_new_tokens=200, logprobs=2)
            .pipe(ops.to_list())
            .run()
        )
        assert double.requests[-1]["logprobs"] == 2 and double.requests[-1]["return_tokens_as_token_ids"]
        assert len(double.requests) == 1
        expected = []
        for choice in STORY["choices"]:
            lp = choice["logprobs"]
            for token, value, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"], strict=True):
                best = sorted(((int(t[9:]), v) for t, v in top.items()), key=lambda kv: -kv[1])[:2]
                expected.append((int(token[9:]), value, best))
        assert [(p.ids[0], p.logprobs[0], list(p.top_logprobs[0])) for p in pieces] == expected  # type: ignore[index]
        assert all(p.text == "" and p.size == 1 for p in pieces)


@pytest.fixture(scope="module")
def served(tokenizer: Tokenizer, tokenizer_dir: Path) -> Iterator[tuple[str, Any]]:
    """``rxstream serve`` on the gateway in front of the double: (its URL, the double)."""
    with (
        vllm_double(tokenizer) as (url, double),
        GatewayModel(url, tokenizer_dir, health_interval=None) as gw,
    ):
        with run_in_thread(create_app(gw, model_name="gw", limits=ServerLimits(max_concurrency=4))) as gw_url:
            yield gw_url, double


def test_served_completion_is_the_recorded_one(served: tuple[str, Any]) -> None:
    url, _ = served
    body = {"prompt": "Once upon a time", "max_tokens": 200, "temperature": 0}
    whole = httpx.post(f"{url}/v1/completions", json=body, timeout=30).json()
    assert whole["choices"][0]["text"] == STORY["completion"]
    n = len(recorded_ids(STORY))
    assert whole["usage"]["completion_tokens"] == n  # every id of the engine, counted once
    text, events = streamed(url, "/v1/completions", {**body, "stream_options": {"include_usage": True}})
    assert text == STORY["completion"] and events[-1]["usage"]["completion_tokens"] == n
    # stop strings are the gateway's: the engine is not told them, the text ends before them
    stopped = httpx.post(f"{url}/v1/completions", json={**body, "stop": ["sun,"]}, timeout=30).json()
    assert stopped["choices"][0]["text"] == STORY["completion"][: STORY["completion"].index("sun,")]
    assert stopped["choices"][0]["finish_reason"] == "stop"
    # logprobs of the served gateway come from the engine's
    lp = httpx.post(f"{url}/v1/completions", json={**body, "logprobs": 1, "max_tokens": 5}, timeout=30).json()
    recorded = [v for c in STORY["choices"] for v in c["logprobs"]["token_logprobs"]][:5]
    assert lp["choices"][0]["logprobs"]["token_logprobs"] == recorded


def test_served_chat_routes_reasoning_and_tool_calls(served: tuple[str, Any], tokenizer: Tokenizer) -> None:
    url, double = served
    body = {"messages": WEATHER, "tools": TOOLS, "max_tokens": 500, "temperature": 0}
    through = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30).json()["choices"][0]
    local = ScriptedModel(tokenizer, QWEN3_TEMPLATE, TOOLS_RECORDING["completion"])
    with run_in_thread(create_app(local, model_name="gw")) as local_url:
        expected = httpx.post(f"{local_url}/v1/chat/completions", json=body, timeout=30).json()["choices"][0]
    assert double.requests[-1]["prompt"] == tokenizer.encode(local.prompts[-1], add_special_tokens=False).ids
    message = through["message"]
    want = RECORDINGS["qwen3"].expected
    assert message["reasoning_content"] == want["channels"]["reasoning"]
    calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]]
    assert calls == [tuple(c) for c in want["calls"]]
    assert through["finish_reason"] == "tool_calls"
    for key in ("content", "reasoning_content"):
        assert message[key] == expected["message"][key]
    assert calls == [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in expected["message"]["tool_calls"]
    ]


def test_the_tokens_only_endpoint_gives_the_same_ids_and_logprobs(
    tokenizer: Tokenizer, tokenizer_dir: Path
) -> None:
    with (
        vllm_double(tokenizer) as (url, double),
        GatewayModel(url, tokenizer_dir, health_interval=None, endpoint="generate") as gw,
        GatewayModel(url, tokenizer_dir, health_interval=None) as by_completions,
    ):
        prompt = gw.encode("Once upon a time")
        rec = FinishRecorder()
        assert gw.generate(prompt, max_new_tokens=200, on_finish=rec).pipe(
            ops.to_list()
        ).run() == recorded_ids(STORY)
        assert rec.finish is not None and rec.finish.reason is FinishReason.EOS
        sent = double.requests[-1]
        assert sent["token_ids"] == prompt and "prompt" not in sent and sent["stream"] is True
        assert sent["sampling_params"]["max_tokens"] == 200 and sent["sampling_params"]["detokenize"] is False
        cut = (
            gw.generate(prompt, max_new_tokens=6, on_finish=(rec := FinishRecorder()))
            .pipe(ops.to_list())
            .run()
        )
        assert cut == recorded_ids(STORY)[:6] and rec.finish is not None
        assert rec.finish.reason is FinishReason.LENGTH

        def pieces(model: GatewayModel) -> list[tuple[Any, ...]]:
            out = model.generate(prompt, max_new_tokens=200, logprobs=2).pipe(ops.to_list()).run()
            return [(p.ids, p.logprobs, p.top_logprobs) for p in out]

        assert pieces(gw) == pieces(by_completions)
        assert double.requests[-2]["sampling_params"]["logprobs"] == 2
    with pytest.raises(ValueError, match="endpoint"):
        GatewayModel(url, tokenizer_dir, endpoint="tokens")
    with pytest.raises(ValueError, match="mode='ids'"):
        GatewayModel(url, tokenizer_dir, endpoint="generate", mode="text")


def test_served_over_the_tokens_only_endpoint(tokenizer: Tokenizer, tokenizer_dir: Path) -> None:
    body = {"messages": WEATHER, "tools": TOOLS, "max_tokens": 500, "temperature": 0}
    answers = []
    for endpoint in ("completions", "generate"):
        with (
            vllm_double(tokenizer) as (url, double),
            GatewayModel(url, tokenizer_dir, health_interval=None, endpoint=endpoint) as gw,
            run_in_thread(create_app(gw, model_name="gw")) as gw_url,
        ):
            answers.append(httpx.post(f"{gw_url}/v1/chat/completions", json=body, timeout=30).json())
            assert ("token_ids" in double.requests[-1]) is (endpoint == "generate")
    for answer in answers:  # call ids are drawn afresh for each response
        for call in answer["choices"][0]["message"]["tool_calls"]:
            assert call.pop("id").startswith("call_")
    by_completions, by_generate = answers
    assert by_generate["choices"] == by_completions["choices"]
    assert by_generate["usage"] == by_completions["usage"]
    assert by_generate["choices"][0]["finish_reason"] == "tool_calls"
