"""The examples run as documented (as real subprocesses)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.network]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "args",
    [
        ["replay_pipeline.py"],
        ["tokflow_migration.py"],
        ["marble_testing.py"],
        ["parity_response_parser.py"],  # transformers' ResponseParser under the parity kit
        ["openai_client.py", "Say hello.", "--demo", "--tiny", "--max-tokens", "12"],  # random-weight model
        ["chat.py", "What is the capital of France?"],  # the default model (pulled on first use)
    ],
    ids=lambda a: a[0],
)
def test_example_runs(args: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip()
    assert "PyTorch was not found" not in proc.stdout + proc.stderr  # no warning a user must ignore


def test_marble_example_is_a_passing_test_file() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(ROOT / "examples" / "marble_testing.py"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout


def test_openai_client_demo_answers_with_the_real_model_and_its_stop_fires() -> None:
    """``--demo`` serves the default model; ``--stop "\\n3."`` is unescaped and cuts the list."""
    question = "List three facts about Paris, one per line."
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "openai_client.py"), question, "--demo", "--stop", "\\n3."],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    answer, _, finish = proc.stdout.rpartition("[finished: ")
    assert answer.startswith("1. Paris") and "\n2. " in answer and "3." not in answer, proc.stdout
    assert finish.startswith("stop ('\\n3.')"), proc.stdout
    assert "gibberish" not in proc.stderr
