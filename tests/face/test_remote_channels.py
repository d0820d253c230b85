"""Channels of a remote stream, composed on the client: ``OpenAIBackend``'s raw completion text
through ``route`` and ``tool_calls`` gives the reasoning, answer and tool calls that the server's
own chat completion gives for the same generation (real sockets, a scripted model replaying a
recorded completion as SmolLM2's real token ids)."""

from __future__ import annotations

from typing import Any

from reactivex import operators as ops
from tokenizers import Tokenizer

from rxstream.backends.openai import OpenAIBackend
from rxstream.channels import Segment, ToolCallEnd
from rxstream.operators import channels, route, stop, tool_calls
from tests.face.test_server_channels import both, serving, wait_for
from tests.face.test_server_tool_calls import QWEN3_CALLS, TOOLS, USER, calls_without_ids
from tests.scripted_model import QWEN3_TEMPLATE, ScriptedModel


def test_remote_raw_completion_piped_into_route_and_tool_calls(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_CALLS)
    prompt = model.render_chat(USER, tools=TOOLS)  # the raw prompt the chat endpoint would build
    with serving(model) as (client, url, _app), OpenAIBackend(f"{url}/v1") as remote:
        served, _ = both(client, messages=USER, tools=TOOLS)
        items: list[Any] = (
            remote.completions(prompt, max_tokens=500)
            .pipe(route("qwen3", prompt=prompt), tool_calls(TOOLS, format="json"), ops.to_list())
            .run()
        )
    texts = {
        kind: "".join(
            i.text for i in items if isinstance(i, Segment) and i.event == "chunk" and i.channel == kind
        )
        for kind in ("reasoning", "content")
    }
    ends = [i for i in items if isinstance(i, ToolCallEnd)]
    assert texts["reasoning"] == served["reasoning"]
    assert texts["content"] == "\n\nLet me check both.\n\n"  # the raw answer text, framing included
    assert texts["content"].strip() == served["content"].strip()
    client_calls = [{"id": e.id, "name": e.name, "arguments": e.arguments_text} for e in ends]
    assert calls_without_ids(client_calls) == calls_without_ids(served["tool_calls"])


def test_remote_stop_on_the_answer_view_cancels_the_remote_generation(smollm2_tokenizer: Tokenizer) -> None:
    text = "<think>\nThe end is near.\n</think>\n\nThe end. " + "More words here. " * 200
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, text, delay=0.002)
    prompt = model.render_chat(USER)
    with serving(model) as (_client, url, _app), OpenAIBackend(f"{url}/v1") as remote:
        views = remote.completions(prompt, max_tokens=2000).pipe(
            route("qwen3", prompt=prompt), channels("reasoning", "content")
        )
        thoughts: list[str] = []
        views["reasoning"].subscribe(thoughts.append)
        answer = views["content"].pipe(stop(["end"]), ops.to_list()).run()
        assert wait_for(lambda: model.active == 0)
    assert "".join(thoughts) == "\nThe end is near.\n"  # "end" in the reasoning did not stop it
    assert "".join(answer) == "\n\nThe "
    assert model.cancelled == 1  # the stop reached the server through the closed HTTP stream
