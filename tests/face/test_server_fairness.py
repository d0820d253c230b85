"""One client's rules never slow the others: the server against the report's costly rules, with
real sockets, the official ``openai`` client and the tiny model (batched)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import reactivex
from reactivex import operators as ops

import rxstream.operators
from rxstream.backends import BatchConfig, OnnxModel, build_tiny_model
from rxstream.server import ServerLimits, create_app, run_in_thread

SAMPLING: dict[str, Any] = {"temperature": 1.0, "seed": 99}

# the report's rules: each within the per-rule limits, costly together
REPORT_RULES = []
for k in range(8):
    REPORT_RULES.append({"regex": f"(?i)[\\w\\W]{{1,250}}z<c{k}>", "max_hold": 250})
    REPORT_RULES.append({"regex": f"(?:a|b|<c{k}>)*a(?:a|b|\\s){{12}}Q{k}", "max_hold": 250})


def admitted_rules(tag: str) -> list[dict[str, Any]]:
    """Rules the server accepts that are costly to build as the text streams (``tag`` makes them
    new: rules seen before are cached, and warm)."""
    return [{"regex": f"(?i)[\\w\\W]{{1,250}}z<{tag}{k}>", "max_hold": 250} for k in range(3)]


@pytest.fixture(scope="module")
def gqa_model(tmp_path_factory: pytest.TempPathFactory) -> OnnxModel:
    directory = build_tiny_model(tmp_path_factory.mktemp("tiny") / "gqa", seed=0, attention="gqa")
    return OnnxModel.load(directory, provider="cpu", batching=BatchConfig(max_batch=8))


@pytest.fixture(scope="module")
def server(gqa_model: OnnxModel) -> Iterator[str]:
    # the tiny model's answers are short: a small budget of states (and time enough that the
    # states decide, whatever the machine's load)
    limits = ServerLimits(max_regex_states=40, max_regex_seconds=30.0)
    with run_in_thread(create_app(gqa_model, model_name="tiny", limits=limits)) as url:
        yield url


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def test_rules_too_large_together_are_refused_at_once(server: str) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client(server).chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=8,
            extra_body={"rxstream": {"stop_regex": REPORT_RULES}},
        )
    body: Any = err.value.body
    assert "4096 automaton nodes" in body["message"] and body["param"].startswith("rxstream.stop_regex[")


def costly_on_this_text(tag: str) -> list[dict[str, Any]]:
    """Rules cheap on the server's sample text (their runs start only at control characters and
    U+FFFD, which it lacks) and costly on the tiny model's text, which has plenty."""
    return [
        {"regex": f"[\\x00-\\x08\\x0e-\\x1f\\ufffd][\\w\\W]{{1,250}}{tag}<{k}>", "max_hold": 250}
        for k in range(3)
    ]


def test_rules_costly_on_ordinary_text_are_refused_before_they_run(server: str) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client(server).completions.create(
            model="tiny",
            prompt="hi",
            max_tokens=8,
            extra_body={"rxstream": {"stop_regex": admitted_rules("probe")}},
        )
    body: Any = err.value.body
    assert "on a sample text" in body["message"] and "automaton states" in body["message"]
    assert body["code"] == "rules_too_costly"


def test_a_request_past_its_budget_fails_naming_its_rules(server: str) -> None:
    prompt = "Tell me a long story about a dragon."
    ext = {"rxstream": {"stop_regex": costly_on_this_text("budget")}}
    with pytest.raises(openai.BadRequestError) as err:
        client(server).completions.create(
            model="tiny", prompt=prompt, max_tokens=80, **SAMPLING, extra_body=ext
        )
    body: Any = err.value.body
    assert "automaton states" in body["message"] and body["param"] == "rxstream"
    assert "sample text" not in body["message"]  # it was admitted, and failed while streaming
    assert body["code"] == "rules_too_costly"
    ext = {"rxstream": {"stop_regex": costly_on_this_text("stream")}}
    chunks = client(server).completions.create(
        model="tiny", prompt=prompt, max_tokens=80, stream=True, **SAMPLING, extra_body=ext
    )
    with pytest.raises(openai.APIError, match="automaton states") as streamed:
        for _ in chunks:
            pass
    assert not isinstance(streamed.value, openai.BadRequestError)  # an error event in the stream


def test_a_plain_request_beside_costly_ones_gets_its_own_answer(server: str) -> None:
    prompt = "Once upon a time"

    async def one(c: openai.AsyncOpenAI, rules: list[dict[str, Any]] | None) -> str:
        extra = {"rxstream": {"stop_regex": rules}} if rules else {}
        try:
            stream = await c.completions.create(
                model="tiny", prompt=prompt, max_tokens=40, stream=True, **SAMPLING, extra_body=extra
            )
            return "".join([ch.choices[0].text async for ch in stream if ch.choices])
        except openai.APIError as exc:
            return f"error: {exc.message}"

    async def main(with_costly: bool) -> list[str]:
        async with openai.AsyncOpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0) as c:
            costly = [one(c, costly_on_this_text(f"beside{i}")) for i in range(3)] if with_costly else []
            return await asyncio.gather(one(c, None), *costly)

    alone = asyncio.run(main(False))[0]
    plain, *others = asyncio.run(main(True))
    assert plain == alone
    assert all(o.startswith("error: ") and "automaton states" in o for o in others)


def test_text_work_runs_off_the_batch_thread(
    server: str, gqa_model: OnnxModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch's worker emits every row's ids; each request's pipeline (detokenize, stop,
    replace) runs in a lane of the text pool, so one request's text work never holds a decode
    step. Checked for plain completions and for routed chats."""
    threads: list[str] = []
    real = rxstream.operators.text_pipeline

    def recording(*args: Any, **kwargs: Any) -> Any:
        pipeline = real(*args, **kwargs)

        def apply(source: reactivex.Observable[Any]) -> reactivex.Observable[Any]:
            seen = ops.do_action(on_next=lambda _: threads.append(threading.current_thread().name))
            return source.pipe(seen, pipeline)

        return apply

    monkeypatch.setattr(rxstream.operators, "text_pipeline", recording)
    text = client(server).completions.create(
        model="tiny",
        prompt="Once upon a time",
        max_tokens=20,
        **SAMPLING,
        extra_body={"rxstream": {"replace": {"a": "b"}}},
    )
    assert text.choices[0].text
    assert threads and set(threads) == {"rxstream-text"}, set(threads)


def test_routed_chat_text_runs_off_the_batch_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rxstream import operators

    directory = build_tiny_model(tmp_path / "gqa", seed=0, attention="gqa")
    model = OnnxModel.load(directory, provider="cpu", batching=BatchConfig(max_batch=4))
    threads: list[str] = []
    real = operators.chat_pipeline

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen = ops.do_action(on_next=lambda _: threads.append(threading.current_thread().name))
        pipeline = real(*args, **kwargs)
        return lambda ids: pipeline(ids.pipe(seen))

    monkeypatch.setattr(operators, "chat_pipeline", recording)
    app = create_app(model, model_name="tiny", reasoning_format="deepseek-r1")
    with run_in_thread(app) as url:
        reply = client(url).chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=20, **SAMPLING
        )
    assert reply.choices[0].finish_reason in ("length", "stop")
    assert threads and set(threads) == {"rxstream-text"}, set(threads)
