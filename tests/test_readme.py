"""The README's code runs: its first command's pipeline snippet and its marble-test example."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)


def block(containing: str) -> str:
    found = [b for b in BLOCKS if containing in b]
    assert len(found) == 1, f"README has {len(found)} python blocks containing {containing!r}"
    return found[0]


def test_readme_pipeline_snippet_runs_on_the_default_model() -> None:
    code = block("OnnxModel.from_pretrained")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "finished:" in proc.stdout
    assert "PARIS" in proc.stdout  # the replace rule applied to the streamed answer


def test_readme_marble_example_passes() -> None:
    code = block("def test_stop_cancels_the_generator_at_the_deciding_frame")
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    test = namespace["test_stop_cancels_the_generator_at_the_deciding_frame"]
    assert callable(test)
    test()
