"""The faces' chat plans without a server: format detection, the forced tool-call opening of every
format (the parser sees it and reads the call that follows), the fallback tool prompt."""

from __future__ import annotations

import json
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops
from tokenizers import Tokenizer

from rxstream.channels import PRESETS, ToolCallDelta, ToolCallEnd, ToolCallStart
from rxstream.chat import (
    REASONING_FORMATS,
    ToolChoice,
    check_reasoning_format,
    detect_reasoning_format,
    fallback_messages,
    plan_chat,
    resolve_reasoning_format,
)
from rxstream.operators import chat_pipeline
from tests.scripted_model import CHATML, DEEPSEEK_R1_TEMPLATE, QWEN3_TEMPLATE, ScriptedModel

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
NATIVE = (
    "{{ 'TOOLS ' ~ (tools | length) ~ '\\n' if tools else '' }}{% for m in messages %}"
    "{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}ASSISTANT: {% endif %}"
)
"""A template that renders tools (it mentions ``tools``) in no format of its own."""


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (QWEN3_TEMPLATE, "qwen3"),
        (DEEPSEEK_R1_TEMPLATE, "deepseek-r1"),
        (CHATML, None),
        ("{{ '<|start|>assistant<|channel|>final<|message|>' }}", "harmony"),
        ("[INST]{{ m }}[/INST][THINK]", "mistral"),
        ("[AVAILABLE_TOOLS]{{ tools }}[TOOL_CALLS]", "mistral"),
        ("<tool_call>\n<function=name>", "qwen3-coder"),
        ("<tool_call>{{ tools }}</tool_call>", "hermes"),
        ("<|python_tag|>{{ tools }}", "llama3"),
        (None, None),
        ("", None),
    ],
)
def test_format_detection(template: str | None, expected: str | None) -> None:
    assert detect_reasoning_format(template) == expected


def test_format_option_values() -> None:
    assert set(REASONING_FORMATS) == {"auto", "none", *PRESETS}
    assert check_reasoning_format("gpt-oss") == "harmony"
    assert resolve_reasoning_format("none", object()) is None
    assert resolve_reasoning_format("auto", object()) is None  # a model without a template
    with pytest.raises(ValueError, match=r"^--reasoning-format must be one of auto, none, .* got 'x'$"):
        check_reasoning_format("x")


CONTINUATIONS: dict[str, tuple[str, str]] = {
    # format -> (after a named opening, after a "required" opening)
    "hermes": ('{"city": "Paris"}}\n</tool_call>', '{"name": "get_weather", "arguments": {"city": "Paris"}}'),
    "qwen3": ('{"city": "Paris"}}\n</tool_call>', '{"name": "get_weather", "arguments": {"city": "Paris"}}'),
    "mistral": ('{"city": "Paris"}}]', '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'),
    "llama3": ('{"city": "Paris"}}', '{"name": "get_weather", "parameters": {"city": "Paris"}}'),
    "qwen3-coder": (
        "<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
        "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
    ),
    "harmony": (
        '{"city": "Paris"}<|call|>',
        'get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>',
    ),
}


def events(model: ScriptedModel, tokenizer: Tokenizer, ids: list[int], plan: Any, text: str) -> list[Any]:
    generated = reactivex.from_iterable(model.encode(text))
    out: list[Any] = generated.pipe(chat_pipeline(tokenizer, plan, prompt_ids=ids), ops.to_list()).run()
    return out


@pytest.mark.parametrize("fmt", sorted(CONTINUATIONS))
@pytest.mark.parametrize("mode", ["named", "required"])
def test_every_format_opens_a_forced_call_the_parser_reads(
    smollm2_tokenizer: Tokenizer, fmt: str, mode: str
) -> None:
    model = ScriptedModel(smollm2_tokenizer, NATIVE, "")
    choice = ToolChoice("named", "get_weather") if mode == "named" else ToolChoice("required")
    ids, plan = plan_chat(
        model, [{"role": "user", "content": "hi"}], reasoning_format=fmt, tools=[WEATHER], tool_choice=choice
    )
    prompt = smollm2_tokenizer.decode(ids, skip_special_tokens=False)
    assert prompt.startswith("TOOLS 1\n") and prompt.endswith("ASSISTANT: " + plan.opening)
    assert plan.opening and (("get_weather" in plan.opening) == (mode == "named"))
    named, required = CONTINUATIONS[fmt]
    out = events(model, smollm2_tokenizer, ids, plan, named if mode == "named" else required)
    starts = [e for e in out if isinstance(e, ToolCallStart)]
    ends = [e for e in out if isinstance(e, ToolCallEnd)]
    assert [(s.index, s.name) for s in starts] == [(0, "get_weather")]
    assert [(e.name, e.arguments) for e in ends] == [("get_weather", {"city": "Paris"})]
    assert "".join(e.text for e in out if isinstance(e, ToolCallDelta)) == ends[0].arguments_text
    assert json.loads(ends[0].arguments_text) == {"city": "Paris"}


def test_fallback_messages() -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Zürich"}},
    }
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [call]},
        {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
        {"role": "tool", "content": "warm", "tool_call_id": "c1"},
        {"role": "user", "content": "Thanks"},
    ]
    out = fallback_messages(messages, [WEATHER])
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user", "user"]
    assert out[0]["content"].startswith("Be brief.\n\nYou can call functions to answer.")
    assert json.dumps(WEATHER) in out[0]["content"]
    assert out[2]["content"] == (
        'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call>'
    )
    assert (
        out[3]["content"]
        == "<tool_response>\nsunny\n</tool_response>\n<tool_response>\nwarm\n</tool_response>"
    )
    assert all(isinstance(m["content"], str) for m in out)
    # without tools only the rewriting: no system message is added
    assert [m["role"] for m in fallback_messages(messages[1:], [])] == ["user", "assistant", "user", "user"]
