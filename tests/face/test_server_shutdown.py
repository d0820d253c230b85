"""A server stopped mid-stream tells each client why its answer ended, in each API's own error
shape, through the official SDKs: Chat Completions (an ``error`` event, code
``server_shutdown``: ``openai.APIError``), Responses (``response.failed`` with that code) and
Messages (an ``error`` event: ``anthropic`` raises). Never a finished-looking answer."""

from __future__ import annotations

import threading
from typing import Any

import openai
import pytest
from tokenizers import Tokenizer

from tests.face.test_server_channels import serving
from tests.scripted_model import CHATML, ScriptedModel

anthropic = pytest.importorskip("anthropic")

USER = [{"role": "user", "content": "Tell me a long story."}]
LONG = "Once upon a time " * 400


def stop_after(app: Any, seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, app.state.begin_shutdown)
    timer.start()
    return timer


def test_chat_completions_stream_ends_with_a_server_shutdown_error(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, CHATML, LONG, delay=0.005)
    with serving(model) as (client, _url, app):
        stream = client.chat.completions.create(model="scripted", messages=USER, stream=True)
        text: list[str] = []
        timer = stop_after(app, 0.3)
        with pytest.raises(openai.APIError, match="shutting down") as info:
            for chunk in stream:
                if chunk.choices:
                    assert chunk.choices[0].finish_reason is None  # never a finish
                    text.append(chunk.choices[0].delta.content or "")
        timer.join()
    assert info.value.code == "server_shutdown"
    assert 0 < len("".join(text)) < len(LONG)


def test_responses_stream_fails_with_server_shutdown(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, CHATML, LONG, delay=0.005)
    with serving(model) as (client, _url, app):
        timer = stop_after(app, 0.3)
        events = list(client.responses.create(model="scripted", input="A story.", stream=True))
        timer.join()
    last = events[-1]
    assert last.type == "response.failed"
    assert last.response.error is not None and last.response.error.code == "server_shutdown"
    assert any(e.type == "response.output_text.delta" for e in events)


def test_messages_stream_ends_with_an_error_event(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, CHATML, LONG, delay=0.005)
    with serving(model) as (_client, url, app):
        client = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
        timer = stop_after(app, 0.3)
        with pytest.raises(anthropic.APIStatusError, match="shutting down"):
            with client.messages.stream(model="scripted", max_tokens=2000, messages=USER) as stream:
                for _ in stream:
                    pass
        timer.join()


def test_a_request_not_streamed_gets_a_503_naming_the_shutdown(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, CHATML, LONG, delay=0.005)
    with serving(model) as (client, _url, app):
        timer = stop_after(app, 0.3)
        with pytest.raises(openai.InternalServerError, match="shutting down") as info:
            client.chat.completions.create(model="scripted", messages=USER)
        timer.join()
    assert info.value.status_code == 503 and info.value.code == "server_shutdown"
