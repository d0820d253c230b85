"""The gateway (:class:`rxstream.backends.GatewayModel`) in front of real engines: ``rxstream
serve`` apps on sockets running the tiny ONNX model, token ids on the wire; the gateway served by
``rxstream serve`` too, as ``rxstream serve --upstream`` does."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import reactivex
from reactivex import operators as ops

from rxstream import FinishReason, FinishRecorder
from rxstream.backends import GatewayError, GatewayModel, OnnxModel
from rxstream.server import ServerLimits, create_app, run_in_thread

CHAT = [{"role": "user", "content": "Tell me a story about a cat"}]


class SlowModel:
    """The tiny model as an engine that takes its time (a pause after each id), ignores EOS, and
    optionally fails after some ids: what the engine does, not what the gateway does."""

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


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


@pytest.fixture(scope="module")
def engines(model: OnnxModel) -> Iterator[list[tuple[str, Any]]]:
    """Three engines (``rxstream serve`` apps) on the tiny model."""
    with ExitStack() as stack:
        out = []
        for i in range(3):
            app = create_app(model, model_name="tiny", limits=ServerLimits(max_concurrency=4))
            out.append((stack.enter_context(run_in_thread(app)), app))
            del i
        yield out


def gateway_app(gateway: GatewayModel) -> Any:
    return create_app(gateway, model_name="tiny", limits=ServerLimits(max_concurrency=8))


def post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{url}{path}", json=body, timeout=60)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def streamed(url: str, path: str, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The text of a streamed choice 0, and its events (an ``error`` event among them)."""
    events = []
    with httpx.stream("POST", f"{url}{path}", json={**body, "stream": True}, timeout=60) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[6:]))
    text = ""
    for e in events:
        for c in e.get("choices", []):
            text += c.get("text") or (c.get("delta") or {}).get("content") or ""
    return text, events


def started(app: Any) -> int:
    return int(app.state.stats.snapshot()["started"])


# ------------------------------------------------------------------------------------------------
def test_generate_emits_the_engine_ids(
    engines: list[tuple[str, Any]], model: OnnxModel, tiny_dir: Path
) -> None:
    url, _ = engines[0]
    with GatewayModel(url, tiny_dir, health_interval=None) as gateway:
        prompt = gateway.encode_chat(CHAT)
        assert prompt == model.encode_chat(CHAT)
        assert gateway.chat_template == model.chat_template
        assert gateway.eos_token_ids == model.eos_token_ids
        assert gateway.context_length == model.context_length
        for sampling in ({"temperature": 0.0}, {"temperature": 1.0, "seed": 3, "top_k": 20, "top_p": 0.9}):
            rec, direct = FinishRecorder(), FinishRecorder()
            ids = (
                gateway.generate(prompt, max_new_tokens=40, on_finish=rec, **sampling)
                .pipe(ops.to_list())
                .run()
            )
            expected = (
                model.generate(prompt, max_new_tokens=40, on_finish=direct, **sampling)
                .pipe(ops.to_list())
                .run()
            )
            assert ids == expected
            assert rec.finish is not None and direct.finish is not None
            assert rec.finish.reason == direct.finish.reason


@pytest.mark.parametrize("replicas", [1, 3])
def test_served_gateway_equals_the_engine(
    engines: list[tuple[str, Any]], tiny_dir: Path, replicas: int
) -> None:
    urls = [u for u, _ in engines[:replicas]]
    before = [started(app) for _, app in engines[:replicas]]
    prompts = ["Once upon a time", "The weather", "In a galaxy far away", "Lists:", "Hello", "Why"]
    with (
        GatewayModel(urls, tiny_dir, health_interval=None) as gateway,
        run_in_thread(gateway_app(gateway)) as gw,
    ):
        results: dict[str, tuple[str, str]] = {}

        def one(prompt: str) -> None:
            body = {"prompt": prompt, "max_tokens": 30, "temperature": 0}
            direct = post(urls[0], "/v1/completions", body)["choices"][0]["text"]
            through, _ = streamed(gw, "/v1/completions", body)
            results[prompt] = (direct, through)

        threads = [threading.Thread(target=one, args=(p,)) for p in prompts]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(results) == len(prompts)
        for direct, through in results.values():
            assert through == direct
        chat = {"messages": CHAT, "max_tokens": 30, "temperature": 0}
        assert (
            post(gw, "/v1/chat/completions", chat)["choices"][0]["message"]
            == post(urls[0], "/v1/chat/completions", chat)["choices"][0]["message"]
        )
        stop_body = {"prompt": "Once upon a time", "max_tokens": 30, "temperature": 0}
        text = post(urls[0], "/v1/completions", stop_body)["choices"][0]["text"]
        stop = text[10:13]
        stopped = post(gw, "/v1/completions", {**stop_body, "stop": [stop]})["choices"][0]
        assert stopped["text"] == text[: text.index(stop)] and stopped["finish_reason"] == "stop"
    if replicas == 3:  # the least loaded replica first: every replica took some of them
        assert all(started(app) > b for (_, app), b in zip(engines, before, strict=True))


def test_client_disconnect_cancels_the_engine_generation(model: OnnxModel, tiny_dir: Path) -> None:
    engine = create_app(SlowModel(model, 0.02), model_name="slow", limits=ServerLimits(max_concurrency=2))
    with run_in_thread(engine) as url, GatewayModel(url, tiny_dir, health_interval=None) as gateway:
        with run_in_thread(gateway_app(gateway)) as gw, httpx.Client(timeout=10) as client:
            body = {"prompt": "Go on and on", "max_tokens": 400, "stream": True}
            with client.stream("POST", f"{gw}/v1/completions", json=body) as r:
                lines = r.iter_lines()
                got = 0
                for line in lines:
                    got += line.startswith("data: ")
                    if got >= 3:
                        break
                assert engine.state.stats.snapshot()["active"] == 1
        assert wait_for(lambda: engine.state.stats.snapshot()["finished"].get("cancelled") == 1), (
            engine.state.stats.snapshot()
        )
        assert wait_for(lambda: model.active_generations == 0)
        assert engine.state.stats.snapshot()["generated_tokens"] < 200
        assert gateway.replica_stats()[0]["in_flight"] == 0


def test_dispose_closes_the_request_at_once(model: OnnxModel, tiny_dir: Path) -> None:
    engine = create_app(SlowModel(model, 0.02), model_name="slow")
    with run_in_thread(engine) as url, GatewayModel(url, tiny_dir, health_interval=None) as gateway:
        got = threading.Event()
        rec = FinishRecorder()
        ids: list[int] = []

        def on_next(i: int) -> None:
            ids.append(i)
            if len(ids) >= 2:
                got.set()

        sub = gateway.generate(model.encode("Keep going"), max_new_tokens=400, on_finish=rec).subscribe(
            on_next
        )
        assert got.wait(10)
        sub.dispose()
        assert rec.finish is not None and rec.finish.reason is FinishReason.CANCELLED
        assert wait_for(lambda: engine.state.stats.snapshot()["finished"].get("cancelled") == 1)
        assert wait_for(lambda: model.active_generations == 0)


def test_engine_errors_are_clear_client_errors(model: OnnxModel, tiny_dir: Path) -> None:
    refusing = create_app(model, model_name="tiny", limits=ServerLimits(max_tokens=20))
    broken = create_app(SlowModel(model, 0.0, fail_after=5), model_name="tiny")
    with run_in_thread(refusing) as r_url, run_in_thread(broken) as b_url:
        with (
            GatewayModel(r_url, tiny_dir, health_interval=None) as gateway,
            run_in_thread(gateway_app(gateway)) as gw,
        ):
            _, events = streamed(gw, "/v1/completions", {"prompt": "Hi", "max_tokens": 50})
            message = events[-1]["error"]["message"]
            assert f"the engine at {r_url} failed: HTTP 400:" in message and "max_tokens" in message
            assert "\n" not in message
            answer = httpx.post(f"{gw}/v1/completions", json={"prompt": "Hi", "max_tokens": 50}, timeout=30)
            # the engine's refusal is the client's: its 400, one line naming the engine
            assert answer.status_code == 400 and "HTTP 400" in answer.json()["error"]["message"]
            assert answer.json()["error"]["code"] == "upstream_error"
        with (
            GatewayModel(b_url, tiny_dir, health_interval=None) as gateway,
            run_in_thread(gateway_app(gateway)) as gw,
        ):
            text, events = streamed(gw, "/v1/completions", {"prompt": "Hi", "max_tokens": 50})
            message = events[-1]["error"]["message"]
            assert "failed mid-stream" in message and "caught fire" in message
            assert text  # the ids before the failure were passed on, once
            # an error event is the engine's answer: the replica stays in rotation
            assert gateway.replica_stats()[0]["healthy"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_unreachable_replica_is_retried_ejected_and_readmitted(
    engines: list[tuple[str, Any]], model: OnnxModel, tiny_dir: Path
) -> None:
    port = free_port()
    dead = f"http://127.0.0.1:{port}"
    live, _ = engines[0]
    with GatewayModel([dead, live], tiny_dir, health_interval=None) as gateway:
        prompt = model.encode("Once upon a time")
        expected = model.generate(prompt, max_new_tokens=20).pipe(ops.to_list()).run()
        # the dead replica is picked first (both idle, listed first): refused, retried on the live one
        assert gateway.generate(prompt, max_new_tokens=20).pipe(ops.to_list()).run() == expected
        assert [s["healthy"] for s in gateway.replica_stats()] == [False, True]
        assert "ConnectError" in (gateway.replica_stats()[0]["last_error"] or "")
        gateway.check_health()
        assert [s["healthy"] for s in gateway.replica_stats()] == [False, True]
        app = create_app(model, model_name="tiny")
        with run_in_thread(app, port=port):
            gateway.check_health()
            assert [s["healthy"] for s in gateway.replica_stats()] == [True, True]
            for _ in range(2):
                assert gateway.generate(prompt, max_new_tokens=20).pipe(ops.to_list()).run() == expected
            assert started(app) == 1  # readmitted: back in the rotation


def test_no_engine_left_is_one_error(tiny_dir: Path) -> None:
    dead = [f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"]
    with GatewayModel(dead, tiny_dir, health_interval=None) as gateway:
        rec = FinishRecorder()
        with pytest.raises(GatewayError, match="no engine could take the request") as info:
            gateway.generate([5, 6, 7], on_finish=rec).pipe(ops.to_list()).run()
        assert dead[0] in str(info.value) and dead[1] in str(info.value) and "\n" not in str(info.value)
        assert rec.finish is not None and rec.finish.reason is FinishReason.ERROR


def test_health_checks_run_in_the_background(engines: list[tuple[str, Any]], tiny_dir: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with GatewayModel([engines[0][0], dead], tiny_dir, health_interval=0.05) as gateway:
        assert wait_for(lambda: not gateway.replica_stats()[1]["healthy"])
        assert gateway.replica_stats()[0]["healthy"]


def test_bad_arguments(tiny_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="an http"):
        GatewayModel("localhost:8000", tiny_dir, health_interval=None)
    with pytest.raises(FileNotFoundError, match=r"no tokenizer\.json"):
        GatewayModel("http://127.0.0.1:1", tmp_path, health_interval=None)
    with pytest.raises(ValueError, match="twice"):
        GatewayModel(["http://a:1/v1", "http://a:1"], tiny_dir, health_interval=None)


def test_health_lists_the_upstream_engines(model: OnnxModel, tiny_dir: Path) -> None:
    """A gateway's ``/health`` shows each engine: its URL, health and requests in flight; a model
    that is not a gateway has no ``upstream`` entry."""
    with run_in_thread(create_app(model, model_name="tiny")) as engine:
        assert "upstream" not in httpx.get(f"{engine}/health", timeout=30).json()
        with (
            GatewayModel(engine, tiny_dir, health_interval=None) as gateway,
            run_in_thread(gateway_app(gateway)) as gw,
        ):
            post(gw, "/v1/completions", {"prompt": "Hi", "max_tokens": 3})
            upstream = httpx.get(f"{gw}/health", timeout=30).json()["upstream"]
            assert [(u["url"], u["healthy"], u["in_flight"]) for u in upstream] == [(engine, True, 0)]
