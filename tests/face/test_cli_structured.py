"""``rxstream chat --json-schema / --regex / --grammar / --tool-choice`` on the tiny random-weight
model: its free output is noise, so a valid answer or call is the grammar's doing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from rxstream.backends import build_tiny_model
from rxstream.cli import main

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 10},
        "n": {"type": "integer", "minimum": 0, "maximum": 99},
    },
    "required": ["name", "n"],
    "additionalProperties": False,
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 12}},
                "required": ["city"],
            },
        },
    }
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("cli") / "tiny", seed=2, max_position_embeddings=2048)


def chat(tiny: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["chat", "hello", "--model", str(tiny), "--provider", "cpu", "--max-tokens", "120", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_json_schema(tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SCHEMA))
    for sampling in ([], ["--temperature", "1.0", "--seed", "4"]):
        status, out, err = chat(tiny, capsys, "--json-schema", str(path), *sampling)
        assert status == 0, err
        jsonschema.validate(json.loads(out), SCHEMA)
        assert "[finish: eos" in err


def test_regex_and_grammar(tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _err = chat(tiny, capsys, "--regex", "[a-z]{3}-[0-9]{2}")
    assert status == 0 and re.fullmatch(r"[a-z]{3}-[0-9]{2}\n", out)
    grammar = tmp_path / "g.lark"
    grammar.write_text('start: "yes" | "no"\n')
    status, out, _err = chat(tiny, capsys, "--grammar", str(grammar))
    assert status == 0 and out in ("yes\n", "no\n")


@pytest.mark.parametrize("choice", ["required", "get_weather"])
def test_a_forced_tool_call_is_printed_valid(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], choice: str
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    status, out, err = chat(tiny, capsys, "--tools", str(tools), "--tool-choice", choice)
    assert status == 0, err
    m = re.fullmatch(r"\[tool call\] get_weather\((.*)\)\n", out)
    assert m, out
    jsonschema.validate(json.loads(m.group(1)), TOOLS[0]["function"]["parameters"])
    assert "[finish: eos" in err


def test_a_prompt_longer_than_the_context_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small = build_tiny_model(tmp_path / "small", seed=2, max_position_embeddings=64)
    status = main(["chat", "word " * 200, "--model", str(small), "--provider", "cpu"])
    out, err = capsys.readouterr()
    assert status == 1 and out == ""
    assert err.startswith("rxstream chat: ") and "context" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--regex", "(("], "rxstream chat: --regex: invalid regular expression '((': unclosed group"),
        (["--tool-choice", "required"], "rxstream chat: --tool-choice required needs --tools FILE"),
        (["--json-schema", "{}", "--regex", "a"], "not both"),
    ],
)
def test_mistakes_get_one_line(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], line: str
) -> None:
    if args[0] == "--json-schema":
        (tmp_path / "s.json").write_text("{}")
        args = ["--json-schema", str(tmp_path / "s.json"), *args[2:]]
    status, out, err = chat(tiny, capsys, *args)
    assert status == 2 and out == ""
    assert line in err and len(err.strip().splitlines()) == 1


def test_a_budget_past_the_context_is_refused(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = chat(tiny, capsys, "--max-tokens", "100000")
    assert status == 2 and out == ""
    assert err == (
        "rxstream chat: --max-tokens 100000 is not below the model's context of 2048 tokens "
        "(the prompt needs room too)\n"
    )
