"""``rxstream chat`` with channels: reasoning shown dimmed on a terminal (plain otherwise) or hidden,
stop strings on the answer only, tool calls printed as they complete. A scripted model replays
recorded completions as SmolLM2's real token ids through a real chat template; one test runs
the real command on a pseudo-terminal."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from rxstream.backends import build_tiny_model
from tests.scripted_model import DEEPSEEK_R1_TEMPLATE, QWEN3_TEMPLATE, ScriptedModel
from tests.serve_process import RXSTREAM
from tests.terminal import Terminal

REASONING = "\nThe user asks 2 + 2. STOP is not the end. Four, surely.\n"
ANSWER = "The answer is 4. STOP There is nothing more."
QWEN3_ANSWER = f"<think>{REASONING}</think>\n\n{ANSWER}"  # the line breaks after </think> are framing
DIM = re.compile(r"\x1b\[2m(.*?)\x1b\[0m", re.S)


class TerminalOut(io.StringIO):
    """Captured output that says it is a terminal (so the CLI styles it)."""

    def isatty(self) -> bool:
        return True


def run(
    monkeypatch: pytest.MonkeyPatch, model: ScriptedModel, *options: str, tty: bool = False
) -> tuple[int, str, str]:
    monkeypatch.setattr("rxstream.cli._chat.load_model", lambda *_args, **_kw: model)
    out = TerminalOut() if tty else io.StringIO()
    err = io.StringIO()
    from rxstream.cli import build_parser
    from rxstream.cli._chat import run_chat

    args = build_parser().parse_args(["chat", "What is 2 + 2?", *options])
    status = run_chat(args, out, err)
    return status, out.getvalue(), err.getvalue()


def test_reasoning_is_dimmed_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, smollm2_tokenizer: Tokenizer
) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_ANSWER)
    status, out, _err = run(monkeypatch, model, tty=True)
    assert status == 0
    assert "".join(DIM.findall(out)) == REASONING  # every piece of reasoning, and only it, is dim
    assert DIM.sub("", out) == ANSWER + "\n"


def test_reasoning_is_plain_when_not_a_terminal(
    monkeypatch: pytest.MonkeyPatch, smollm2_tokenizer: Tokenizer
) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_ANSWER)
    status, out, _err = run(monkeypatch, model)
    assert status == 0 and "\x1b" not in out
    assert out == REASONING + ANSWER + "\n"


def test_hide_reasoning(monkeypatch: pytest.MonkeyPatch, smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_ANSWER)
    for tty in (True, False):
        status, out, _err = run(monkeypatch, model, "--hide-reasoning", tty=tty)
        assert status == 0 and out == ANSWER + "\n"


def test_stop_applies_to_the_answer_only(
    monkeypatch: pytest.MonkeyPatch, smollm2_tokenizer: Tokenizer
) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_ANSWER)
    status, out, err = run(monkeypatch, model, "--stop", "STOP", "--replace", "4=four")
    assert status == 0
    assert out == REASONING + "The answer is four. \n"  # the reasoning is not rewritten either
    assert "[finish: stop ('STOP')" in err
    assert model.cancelled == 1  # the stop in the answer ended the generation


def test_reasoning_format_none_shows_the_raw_text(
    monkeypatch: pytest.MonkeyPatch, smollm2_tokenizer: Tokenizer
) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_ANSWER)
    status, out, _err = run(monkeypatch, model, "--reasoning-format", "none", tty=True)
    assert status == 0 and out == QWEN3_ANSWER + "\n"


def test_bad_reasoning_format_and_tools_file_are_one_line(tmp_path: Path) -> None:
    bad_tools = tmp_path / "tools.json"
    bad_tools.write_text(json.dumps([{"type": "function", "function": {"name": "no spaces"}}]))
    for option, value in (("--reasoning-format", "thinking"), ("--tools", str(bad_tools))):
        r = subprocess.run(
            [RXSTREAM, "chat", "hi", option, value], capture_output=True, text=True, timeout=60, check=False
        )
        assert r.returncode == 2 and r.stdout == ""
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert option in r.stderr


@pytest.mark.slow
def test_reasoning_on_a_real_terminal_is_dim_and_can_be_hidden(tmp_path: Path) -> None:
    """The real command on a pseudo-terminal: a model whose template opens <think> answers only
    reasoning (the tiny random model never closes it): dim on the terminal, gone when hidden."""
    tiny = build_tiny_model(tmp_path / "tiny", seed=2)
    config = json.loads((tiny / "tokenizer_config.json").read_text())
    config["chat_template"] = DEEPSEEK_R1_TEMPLATE
    (tiny / "tokenizer_config.json").write_text(json.dumps(config))
    argv = [RXSTREAM, "chat", "hi", "--model", str(tiny), "--provider", "cpu", "--max-tokens", "8"]
    term = Terminal(argv)
    try:
        assert term.wait() == 0
        raw = term.raw
    finally:
        term.close()
    answer = raw.replace("\r\n", "\n").split("\x1b[2m[finish:")[0]
    dim = "".join(DIM.findall(answer))
    assert dim.strip() and DIM.sub("", answer).strip() == ""  # all of it is reasoning, all dim
    plain = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    assert "\x1b" not in plain and plain == dim + "\n"  # piped: the same text, plain
    term = Terminal([*argv, "--hide-reasoning"])
    try:
        assert term.wait() == 0
        assert term.output.split("[finish:")[0].strip() == ""
    finally:
        term.close()
    shutil.rmtree(tiny)


CALLS = (
    "<think>\nCall the tool.\n</think>\n\nChecking.\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": 5}}\n</tool_call>\nDone.'
)
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def test_tool_calls_are_printed_as_they_complete(
    monkeypatch: pytest.MonkeyPatch, smollm2_tokenizer: Tokenizer, tmp_path: Path
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([WEATHER]))
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, CALLS)
    status, out, _err = run(monkeypatch, model, "--tools", str(tools), "--hide-reasoning")
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "Checking."
    assert lines[1] == '[tool call] get_weather({"city": "Zürich"})'
    assert lines[2].startswith("[invalid tool call: arguments do not match the schema of 'get_weather'")
    assert lines[3:] == ["Done."]
    assert '"name": "get_weather"' in model.prompts[0]  # the tools were offered in the prompt
    # without --tools the calls the format writes are shown too (any name, not checked)
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, CALLS)
    status, out, _err = run(monkeypatch, model, "--hide-reasoning")
    assert status == 0 and "<tools>" not in model.prompts[0]
    assert out.splitlines()[1:3] == [
        '[tool call] get_weather({"city": "Zürich"})',
        '[tool call] get_weather({"city": 5})',
    ]


def test_show_tokens_shows_the_raw_text(
    monkeypatch: pytest.MonkeyPatch, smollm2_tokenizer: Tokenizer
) -> None:
    model = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_ANSWER)
    status, out, _err = run(monkeypatch, model, "--show-tokens")
    assert status == 0
    assert re.sub(r"\[\d+(?: \d+)*\]", "", out) == QWEN3_ANSWER + "\n"  # no channels: the raw text
