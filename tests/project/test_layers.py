"""The layer check (tests/layers.py) passes on the tree, and fails on each kind of forbidden import."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.layers import check, layer_of, module_files

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_the_tree_keeps_its_layers() -> None:
    assert [str(v) for v in check(ROOT)] == []


def test_the_package_dir_mapping_is_followed() -> None:
    modules = dict(module_files(ROOT))
    assert modules["rxstream.operators._stop"] == ROOT / "operators" / "_stop.py"
    assert modules["rxstream.backends"] == ROOT / "backends" / "__init__.py"
    assert modules["rxstream.server._app"] == ROOT / "rxstream" / "server" / "_app.py"
    assert layer_of("rxstream.operators._stop") == "operators"
    assert layer_of("rxstream.cli") == "face"
    assert layer_of("rxstream._finish") == "core"
    assert layer_of("rxstreamx") is None and layer_of("reactivex") is None


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name in ("rxstream", "operators", "backends"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    assert check(tmp_path) == []
    return tmp_path


def _append(path: Path, code: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "\n\n" + code + "\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("file", "code", "layer", "imported_layer"),
    [
        ("rxstream/_finish.py", "def f():\n    from rxstream.backends import OnnxModel", "core", "backends"),
        ("rxstream/_piece.py", "import rxstream.operators", "core", "operators"),
        ("rxstream/_piece.py", "from rxstream import server", "core", "face"),
        ("rxstream/_piece.py", "from .testing import MarbleTest", "core", "testing"),
        ("operators/_stop.py", "from rxstream.backends import OnnxModel", "operators", "backends"),
        ("operators/_stop.py", "from ..backends import OnnxModel", "operators", "backends"),
        ("operators/_replace.py", "from rxstream.cli import main", "operators", "face"),
        ("backends/convert/_tiny.py", "from rxstream.operators import stop", "backends", "operators"),
        ("backends/__init__.py", "from ..server import create_app", "backends", "face"),
        ("rxstream/testing/_diagram.py", "from rxstream.server import create_app", "testing", "face"),
        (
            "rxstream/compat/tokflow.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import rxstream.cli",
            "compat",
            "face",
        ),
    ],
)
def test_a_forbidden_import_fails_the_check(
    tree: Path, file: str, code: str, layer: str, imported_layer: str
) -> None:
    _append(tree / file, code)
    violations = check(tree)
    assert len(violations) == 1, violations
    v = violations[0]
    assert (str(v.path), v.layer, v.imported_layer) == (file, layer, imported_layer)


def test_allowed_imports_pass(tree: Path) -> None:
    _append(tree / "rxstream/server/_app.py", "from rxstream.backends import OnnxModel")
    _append(tree / "rxstream/testing/_diagram.py", "from rxstream.operators import stop")
    _append(tree / "operators/_stop.py", "from rxstream import Finish")
    assert check(tree) == []


def test_the_command_fails_with_one_line_per_violation(tree: Path) -> None:
    _append(tree / "operators/_stop.py", "from rxstream.backends import OnnxModel")
    cmd = [sys.executable, str(ROOT / "tests" / "layers.py"), str(tree)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert result.stdout.count("\n") == 1 and "operators/_stop.py" in result.stdout
    assert subprocess.run([*cmd[:2], str(ROOT)], capture_output=True, check=False).returncode == 0
