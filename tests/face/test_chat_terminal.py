"""``rxstream chat`` in a real terminal: an interactive multi-turn chat (history, /reset, /exit,
Ctrl-D, Ctrl-C) on the tiny model, compared with what the model generates for the same turns."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from reactivex import operators as ops

from rxstream.backends import OnnxModel, build_tiny_model
from tests.serve_process import RXSTREAM
from tests.terminal import Terminal

pytestmark = [pytest.mark.slow]

MAX_TOKENS = 12


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("chat") / "tiny", seed=2, max_position_embeddings=4096)


def answer(model: OnnxModel, messages: list[dict[str, str]], n: int = MAX_TOKENS) -> str:
    ids = model.generate(model.encode_chat(messages), max_new_tokens=n).pipe(ops.to_list()).run()
    text: str = model.tokenizer.decode(ids)
    return text


@pytest.fixture
def chat(tiny: Path) -> Iterator[Terminal]:
    term = Terminal(
        [RXSTREAM, "chat", "--model", str(tiny), "--provider", "cpu", "--max-tokens", str(MAX_TOKENS)]
    )
    try:
        term.expect("/exit")  # the banner
        term.expect(">>> ")
        yield term
    finally:
        term.close()


def test_turns_keep_history_and_reset_forgets_it(chat: Terminal, tiny: Path) -> None:
    model = OnnxModel.load(tiny, provider="cpu")
    first = answer(model, [{"role": "user", "content": "hi"}])
    second = answer(
        model,
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": first},
            {"role": "user", "content": "tell me"},
        ],
    )
    fresh = answer(model, [{"role": "user", "content": "tell me"}])
    assert second != fresh  # the history matters to this model, so the test can tell

    chat.send("hi\n")
    shown = chat.expect("[finish:")
    assert shown.split("\n", 1)[1].rstrip("\n") == first  # after the echoed line
    chat.expect(">>> ")
    chat.send("tell me\n")
    assert chat.expect("[finish:").split("\n", 1)[1].rstrip("\n") == second
    chat.expect(">>> ")
    chat.send("/reset\n")
    chat.expect("forgotten")
    chat.expect(">>> ")
    chat.send("tell me\n")
    assert chat.expect("[finish:").split("\n", 1)[1].rstrip("\n") == fresh
    chat.expect(">>> ")
    chat.send("/exit\n")
    assert chat.wait() == 0


def test_ctrl_d_leaves_and_ctrl_c_at_the_prompt_does_not(chat: Terminal) -> None:
    # a person does not press Ctrl-C within microseconds of the prompt appearing: CPython's
    # readline can miss a SIGINT that lands between drawing the prompt and waiting for a key
    time.sleep(0.5)
    chat.send("\x03")
    chat.expect("Ctrl-D or /exit leaves")
    chat.expect(">>> ")
    chat.send("/nonsense\n")
    chat.expect("unknown command")
    chat.expect(">>> ")
    chat.send("\x04")
    assert chat.wait() == 0
    assert "Traceback" not in chat.output


def test_ctrl_c_cancels_the_answer_but_not_the_chat(tiny: Path) -> None:
    term = Terminal([RXSTREAM, "chat", "--model", str(tiny), "--provider", "cpu", "--max-tokens", "500"])
    try:
        term.expect(">>> ")
        term.send("hello\n")
        term.expect("hello\n")  # the echo; then the answer streams
        term.expect(" ")  # some of it has arrived
        term.send("\x03")
        term.expect("[finish: cancelled")
        term.expect(">>> ")
        term.send("/exit\n")
        assert term.wait() == 0
        assert "Traceback" not in term.output
    finally:
        term.close()


def test_piped_stdin_stays_single_shot(tiny: Path) -> None:
    import subprocess

    result = subprocess.run(
        [RXSTREAM, "chat", "--model", str(tiny), "--provider", "cpu", "--max-tokens", "5"],
        input="hi",
        capture_output=True,
        text=True,
        timeout=120,
    )
    model = OnnxModel.load(tiny, provider="cpu")
    assert result.returncode == 0, result.stderr
    assert result.stdout == answer(model, [{"role": "user", "content": "hi"}], 5) + "\n"
    assert ">>>" not in result.stdout + result.stderr
