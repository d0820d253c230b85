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
