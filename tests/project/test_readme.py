"""Every ``python`` code block of the README runs as written (each in a fresh interpreter), and
the ones that stream the default model's answer show what they promise."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.network]

ROOT = Path(__file__).resolve().parents[2]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)


def run_block(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_every_python_block_runs(index: int) -> None:
    code = BLOCKS[index]
    if "def test_" in code:  # a test function: define it, then call it
        tests = re.findall(r"^def (test_\w+)", code, re.M)
        code += "\n" + "\n".join(f"{name}()" for name in tests) + "\n"
    proc = run_block(code)
    assert proc.returncode == 0, proc.stderr[-3000:]


def block(containing: str) -> str:
    found = [b for b in BLOCKS if containing in b]
    assert len(found) == 1, f"README has {len(found)} python blocks containing {containing!r}"
    return found[0]


def test_the_first_pipeline_shows_its_operators_at_work() -> None:
    proc = run_block(block('stop(["\\n3."]'))
    assert proc.returncode == 0, proc.stderr[-3000:]
    answer, _, finish = proc.stdout.rpartition("finished:")
    assert answer.startswith("1. PARIS") and "\n2. " in answer  # replace rewrote every Paris
    assert "Paris" not in answer and "\n3." not in answer  # and stop cut before the third fact
    assert finish.strip() == "stop ('\\n3.')"


def test_the_asyncio_block_answers() -> None:
    proc = run_block(block("asyncio.run(main())"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "The capital of France is Paris."
