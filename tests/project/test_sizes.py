"""The size rule in tests/layers.py: the tree keeps it, and an oversized module or function fails it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.layers import (
    MAX_FUNCTION_LINES,
    MAX_MODULE_LINES,
    PENDING,
    SIZE_EXEMPT,
    check_sizes,
    oversized,
)

ROOT = Path(__file__).resolve().parents[2]

PYPROJECT = """\
[tool.setuptools.package-dir]
"rxstream" = "rxstream"
"rxstream.operators" = "operators"
"rxstream.backends" = "backends"
"""


def _function(name: str, lines: int, indent: str = "") -> str:
    """A function of exactly ``lines`` lines."""
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(lines - 2))
    return f"{indent}def {name}() -> None:\n{body}{indent}    return None\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    for package in ("rxstream", "operators", "backends", "backends/convert"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text('"""A package."""\n', encoding="utf-8")
    return tmp_path


def _problems(tree: Path, *, pending: frozenset[str] = frozenset()) -> list[str]:
    return [str(p) for p in check_sizes(tree, pending=pending)]


def test_the_tree_keeps_the_size_rule() -> None:
    assert [str(p) for p in check_sizes(ROOT)] == []


def test_modules_and_functions_at_the_limit_pass(tree: Path) -> None:
    (tree / "rxstream" / "_ok.py").write_text(
        _function("f", MAX_FUNCTION_LINES) + "\n" * (MAX_MODULE_LINES - MAX_FUNCTION_LINES), encoding="utf-8"
    )
    assert len((tree / "rxstream" / "_ok.py").read_text(encoding="utf-8").splitlines()) == MAX_MODULE_LINES
    assert _problems(tree) == []


def test_an_oversized_module_fails(tree: Path) -> None:
    (tree / "operators" / "_big.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1), encoding="utf-8")
    assert _problems(tree) == [
        f"operators/_big.py:1: module has {MAX_MODULE_LINES + 1} lines (at most {MAX_MODULE_LINES}); split it"
    ]


def test_an_oversized_function_fails_also_a_nested_one_or_a_method(tree: Path) -> None:
    code = (
        _function("long", MAX_FUNCTION_LINES + 1)
        + "class C:\n"
        + _function("method", MAX_FUNCTION_LINES + 2, "    ")
        + "def outer() -> None:\n"
        + _function("inner", MAX_FUNCTION_LINES + 1, "    ")
    )
    (tree / "backends" / "_long.py").write_text(code, encoding="utf-8")
    keys = sorted(o.key for o in oversized(tree))
    # outer spans inner and one more line: over as well, and counted on its own
    assert keys == [
        "backends/_long.py::C.method",
        "backends/_long.py::long",
        "backends/_long.py::outer",
        "backends/_long.py::outer.inner",
    ]
    assert len(_problems(tree)) == 4
    assert any("function C.method has 102 lines" in p for p in _problems(tree))


def test_pending_entries_pass_while_over_and_fail_once_they_are_not(tree: Path) -> None:
    big = tree / "rxstream" / "_big.py"
    big.write_text(_function("f", MAX_FUNCTION_LINES + 1) + "x = 1\n" * MAX_MODULE_LINES, encoding="utf-8")
    pending = frozenset({"rxstream/_big.py", "rxstream/_big.py::f"})
    assert _problems(tree, pending=pending) == []
    big.write_text(_function("f", MAX_FUNCTION_LINES), encoding="utf-8")
    assert _problems(tree, pending=pending) == [
        "PENDING lists rxstream/_big.py, no longer over its limit: remove it from tests/layers.py",
        "PENDING lists rxstream/_big.py::f, no longer over its limit: remove it from tests/layers.py",
    ]


def test_only_the_graph_builders_may_be_exempt(tree: Path) -> None:
    graph = tree / "backends" / "convert" / "_graph.py"
    graph.write_text(
        _function("build", MAX_FUNCTION_LINES + 1) + "x = 1\n" * MAX_MODULE_LINES, encoding="utf-8"
    )
    exempt = frozenset({"backends/convert/_graph.py", "backends/convert/_graph.py::build"})
    assert [str(p) for p in check_sizes(tree, pending=frozenset(), exempt=exempt)] == []
    assert len(check_sizes(tree, pending=frozenset(), exempt=frozenset())) == 2
    other = check_sizes(tree, pending=frozenset(), exempt=exempt | {"rxstream/_other.py"})
    assert [str(p) for p in other] == [
        "SIZE_EXEMPT may hold only backends/convert/_graph.py (its graph builders), not rxstream/_other.py"
    ]
    assert all(key.partition("::")[0] == "backends/convert/_graph.py" for key in SIZE_EXEMPT)
    assert not PENDING & SIZE_EXEMPT


def test_the_command_fails_on_an_oversized_module(tree: Path) -> None:
    (tree / "rxstream" / "_big.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "layers.py"), str(tree)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "rxstream/_big.py:1: module has" in result.stdout
