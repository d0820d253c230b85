"""``rxstream serve`` with ``response_format`` and forced tool calls, through the official
``openai`` client on a real socket. A replayed reasoning model (``tests/replay_logits.py``)
answers with a recorded Qwen3-style completion through a real sampler: its reasoning comes back
exactly as recorded (the grammar leaves it free, braces and quotes included) while its answer,
plain prose in the recording, is held to the schema."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import openai
import pytest
from tokenizers import Tokenizer

from tests.face.test_server_channels import both, serving
from tests.replay_logits import ReplayLogitsModel
from tests.scripted_model import DEEPSEEK_R1_TEMPLATE, QWEN3_TEMPLATE, ScriptedModel

USER = [{"role": "user", "content": "What is 2 + 2? Answer in JSON."}]
THINKING = '\nThey want JSON like {"answer": maybe} -- or [1, 2}? "Four", surely.\n'
RECORDED = f"<think>{THINKING}</think>\n\nThe answer is four. Nothing more."
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"enum": ["four", "five"]}, "sure": {"type": "boolean"}},
    "required": ["answer", "sure"],
    "additionalProperties": False,
}
FORMAT = {"type": "json_schema", "json_schema": {"name": "sum", "schema": SCHEMA, "strict": True}}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"enum": ["Paris", "Rome"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


def replay(tokenizer: Tokenizer, template: str = QWEN3_TEMPLATE, text: str = RECORDED) -> ReplayLogitsModel:
    eos = tokenizer.token_to_id("<|im_end|>")
    assert eos is not None
    return ReplayLogitsModel(tokenizer, template, text, eos=eos)


def test_without_a_format_the_recording_comes_back(smollm2_tokenizer: Tokenizer) -> None:
    with serving(replay(smollm2_tokenizer)) as (client, _url, _app):
        whole, streamed = both(client, messages=USER)
    assert whole == streamed
    assert whole["reasoning"] == THINKING.strip() or whole["reasoning"].strip() == THINKING.strip()
    assert whole["content"] == "The answer is four. Nothing more."


def test_the_reasoning_is_free_and_the_answer_follows_the_schema(smollm2_tokenizer: Tokenizer) -> None:
    model = replay(smollm2_tokenizer)
    with serving(model) as (client, _url, _app):
        free, _ = both(client, messages=USER)
        whole, streamed = both(client, messages=USER, response_format=FORMAT)
    assert whole == streamed
    assert whole["reasoning"] == free["reasoning"]  # exactly as recorded: not constrained
    value = json.loads(whole["content"])
    jsonschema.validate(value, SCHEMA)
    assert whole["finish_reason"] == "stop"
    recorded = model.encode(RECORDED)
    think_end = len(model.encode(f"<think>{THINKING}</think>"))
    assert model.outputs[-1][:think_end] == recorded[:think_end]  # the same ids, one by one


def test_a_prompt_that_opened_the_reasoning(smollm2_tokenizer: Tokenizer) -> None:
    text = 'Hmm, {"x": [} is not it.\n</think>\n\nFour.'
    with serving(replay(smollm2_tokenizer, DEEPSEEK_R1_TEMPLATE, text)) as (client, _u, _a):
        whole, streamed = both(client, messages=USER, response_format=FORMAT)
    assert whole == streamed
    assert whole["reasoning"].startswith('Hmm, {"x": [} is not it.')
    jsonschema.validate(json.loads(whole["content"]), SCHEMA)


@pytest.mark.parametrize(
    "choice",
    ["required", {"type": "function", "function": {"name": "get_weather"}}],
    ids=["required", "named"],
)
def test_a_forced_call_comes_after_free_reasoning_and_is_valid(
    smollm2_tokenizer: Tokenizer, choice: Any
) -> None:
    with serving(replay(smollm2_tokenizer)) as (client, _url, _app):
        free, _ = both(client, messages=USER)
        whole, streamed = both(
            client, messages=USER, tools=[WEATHER], tool_choice=choice, parallel_tool_calls=False
        )
    for reply in (whole, streamed):
        for call in reply["tool_calls"]:
            call.pop("id")
    assert whole == streamed
    assert whole["reasoning"] == free["reasoning"]
    assert whole["finish_reason"] == "tool_calls"
    (call,) = whole["tool_calls"]
    assert call["name"] == "get_weather"
    jsonschema.validate(json.loads(call["arguments"]), WEATHER["function"]["parameters"])


def test_a_stop_inside_the_answer_ends_it_with_stop(smollm2_tokenizer: Tokenizer) -> None:
    with serving(replay(smollm2_tokenizer)) as (client, _url, _app):
        whole, streamed = both(client, messages=USER, response_format=FORMAT, stop=['"sure"'])
    assert whole == streamed
    assert whole["finish_reason"] == "stop"
    assert whole["content"].startswith('{"answer": ') and '"sure"' not in whole["content"]


@pytest.mark.parametrize(
    ("response_format", "param", "words"),
    [
        ({"type": "regex", "regex": "(("}, "response_format.regex", "invalid regular expression"),
        (
            {"type": "json_schema", "json_schema": {"schema": {"type": "wat"}}},
            "response_format.json_schema.schema",
            "json schema",
        ),
        ({"type": "xml"}, "response_format.type", "must be text, json_object"),
    ],
)
def test_bad_formats_are_400s_naming_the_field(
    smollm2_tokenizer: Tokenizer, response_format: Any, param: str, words: str
) -> None:
    with serving(replay(smollm2_tokenizer)) as (client, _url, _app):
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="scripted", messages=USER, response_format=response_format)
    body: Any = caught.value.body
    assert body["param"] == param and words in body["message"].lower()


def test_a_model_that_cannot_constrain_says_so(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, RECORDED)
    with serving(model) as (client, _url, _app):
        with pytest.raises(openai.BadRequestError, match="needs a model that constrains decoding"):
            client.chat.completions.create(model="scripted", messages=USER, response_format=FORMAT)
        reply = client.chat.completions.create(
            model="scripted", messages=USER, response_format={"type": "text"}
        )
    assert reply.choices[0].message.content == "The answer is four. Nothing more."


def test_the_responses_api_text_format(smollm2_tokenizer: Tokenizer) -> None:
    fmt = {"type": "json_schema", "name": "sum", "schema": SCHEMA, "strict": True}
    with serving(replay(smollm2_tokenizer)) as (client, _url, _app):
        reply = client.responses.create(model="scripted", input="What is 2 + 2?", text={"format": fmt})  # type: ignore[arg-type]
        events = list(
            client.responses.create(
                model="scripted", input="What is 2 + 2?", text={"format": fmt}, stream=True
            )  # type: ignore[arg-type]
        )
    jsonschema.validate(json.loads(reply.output_text), SCHEMA)
    assert reply.text is not None and reply.text.format.type == "json_schema"
    done = [e for e in events if e.type == "response.completed"]
    assert done and done[0].response.output_text == reply.output_text
    kinds = [item.type for item in reply.output]
    assert kinds[0] == "reasoning" and "message" in kinds
