"""Packaging: one version, and exactly one ONNX Runtime package on every platform."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import rxstream

ROOT = Path(__file__).resolve().parents[2]


def test_one_source_for_the_version() -> None:
    assert importlib.metadata.version("rxstream") == rxstream.__version__
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert "version" not in project and "version" in project["dynamic"]


@pytest.mark.parametrize(
    ("sys_platform", "machine", "package"),
    [
        ("linux", "x86_64", "onnxruntime-gpu"),
        ("win32", "AMD64", "onnxruntime-gpu"),
        ("linux", "aarch64", "onnxruntime"),
        ("darwin", "arm64", "onnxruntime"),
        ("darwin", "x86_64", "onnxruntime"),
        ("win32", "ARM64", "onnxruntime"),
    ],
)
def test_exactly_one_onnxruntime_per_platform(sys_platform: str, machine: str, package: str) -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    env = {"sys_platform": sys_platform, "platform_machine": machine}
    chosen = [
        r.name
        for r in map(Requirement, deps)
        if r.name.startswith("onnxruntime") and (r.marker is None or r.marker.evaluate(env))
    ]
    assert chosen == [package]


def _package_dirs() -> dict[str, Path]:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    return {name: ROOT / path for name, path in setuptools["package-dir"].items()}


def test_every_package_directory_is_listed() -> None:
    """A new subpackage cannot be forgotten in pyproject's packages list (it would be missing from
    a wheel while an editable install still finds it)."""
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    )
    found: set[str] = set()
    mapped = _package_dirs()
    for name, directory in mapped.items():
        for init in directory.rglob("__init__.py"):
            parts = init.parent.relative_to(directory).parts
            dotted = ".".join([name, *parts])
            if not any(
                dotted.startswith(other + ".") or dotted == other
                for other in mapped
                if other != name and other.startswith(name + ".")
            ):
                found.add(dotted)
    assert found == listed


@pytest.mark.slow
@pytest.mark.network
def test_the_wheel_holds_every_module_and_data_file(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys
    import zipfile

    source = tmp_path / "src"  # a copy: building in the checkout would leave build/lib behind
    shutil.copytree(
        ROOT, source, ignore=shutil.ignore_patterns(".venv*", "build", ".git", "__pycache__", "*.egg-info")
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = tmp_path.glob("rxstream-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in (
        "rxstream/py.typed",
        "rxstream/operators/py.typed",
        "rxstream/backends/py.typed",
        "rxstream/server/static/chat.html",
        "rxstream/server/static/favicon.svg",
    ):
        assert data in names, data
    for name, directory in _package_dirs().items():
        prefix = name.replace(".", "/")
        for source in directory.rglob("*.py"):
            if "__pycache__" in source.parts:
                continue
            inner = source.relative_to(directory).as_posix()
            if name == "rxstream" and inner.split("/")[0] in ("operators", "backends"):
                continue
            assert f"{prefix}/{inner}" in names, inner
