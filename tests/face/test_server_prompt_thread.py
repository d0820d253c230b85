"""Where a chat request's template runs: a small plain chat on the event loop (a thread hop cost a
lone client's first token more than the template does), anything larger, or with tools or a
constrained answer, off it, so no request holds the others' events for long."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rxstream.backends import OnnxModel
from rxstream.server import _prompt as prompt_module
from rxstream.server import create_app, run_in_thread
from rxstream.server._prompt import INLINE_PROMPT_BYTES


@pytest.fixture
def where(model: OnnxModel, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, list[str]]]:
    threads: list[str] = []
    real = prompt_module.plan_chat

    def recording(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(prompt_module, "plan_chat", recording)
    monkeypatch.setattr(prompt_module, "INLINE_PROMPT_BYTES", 400)  # the tiny model's context is short
    with run_in_thread(create_app(model, model_name="tiny")) as url:
        yield url, threads


def chat(url: str, **extra: Any) -> dict[str, Any]:
    body = {"model": "tiny", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}], **extra}
    response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_a_small_plain_chat_is_templated_on_the_event_loop_a_large_one_off_it(
    where: tuple[str, list[str]],
) -> None:
    url, threads = where
    small = chat(url)
    loop_thread = threads[-1]
    assert not loop_thread.startswith("asyncio_")  # not the default executor's threads
    assert INLINE_PROMPT_BYTES >= 4096  # the real bound; 400 in these tests
    long = "word " * 100
    large = chat(url, messages=[{"role": "user", "content": long}], max_tokens=2)
    assert threads[-1].startswith("asyncio_")
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    chat(url, tools=[tool])
    assert threads[-1].startswith("asyncio_")
    chat(url, response_format={"type": "json_object"})
    assert threads[-1].startswith("asyncio_")
    assert small["choices"][0]["message"]["content"] is not None and large["choices"]
