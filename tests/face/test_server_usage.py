"""``usage`` that adds up (SEMANTICS §10): ``completion_tokens_details.reasoning_tokens`` and the
``rxstream`` buckets of a routed chat, streamed and not, for ``n`` choices, on streams a stop
string, the budget, a tool call or a failure ends, and on every chunk with
``continuous_usage_stats``. Real sockets, the official ``openai`` client, a scripted model
replaying SmolLM2's real token ids through a real chat template."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx
import reactivex
from reactivex import operators as ops
from tokenizers import Tokenizer

from rxstream import FinishCallback, SamplingParams
from tests.face.test_server_channels import QWEN3_ANSWER, USER, serving
from tests.face.test_server_tool_calls import QWEN3_CALLS, TOOLS
from tests.scripted_model import QWEN3_TEMPLATE, ScriptedModel

BUCKETS = ("content", "reasoning", "tool_calls", "delimiters")


def expected_buckets(tokenizer: Tokenizer, text: str) -> dict[str, int]:
    """The buckets of QWEN3_ANSWER's tokens by where each token's text starts (its offsets):
    the reasoning between the tags, the tags and the blank line after them, the answer."""
    start = text.index("<think>") + len("<think>")
    end = text.index("</think>")
    answer = text.index("The answer")
    out = dict.fromkeys(BUCKETS, 0)
    for begin, _ in tokenizer.encode(text, add_special_tokens=False).offsets:
        bucket = "reasoning" if start <= begin < end else "content" if begin >= answer else "delimiters"
        out[bucket] += 1
    return out


def adds_up(usage: dict[str, Any]) -> dict[str, int]:
    """The buckets, checked against the OpenAI counts."""
    buckets: dict[str, int] = usage["rxstream"]
    assert set(buckets) == set(BUCKETS)
    assert sum(buckets.values()) == usage["completion_tokens"]
    assert usage["completion_tokens_details"]["reasoning_tokens"] == buckets["reasoning"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    return buckets


def streamed_usage(client: Any, **request: Any) -> tuple[list[Any], dict[str, Any]]:
    """The chunks of a streamed request with ``include_usage``, and its last chunk's usage."""
    options = request.pop("stream_options", {"include_usage": True})
    chunks = list(
        client.chat.completions.create(model="scripted", stream=True, stream_options=options, **request)
    )
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    return chunks[:-1], last.usage.model_dump()


def test_reasoning_tokens_streamed_and_not(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_ANSWER)
    expected = expected_buckets(smollm2_tokenizer, QWEN3_ANSWER)
    assert expected["reasoning"] and expected["delimiters"] and expected["content"]
    with serving(model) as (client, _url, _app):
        reply = client.chat.completions.create(model="scripted", messages=USER)
        _, streamed = streamed_usage(client, messages=USER)
    whole = reply.usage.model_dump() if reply.usage is not None else {}
    assert reply.usage is not None and reply.usage.completion_tokens_details is not None
    assert reply.usage.completion_tokens_details.reasoning_tokens == expected["reasoning"]
    assert adds_up(whole) == expected == adds_up(streamed)
    assert whole["completion_tokens"] == len(model.completion_ids("")) == streamed["completion_tokens"]


def test_n_choices_add_up(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_ANSWER)
    one = expected_buckets(smollm2_tokenizer, QWEN3_ANSWER)
    with serving(model) as (client, _url, _app):
        reply = client.chat.completions.create(model="scripted", messages=USER, n=2)
        _, streamed = streamed_usage(client, messages=USER, n=2)
    assert reply.usage is not None
    whole = reply.usage.model_dump()
    twice = {k: 2 * v for k, v in one.items()}
    assert adds_up(whole) == twice == adds_up(streamed)
    assert whole["completion_tokens"] == 2 * len(model.completion_ids(""))


def test_include_usage_on_a_stream_a_stop_string_ends(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_ANSWER)
    total = len(model.completion_ids(""))
    with serving(model) as (client, _url, _app):
        chunks, spent = streamed_usage(client, messages=USER, stop=["STOP"])
        reply = client.chat.completions.create(model="scripted", messages=USER, stop=["STOP"])
    assert [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason] == ["stop"]
    buckets = adds_up(spent)
    assert spent["completion_tokens"] < total  # the generation ended at the stop
    assert buckets["reasoning"] == expected_buckets(smollm2_tokenizer, QWEN3_ANSWER)["reasoning"]
    assert reply.usage is not None and reply.usage.model_dump() == spent


def test_include_usage_on_streams_the_budget_or_a_tool_call_ends(smollm2_tokenizer: Tokenizer) -> None:
    calls = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_CALLS)
    total = len(calls.completion_ids(""))
    with serving(calls) as (client, _url, _app):
        _, budget = streamed_usage(client, messages=USER, max_tokens=7)
        chunks, first_call = streamed_usage(client, messages=USER, tools=TOOLS, parallel_tool_calls=False)
        _, both_calls = streamed_usage(client, messages=USER, tools=TOOLS)
    assert adds_up(budget)["reasoning"] > 0 and budget["completion_tokens"] == 7
    assert [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason] == ["tool_calls"]
    one, two = adds_up(first_call), adds_up(both_calls)
    assert first_call["completion_tokens"] < total == both_calls["completion_tokens"]
    assert 0 < one["tool_calls"] < two["tool_calls"] and one["reasoning"] == two["reasoning"]


def test_continuous_usage_stats_on_every_chunk(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_ANSWER)
    options = {"continuous_usage_stats": True}  # implies include_usage
    with serving(model) as (client, url, _app):
        chunks, spent = streamed_usage(client, messages=USER, n=2, stream_options=options)
        ignored = httpx.post(
            f"{url}/v1/chat/completions",
            json={"messages": USER, "stream": True, "stream_options": {"include_usage": False, "x": 1}},
        )
    assert ignored.status_code == 200 and '"usage"' not in ignored.text  # unknown keys are ignored
    seen = [c.usage.model_dump() for c in chunks if c.usage is not None]
    assert len(seen) == len(chunks) > 2
    counts = [u["completion_tokens"] for u in seen]
    assert counts == sorted(counts) and counts[-1] == spent["completion_tokens"]
    assert all(u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] for u in seen)
    assert adds_up(spent) == {k: 2 * v for k, v in expected_buckets(smollm2_tokenizer, QWEN3_ANSWER).items()}


class FailingModel(ScriptedModel):
    """Replays its script, and fails after ``fail_after`` ids (a device that goes away)."""

    fail_after = 12

    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams | None = None,
        *,
        on_finish: FinishCallback | None = None,
        scheduler: Any = None,
    ) -> reactivex.Observable[int]:
        ids = super().generate(prompt_ids, params, scheduler=scheduler).pipe(ops.take(self.fail_after))
        return reactivex.concat(ids, reactivex.throw(RuntimeError("the device went away")))


def test_the_usage_chunk_goes_before_the_error_event(smollm2_tokenizer: Tokenizer) -> None:
    model = FailingModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_ANSWER)
    body = {"messages": USER, "stream": True, "stream_options": {"include_usage": True}}
    with serving(model) as (_client, url, _app):
        r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30)
    lines = (line for e in r.text.strip().split("\n\n") for line in e.split("\n"))
    events = [line[len("data: ") :] for line in lines if line.startswith("data: ")]
    *_, usage_event, error_event = (json.loads(e) for e in events)
    assert "error" in error_event and "[DONE]" not in events
    assert usage_event["choices"] == []
    assert usage_event["usage"]["completion_tokens"] == FailingModel.fail_after
    adds_up(usage_event["usage"])
