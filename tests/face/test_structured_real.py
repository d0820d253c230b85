"""Structured output on the real default model through the real ``rxstream serve`` process and the
official ``openai`` client: every answer of a corpus of 32 schemas validates, greedy and sampled,
with the requests batched side by side; forced tool calls are valid calls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jsonschema
import openai
import pytest

from tests.schema_corpus import CORPUS
from tests.serve_process import ServeProcess, serve_process

pytestmark = [pytest.mark.slow, pytest.mark.network]

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(scope="module")
def server() -> Iterator[ServeProcess]:
    with serve_process("smollm2", start_timeout=600) as sp:
        yield sp


def client(server: ServeProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=300)


def ask(
    server: ServeProcess, question: str, schema: dict[str, Any], sampling: dict[str, Any], stream: bool
) -> tuple[str, str | None]:
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}
    request: dict[str, Any] = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": question}],
        "response_format": fmt,
        "max_tokens": 300,
        **sampling,
    }
    c = client(server)
    if not stream:
        reply = c.chat.completions.create(**request)
        return reply.choices[0].message.content or "", reply.choices[0].finish_reason
    text, finish = [], None
    for chunk in c.chat.completions.create(stream=True, **request):
        if chunk.choices:
            text.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
    return "".join(text), finish


@pytest.mark.parametrize(
    "sampling", [{"temperature": 0}, {"temperature": 0.9, "seed": 1}], ids=["greedy", "sampled"]
)
def test_every_answer_of_the_corpus_validates(server: ServeProcess, sampling: dict[str, Any]) -> None:
    jobs = [(name, q, s, sampling, i % 2 == 1) for i, (name, q, s) in enumerate(CORPUS)]
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda job: ask(server, *job[1:]), jobs))
    bad = []
    for (name, _q, schema, _s, _stream), (text, finish) in zip(jobs, answers, strict=True):
        try:
            jsonschema.validate(json.loads(text), schema)
        except (ValueError, jsonschema.ValidationError) as exc:
            bad.append(f"{name}: {finish}: {text[:120]!r}: {str(exc)[:120]}")
            continue
        if finish != "stop":
            bad.append(f"{name}: finish {finish}")
    print(f"{len(jobs) - len(bad)} of {len(jobs)} valid")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "choice",
    ["required", {"type": "function", "function": {"name": "get_weather"}}],
    ids=["required", "named"],
)
def test_forced_calls_are_valid_calls(server: ServeProcess, choice: Any) -> None:
    c = client(server)
    for question in ["What is the weather in Paris?", "Should I take an umbrella in Oslo today?", "Hi!"]:
        reply = c.chat.completions.create(
            model="smollm2",
            messages=[{"role": "user", "content": question}],
            tools=[WEATHER],
            tool_choice=choice,
            parallel_tool_calls=False,
        )
        message = reply.choices[0].message
        assert reply.choices[0].finish_reason == "tool_calls"
        assert message.tool_calls and len(message.tool_calls) == 1
        call = message.tool_calls[0]
        assert call.function.name == "get_weather"
        jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])


def test_the_readme_command_lines() -> None:
    """The README's tool-call and JSON lines, in a real process on the real model."""
    import subprocess
    from pathlib import Path

    from tests.serve_process import RXSTREAM

    root = Path(__file__).resolve().parents[2]
    run = [RXSTREAM, "chat", "--provider", "cpu"]
    tools = subprocess.run(
        [
            *run,
            "--tools",
            "examples/weather_tools.json",
            "--tool-choice",
            "required",
            "What is the weather in Paris?",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
    )
    assert tools.returncode == 0, tools.stderr
    assert tools.stdout == '[tool call] get_weather({"city": "Paris"})\n'
    person = subprocess.run(
        [*run, "--json-schema", "examples/person.schema.json", "Invent a person who lives in Rome."],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
    )
    assert person.returncode == 0, person.stderr
    value = json.loads(person.stdout)
    jsonschema.validate(value, json.loads((root / "examples" / "person.schema.json").read_text()))
    assert value["city"] == "Rome"
