"""The chat page at ``/`` in headless Chromium: a question gets a streamed answer.

Needs Debian's ``chromium`` (``apt-get install -y chromium``); skipped when ``/usr/bin/chromium``
is absent. The page's ``?q=...&autorun=1`` submits the question on load; ``--dump-dom`` after a
virtual-time budget gives the DOM once the answer has streamed in.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import reactivex
from reactivex import operators as ops

from rxstream.backends import OnnxModel
from rxstream.server import create_app, run_in_thread

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="headless chromium not installed (/usr/bin/chromium; apt-get install -y chromium)",
    ),
]


class SlowModel:
    """The tiny model with a pause after each token, so the answer arrives in several deltas."""

    def __init__(self, inner: OnnxModel, delay: float) -> None:
        self.inner = inner
        self.delay = delay

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def generate(self, prompt_ids: list[int], **kw: Any) -> reactivex.Observable[int]:
        return self.inner.generate(prompt_ids, **kw).pipe(
            ops.do_action(on_next=lambda _t: time.sleep(self.delay))
        )


class Elements(HTMLParser):
    """Collects the attributes and text of the elements with an id (and of ``<body>``)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.attrs: dict[str, dict[str, str | None]] = {}
        self.text: dict[str, str] = {}
        self._stack: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        key = dict(attrs).get("id") or ("body" if tag == "body" else None)
        if key is not None:
            self.attrs[key] = dict(attrs)
            self.text.setdefault(key, "")
        self._stack.append(key)

    def handle_endtag(self, tag: str) -> None:
        if self._stack:
            self._stack.pop()

    def handle_data(self, data: str) -> None:
        if self._stack and self._stack[-1] is not None:
            self.text[self._stack[-1]] += data


@pytest.fixture(scope="module")
def server(model: OnnxModel) -> Iterator[str]:
    app = create_app(SlowModel(model, 0.02), model_name="tiny")
    with run_in_thread(app) as url:
        yield url


def dump_dom(url: str, budget_ms: int = 15000) -> str:
    with tempfile.TemporaryDirectory() as profile:
        result = subprocess.run(
            [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--no-first-run",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                f"--virtual-time-budget={budget_ms}",
                "--dump-dom",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_question_gets_a_streamed_answer(server: str) -> None:
    question = "Tell me about rivers"
    query = urlencode({"q": question, "autorun": "1", "max_tokens": "16", "temperature": "0"})
    dom = dump_dom(f"{server}/?{query}")
    page = Elements()
    page.feed(dom)
    assert page.attrs["body"].get("data-state") == "done", dom[-3000:]
    assert "answer-1" in page.attrs, "no answer element"
    answer = page.text["answer-1"]
    assert answer, "the answer is empty"
    assert int(page.attrs["answer-1"].get("data-deltas") or 0) >= 2, "the answer did not stream in pieces"
    reason = page.attrs["answer-1"].get("data-finish-reason")
    # the same question without streaming gives the same (greedy) answer
    body = {
        "messages": [{"role": "user", "content": question}],
        "max_tokens": 16,
        "temperature": 0,
    }
    expected = httpx.post(f"{server}/v1/chat/completions", json=body, timeout=30).json()["choices"][0]
    assert answer == expected["message"]["content"]
    assert reason == expected["finish_reason"]
    assert question in dom


def test_server_error_is_shown(server: str) -> None:
    query = urlencode({"q": "hi", "autorun": "1", "max_tokens": "100000"})
    dom = dump_dom(f"{server}/?{query}", budget_ms=5000)
    page = Elements()
    page.feed(dom)
    assert page.attrs["body"].get("data-state") == "error"
    assert "max_tokens" in page.text.get("error-1", "")


class EndlessModel(SlowModel):
    """Slow, and never ends by itself: only Stop (or the budget) ends the answer."""

    def generate(self, prompt_ids: list[int], **kw: Any) -> reactivex.Observable[int]:
        return self.inner.generate(prompt_ids, ignore_eos=True, **kw).pipe(
            ops.do_action(on_next=lambda _t: time.sleep(self.delay))
        )


def test_stop_button_cancels_the_generation(model: OnnxModel) -> None:
    from tests.browser import chromium, screenshot, wait_until

    app = create_app(EndlessModel(model, 0.03), model_name="tiny")
    stats = app.state.stats
    with run_in_thread(app) as url, chromium() as driver:
        driver.get(f"{url}/?" + urlencode({"q": "Keep talking", "autorun": "1", "max_tokens": "400"}))
        wait_until(
            lambda: driver.find_element("id", "model").text == "tiny", what="the model name in the header"
        )
        wait_until(
            lambda: int(driver.find_element("id", "answer-1").get_attribute("data-deltas") or 0) >= 3,
            what="a streaming answer",
        )
        assert stats.snapshot()["active"] == 1
        driver.find_element("id", "stop").click()
        wait_until(lambda: driver.find_element("tag name", "body").get_attribute("data-state") == "done")
        assert driver.find_element("id", "meta-1").text == "stopped"
        wait_until(lambda: stats.snapshot()["active"] == 0, timeout=10, what="the generation to end")
        snap = stats.snapshot()
        assert snap["finished"] == {"cancelled": 1} and snap["generated_tokens"] < 400
        shot = screenshot(driver, "web-page-stopped")
    assert shot.stat().st_size > 1000
