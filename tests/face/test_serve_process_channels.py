"""The real ``rxstream serve`` process with ``--reasoning-format``: the option parses, the format
is reported at start-up and routes the answer; a bad value is one line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from reactivex import operators as ops

from rxstream.backends import OnnxModel, build_tiny_model
from tests.scripted_model import DEEPSEEK_R1_TEMPLATE
from tests.serve_process import RXSTREAM, post_json, serve_process

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def thinking_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with a template whose generation prompt opens ``<think>`` (its random
    answer never closes it: all of it is reasoning)."""
    directory = build_tiny_model(tmp_path_factory.mktemp("think") / "tiny", seed=2)
    config = json.loads((directory / "tokenizer_config.json").read_text())
    config["chat_template"] = DEEPSEEK_R1_TEMPLATE
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return directory


def test_bad_reasoning_format_is_one_line() -> None:
    result = subprocess.run(
        [RXSTREAM, "serve", "--reasoning-format", "thinking"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("rxstream serve: argument --reasoning-format: must be one of auto, none, ")
    assert "got 'thinking'" in lines[0]


@pytest.mark.parametrize(
    ("option", "shown"), [("auto", "deepseek-r1"), ("qwq", "deepseek-r1"), ("none", "none")]
)
def test_reasoning_format_routes_the_answer(thinking_dir: Path, option: str, shown: str) -> None:
    model = OnnxModel.load(thinking_dir, provider="cpu")
    messages = [{"role": "user", "content": "hi"}]
    ids = model.generate(model.encode_chat(messages), max_new_tokens=6).pipe(ops.to_list()).run()
    expected = model.tokenizer.decode(ids)
    with serve_process(thinking_dir, "--reasoning-format", option) as sp:
        how = "detected from the chat template" if option == "auto" else "--reasoning-format"
        assert any(f"reasoning format: {shown} ({how})" in line for line in sp.log), sp.text()
        status, body = post_json(sp.address, "/v1/chat/completions", {"messages": messages, "max_tokens": 6})
    assert status == 200, body
    message = body["choices"][0]["message"]
    if shown == "none":
        assert message["content"] == expected and "reasoning_content" not in message
    else:
        assert message["reasoning_content"] == expected and message["content"] is None
