"""With default settings, every face answers the flagship question right on the real default
model: the API (official client, no sampling fields) and the web page (empty sampling fields),
both against the real ``rxstream serve`` process. (The CLI: tests/project/test_docs.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlencode

import openai
import pytest

from tests.serve_process import ServeProcess, serve_process

pytestmark = [pytest.mark.slow, pytest.mark.network]

QUESTION = "What is the capital of France?"
ANSWER = "The capital of France is Paris."


@pytest.fixture(scope="module")
def server() -> Iterator[ServeProcess]:
    with serve_process("smollm2", start_timeout=600) as sp:
        yield sp


def test_api_defaults_answer_right(server: ServeProcess) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
    model = client.models.list().data[0].id
    reply = client.chat.completions.create(model=model, messages=[{"role": "user", "content": QUESTION}])
    assert reply.choices[0].message.content == ANSWER
    assert reply.choices[0].finish_reason == "stop"
    streamed = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": QUESTION}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == ANSWER


@pytest.mark.browser
def test_page_defaults_answer_right(server: ServeProcess) -> None:
    from tests.browser import chromium, screenshot, wait_until

    with chromium() as driver:
        driver.get(f"{server.url}/?" + urlencode({"q": QUESTION, "autorun": "1"}))
        wait_until(lambda: driver.find_element("tag name", "body").get_attribute("data-state") == "done")
        assert driver.find_element("id", "answer-1").text == ANSWER
        assert driver.find_element("id", "meta-1").text.startswith("finish: eos")
        assert driver.find_element("id", "model").text == "smollm2"
        assert driver.find_element("id", "temperature").get_attribute("value") == ""
        screenshot(driver, "web-page-default-answer")
    assert server.wait_idle()["active"] == 0
