"""The tutorial (docs/tutorial.md) runs as written: its Python blocks in order, in one
interpreter, and its command-line example; so does the parity kit's guide (docs/parity.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.network]

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = (ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8")


def test_tutorial_python_blocks_run_in_order() -> None:
    blocks = re.findall(r"```python\n(.*?)```", TUTORIAL, re.S)
    assert len(blocks) >= 5
    proc = subprocess.run(
        [sys.executable, "-c", "\n".join(blocks)], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "['Hel', 'lo ', '\\nwor', 'ld']" in out
    assert "why it ended: stop ('\\n3.')" in out
    assert "marble test passed" in out
    assert "Bonjour! Paris is \n" in out


def test_tutorial_command_line_example() -> None:
    command = re.search(r"```bash\n(rxstream chat .*?)\n```", TUTORIAL).group(1)  # type: ignore[union-attr]
    args = re.findall(r'"[^"]*"|\S+', command)
    rxstream = str(Path(sys.executable).with_name("rxstream"))
    proc = subprocess.run(
        [rxstream, *[a.strip('"') for a in args[1:]]], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "The capital of France is Paris."
    assert "[finish: eos" in proc.stderr


def test_parity_guide_python_blocks_run_in_order_and_print_what_it_shows() -> None:
    guide = (ROOT / "docs" / "parity.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", guide, re.S)
    assert len(blocks) >= 6
    proc = subprocess.run(
        [sys.executable, "-c", "\n".join(blocks)], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    shown = re.findall(r"```text\n(.*?)```", guide, re.S)
    assert shown and all(block in proc.stdout for block in shown), proc.stdout
    assert "per-token chunks break it: '<think>東京 🌦️</think' | '>ok'" in proc.stdout
    assert proc.stdout.rstrip().endswith("parity kit guide done")
