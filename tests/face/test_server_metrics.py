"""``GET /metrics`` of ``rxstream serve``: real sockets, the tiny model, the official client and
Prometheus' own parser; the counters agree with the requests sent."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tokenizers import Tokenizer

from rxstream.backends import GatewayModel, OnnxModel
from rxstream.server import ServerLimits, create_app, run_in_thread
from tests.scripted_model import CHATML, ScriptedModel

from .test_server import SlowModel


def scrape(url: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Every sample of ``/metrics``: name -> labels -> value."""
    r = httpx.get(f"{url}/metrics", timeout=10)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def value(samples: dict[str, dict[Any, float]], name: str, **labels: str) -> float:
    key = tuple(sorted(labels.items()))
    return samples.get(name, {}).get(key, 0.0)


@pytest.fixture(scope="module")
def served(model: OnnxModel) -> Iterator[str]:
    # each token 5 ms late and no end token: every generation runs to its budget or its client
    # no grace period: a client that leaves aborts its generation at once
    limits = ServerLimits(max_concurrency=4, resume_grace=0)
    app = create_app(SlowModel(model, 0.005), model_name="tiny", limits=limits)
    with run_in_thread(app) as url:
        yield url


def test_metrics_parse_and_count_the_requests(served: str) -> None:
    before = scrape(served)
    client = openai.OpenAI(base_url=f"{served}/v1", api_key="x", max_retries=0)
    lengths = 0
    for i in range(3):  # streamed, to their budget
        stream = client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": f"hello {i}"}],
            max_tokens=6,
            stream=True,
            stream_options={"include_usage": True},
        )
        usage = [c.usage for c in stream if c.usage is not None][-1]
        assert usage is not None and usage.completion_tokens == 6
        lengths += 1
    done = client.completions.create(model="tiny", prompt="abc", max_tokens=4)
    assert done.usage is not None
    prompt_tokens = done.usage.prompt_tokens  # and the chats' prompts: more
    # a client that leaves mid-stream: its generation is an abort
    with (
        httpx.Client(timeout=10) as http,
        http.stream(
            "POST",
            f"{served}/v1/completions",
            json={"prompt": "go", "max_tokens": 400, "stream": True},
        ) as r,
    ):
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                break
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        after = scrape(served)
        if value(after, "vllm:request_success_total", model_name="tiny", finished_reason="abort") > value(
            before, "vllm:request_success_total", model_name="tiny", finished_reason="abort"
        ):
            break
        time.sleep(0.05)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("vllm:request_success_total", model_name="tiny", finished_reason="length") == lengths + 1
    assert delta("vllm:request_success_total", model_name="tiny", finished_reason="abort") == 1
    assert (
        delta("rxstream:generations_finished_total", model_name="tiny", finish_reason="length") == lengths + 1
    )
    assert delta("rxstream:generations_finished_total", model_name="tiny", finish_reason="cancelled") == 1
    assert delta("vllm:time_to_first_token_seconds_count", model_name="tiny") == lengths + 2
    assert delta("vllm:e2e_request_latency_seconds_count", model_name="tiny") == lengths + 2
    generated = delta("vllm:generation_tokens_total", model_name="tiny")
    assert generated >= 3 * 6 + 4 + 1
    assert delta("vllm:prompt_tokens_total", model_name="tiny") > prompt_tokens
    # one gap per delta after the first of each generation: the three chats gave 5 each at most
    gaps = delta("vllm:inter_token_latency_seconds_count", model_name="tiny")
    assert 3 <= gaps <= generated
    assert value(after, "vllm:num_requests_running", model_name="tiny") == 0
    assert value(after, "vllm:num_requests_waiting", model_name="tiny") == 0
    # the histograms' buckets are cumulative and end with every observation
    buckets = {k: v for k, v in after["vllm:time_to_first_token_seconds_bucket"].items()}
    inf = next(v for k, v in buckets.items() if ("le", "+Inf") in k)
    assert inf == value(after, "vllm:time_to_first_token_seconds_count", model_name="tiny")
    # every generation's pipeline was metered: its detokenize's held time is one observation
    assert (
        delta("rxstream:operator_held_seconds_count", model_name="tiny", operator="detokenize") == lengths + 2
    )


def test_held_back_time_is_reported_per_operator(smollm2_tokenizer: Tokenizer) -> None:
    text = "the rest of the week we were there"
    model = ScriptedModel(smollm2_tokenizer, CHATML, text, delay=0.01)
    with run_in_thread(create_app(model, model_name="tiny")) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
        before = scrape(url)
        for _ in range(3):  # "e\x00" never matches; each token that ends in "e" starts it
            reply = client.completions.create(model="tiny", prompt="go", max_tokens=40, stop=["e\x00"])
            assert reply.choices[0].text == text
        after = scrape(url)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    # a hold begins at a token that ends in "e" and lasts while the tokens after it do too
    ends = [smollm2_tokenizer.decode([i]).endswith("e") for i in smollm2_tokenizer.encode(text).ids]
    runs = sum(1 for k, e in enumerate(ends) if e and (k == 0 or not ends[k - 1]))
    assert runs >= 3
    assert delta("rxstream:operator_held_seconds_count", model_name="tiny", operator="stop") == 3
    assert delta("rxstream:operator_holds_total", model_name="tiny", operator="stop") == 3 * runs
    # each held token held for about one token's time (10 ms a token)
    held = delta("rxstream:operator_held_seconds_sum", model_name="tiny", operator="stop")
    assert 3 * sum(ends[:-1]) * 0.005 < held < 3 * sum(ends) * 0.5


def test_a_batching_server_reports_its_kv_use(model: OnnxModel) -> None:
    app = create_app(model, model_name="tiny", batching=True)
    with run_in_thread(app) as url:
        openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0).completions.create(
            model="tiny", prompt="abc", max_tokens=3
        )
        samples = scrape(url)
    kv = samples["vllm:kv_cache_usage_perc"]
    assert len(kv) == 1 and 0.0 <= next(iter(kv.values())) <= 1.0
    assert "rxstream:prefix_cache_hits" in samples


def test_metrics_of_a_gateway_name_its_engines(model: OnnxModel, tiny_dir: Path) -> None:
    engine_app = create_app(model, model_name="tiny")
    with run_in_thread(engine_app) as engine:
        gateway = GatewayModel(engine, tiny_dir, health_interval=None)
        with run_in_thread(create_app(gateway, model_name="gw")) as url:
            client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
            client.completions.create(model="gw", prompt="abc", max_tokens=3)
            samples = scrape(url)
            assert value(samples, "rxstream:upstream_healthy", upstream=engine) == 1.0
            assert value(samples, "rxstream:upstream_requests_in_flight", upstream=engine) == 0.0
            assert value(samples, "vllm:e2e_request_latency_seconds_count", model_name="gw") == 1
        gateway.close()
