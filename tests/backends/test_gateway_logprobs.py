"""Log-probabilities through the gateway: ``GatewayModel.generate(..., logprobs=k)`` in front of an
``rxstream serve`` engine (its ``logprobs`` with ``return_tokens_as_token_ids``) emits what the
local model emits, and the served gateway answers ``logprobs`` requests as the engine does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from reactivex import operators as ops

from rxstream import FinishRecorder
from rxstream.backends import GatewayModel, OnnxModel
from rxstream.server import ServerLimits, create_app, run_in_thread

from .test_gateway import CHAT, streamed


@pytest.fixture(scope="module")
def gateway(model: OnnxModel, tiny_dir: Path) -> Iterator[tuple[str, str, GatewayModel]]:
    """An engine and a served gateway in front of it: (engine URL, gateway URL, gateway model)."""
    engine = create_app(model, model_name="tiny", limits=ServerLimits(max_concurrency=4))
    with run_in_thread(engine) as url, GatewayModel(url, tiny_dir, health_interval=None) as gw_model:
        app = create_app(gw_model, model_name="tiny", limits=ServerLimits(max_concurrency=4))
        with run_in_thread(app) as gw:
            yield url, gw, gw_model


@pytest.mark.parametrize("k", [0, 1, 5, 20])
def test_generate_with_logprobs_emits_what_the_local_model_does(
    gateway: tuple[str, str, GatewayModel], model: OnnxModel, k: int
) -> None:
    _, _, gw_model = gateway
    prompt = model.encode_chat(CHAT)
    for sampling in ({"temperature": 0.0}, {"temperature": 1.0, "seed": 11}):
        rec = FinishRecorder()
        local = model.generate(prompt, max_new_tokens=25, logprobs=k, **sampling).pipe(ops.to_list()).run()
        remote = (
            gw_model.generate(prompt, max_new_tokens=25, logprobs=k, on_finish=rec, **sampling)
            .pipe(ops.to_list())
            .run()
        )
        assert remote == local  # ids, log-probabilities and alternatives (ids), one piece per id
        assert all(len(p.top_logprobs[0]) == k for p in remote if p.top_logprobs is not None)
        assert rec.finish is not None


def test_served_logprobs_through_the_gateway_equal_the_engine(gateway: tuple[str, str, GatewayModel]) -> None:
    url, gw, _ = gateway
    for path, body in (
        ("/v1/completions", {"prompt": "Once upon a time", "logprobs": 3}),
        ("/v1/chat/completions", {"messages": CHAT, "logprobs": True, "top_logprobs": 4}),
    ):
        body = {**body, "max_tokens": 30, "temperature": 0}
        direct = httpx.post(f"{url}{path}", json=body, timeout=60).json()["choices"][0]
        through = httpx.post(f"{gw}{path}", json=body, timeout=60).json()["choices"][0]
        assert through["logprobs"] == direct["logprobs"] and through["logprobs"]
        assert through.get("text") == direct.get("text") and through.get("message") == direct.get("message")
        _, d_events = streamed(url, path, body)
        _, g_events = streamed(gw, path, body)

        def lp(events: list[dict[str, Any]]) -> list[Any]:
            return [c.get("logprobs") for e in events for c in e.get("choices", [])]

        assert lp(g_events) == lp(d_events)


def test_tokens_as_token_ids_on_the_engine(gateway: tuple[str, str, GatewayModel], model: OnnxModel) -> None:
    url, _, _ = gateway
    body = {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0, "logprobs": 2}
    plain = httpx.post(f"{url}/v1/completions", json=body, timeout=60).json()["choices"][0]["logprobs"]
    named = httpx.post(
        f"{url}/v1/completions", json={**body, "return_tokens_as_token_ids": True}, timeout=60
    ).json()["choices"][0]["logprobs"]
    ids = (
        model.generate(model.encode("Once upon a time"), max_new_tokens=12, temperature=0)
        .pipe(ops.to_list())
        .run()
    )
    assert named["tokens"] == [f"token_id:{i}" for i in ids]
    assert named["token_logprobs"] == plain["token_logprobs"] and named["text_offset"] == plain["text_offset"]
    assert all(all(key.startswith("token_id:") for key in top) for top in named["top_logprobs"])
    assert [len(t) for t in named["top_logprobs"]] == [len(t) for t in plain["top_logprobs"]]
    bad = httpx.post(f"{url}/v1/completions", json={**body, "return_tokens_as_token_ids": 1}, timeout=60)
    assert bad.status_code == 400 and "return_tokens_as_token_ids" in bad.json()["error"]["message"]


def test_bad_logprobs_argument(gateway: tuple[str, str, GatewayModel]) -> None:
    _, _, gw_model = gateway
    for bad in (-1, 21, True, 1.5):
        with pytest.raises(ValueError, match="logprobs must be None or an int from 0 to 20"):
            gw_model.generate([5, 6], logprobs=bad)
