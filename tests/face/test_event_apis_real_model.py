"""The Responses and Messages endpoints on the real SmolLM2 model, with each protocol's official
SDK: the message rebuilt from the stream equals the non-streamed one (greedy, plain text)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from rxstream.backends import OnnxModel
from rxstream.backends.convert import pull_model
from rxstream.server import create_app, run_in_thread
from tests.face.test_server_messages import shape
from tests.face.test_server_responses import reduced

pytestmark = [pytest.mark.slow, pytest.mark.network]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    model = OnnxModel.load(pull_model("smollm2", progress=False, quantization="fp32"), provider="cpu")
    with run_in_thread(create_app(model, model_name="smollm2")) as base:
        yield base


def test_responses_stream_equals_create(url: str) -> None:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    request: dict[str, Any] = {
        "model": "smollm2",
        "input": "What is the capital of France? One short sentence.",
        "max_output_tokens": 24,
        "temperature": 0,
    }
    whole = client.responses.create(**request)
    with client.responses.stream(**request) as stream:
        events = [e.type for e in stream]
        final = stream.get_final_response()
    assert reduced(whole) == reduced(final)
    assert "Paris" in whole.output_text
    assert events[0] == "response.created" and events[-1] == "response.completed"
    assert "response.output_text.delta" in events


def test_messages_stream_equals_create(url: str) -> None:
    client = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
    request: dict[str, Any] = {
        "model": "smollm2",
        "max_tokens": 24,
        "messages": [{"role": "user", "content": "What is the capital of France? One short sentence."}],
        "extra_body": {"temperature": 0},
    }
    whole = client.messages.create(**request)
    with client.messages.stream(**request) as stream:
        final = stream.get_final_message()
    assert shape(whole) == shape(final)
    assert "Paris" in "".join(b.text for b in whole.content if b.type == "text")
