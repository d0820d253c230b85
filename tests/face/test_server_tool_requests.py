"""Tool fields of chat requests: ``tools``, ``tool_choice``, ``parallel_tool_calls``, assistant
``tool_calls`` and ``tool`` messages are checked; every mistake is a one-line 400 naming the
field, and no generation starts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tokenizers import Tokenizer

from rxstream.server import ServerLimits, create_app, run_in_thread
from tests.scripted_model import CHATML, ScriptedModel

USER = [{"role": "user", "content": "Weather in Paris?"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}


@pytest.fixture(scope="module")
def server(smollm2_tokenizer: Tokenizer) -> Iterator[tuple[str, Any]]:
    model = ScriptedModel(smollm2_tokenizer, CHATML, "It is sunny.")
    app = create_app(model, model_name="scripted", limits=ServerLimits(max_tools=3, max_prompt_chars=5000))
    with run_in_thread(app) as url:
        yield url, app


def fn(**fields: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "f", **fields}}


def then(*messages: dict[str, Any]) -> dict[str, Any]:
    """A request whose messages are the user's question, then ``messages``."""
    return {"messages": [*USER, *messages]}


def calling(arguments: Any) -> dict[str, Any]:
    """An assistant message calling ``f`` with ``arguments``."""
    return {"role": "assistant", "tool_calls": [{**CALL, "function": {"name": "f", "arguments": arguments}}]}


BAD: list[tuple[dict[str, Any], str]] = [
    ({"tools": {"a": 1}}, "tools"),
    ({"tools": [5]}, "tools[0]"),
    ({"tools": [{"type": "retrieval"}]}, "tools[0].type"),
    ({"tools": [{"type": "function"}]}, "tools[0].function"),
    ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools[0].function.name"),
    ({"tools": [{"type": "function", "function": {"name": "x" * 65}}]}, "tools[0].function.name"),
    ({"tools": [fn(), fn()]}, "tools[1].function.name"),
    ({"tools": [fn(description=3)]}, "tools[0].function.description"),
    ({"tools": [fn(parameters="object")]}, "tools[0].function.parameters"),
    ({"tools": [fn(parameters={"type": "array"})]}, "tools[0].function.parameters"),
    ({"tools": [fn(parameters={"type": "object", "properties": {"x": {"type": "float"}}})]},
     "tools[0].function.parameters.properties.x.type"),
    ({"tools": [fn(parameters={"type": "object", "required": "x"})]},
     "tools[0].function.parameters.required"),
    ({"tools": [fn(strict="yes")]}, "tools[0].function.strict"),
    ({"tools": [fn(returns=1)]}, "tools[0].function"),
    ({"tools": [{"type": "function", "function": {"name": "f"}, "extra": 1}]}, "tools[0]"),
    ({"tools": [fn(), WEATHER, fn(name="g"), fn(name="h")]}, "tools"),  # more than max_tools
    ({"tools": [fn(description="x" * 6000)]}, "tools"),  # over max_prompt_chars with the messages
    ({"tool_choice": "auto"}, "tool_choice"),  # no tools
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function"}}, "tool_choice"),
    ({"tools": [WEATHER], "parallel_tool_calls": "no"}, "parallel_tool_calls"),
    (then({"role": "tool", "content": "x", "tool_call_id": "call_1"}), "messages[1].tool_call_id"),
    (then({"role": "tool", "content": "x"}), "messages[1].tool_call_id"),
    (then({"role": "assistant", "content": None}), "messages[1].content"),
    (then({"role": "assistant", "content": None, "tool_calls": []}), "messages[1].tool_calls"),
    (then({"role": "assistant", "tool_calls": [{**CALL, "id": ""}]}), "messages[1].tool_calls[0].id"),
    (then(calling({})), "messages[1].tool_calls[0].function.arguments"),
    (then(calling("{x")), "messages[1].tool_calls[0].function.arguments"),
    (then(calling("[1]")), "messages[1].tool_calls[0].function.arguments"),
    ({"messages": [{"role": "user", "content": "x", "tool_calls": [CALL]}]}, "messages[0].tool_calls"),
    ({"messages": [{"role": "user", "content": "x", "tool_call_id": "a"}]}, "messages[0].tool_call_id"),
    ({"messages": [{"role": "user", "content": "x", "name": 3}]}, "messages[0].name"),
    (
        {
            "messages": [
                *USER,
                {"role": "assistant", "tool_calls": [CALL]},
                {"role": "user", "content": "and?"},
                {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},  # not after the call
            ]
        },
        "messages[3].tool_call_id",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("fields", "param"), BAD, ids=[p for _, p in BAD])
def test_bad_tool_fields_are_one_line_400s(
    server: tuple[str, Any], fields: dict[str, Any], param: str
) -> None:
    url, app = server
    started = app.state.stats.snapshot()["started"]
    r = httpx.post(f"{url}/v1/chat/completions", json={"messages": USER, **fields})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param, error
    assert error["type"] == "invalid_request_error"
    assert "\n" not in error["message"] and len(error["message"]) <= 300, error["message"]
    assert app.state.stats.snapshot()["started"] == started


def test_completions_still_refuse_tools(server: tuple[str, Any]) -> None:
    url, _app = server
    r = httpx.post(f"{url}/v1/completions", json={"prompt": "hi", "tools": [WEATHER]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tools"


def test_a_conversation_with_tool_calls_and_results_is_accepted(server: tuple[str, Any]) -> None:
    url, app = server
    messages = [
        *USER,
        {"role": "assistant", "content": None, "tool_calls": [CALL, {**CALL, "id": "call_2"}]},
        {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
        {"role": "tool", "content": [{"type": "text", "text": "warm"}], "tool_call_id": "call_2"},
    ]
    r = httpx.post(
        f"{url}/v1/chat/completions", json={"messages": messages, "tool_choice": "none", "tools": [WEATHER]}
    )
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "It is sunny."
    prompt = app.state.model.prompts[-1]
    # a template that knows nothing of tools sees the calls and results written out as text
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in prompt
    assert "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nwarm\n" in prompt
    assert "<tools>" not in prompt  # tool_choice none: the tools are not offered


def test_a_chat_template_failure_is_a_one_line_400(smollm2_tokenizer: Tokenizer) -> None:
    class Failing(ScriptedModel):
        def render_chat(self, messages: Any, add_generation_prompt: bool = True, **template_vars: Any) -> str:
            raise ValueError("chat template: roles must alternate\n  at message 2\n  (user, user)")

        encode_chat = ScriptedModel.encode_chat

    model = Failing(smollm2_tokenizer, CHATML, "x")
    with run_in_thread(create_app(model)) as url:
        r = httpx.post(f"{url}/v1/chat/completions", json={"messages": USER})
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["param"] == "messages"
    assert error["message"] == (
        "the chat template failed on these messages: "
        "chat template: roles must alternate at message 2 (user, user)"
    )
