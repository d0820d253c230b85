"""The model cache's safety: locks, temporaries and cleanup, for pulls and conversions.

Every result (a downloaded file, a converted directory) is written as a hidden temporary sibling
named after its process (``.<name>.tmp-<pid>-<random>``) and renamed into place, under an
exclusive lock file beside it (``.<name>.lock``, held by an open file, so a killed holder never
blocks the next run). The next run on a result removes the temporaries that killed runs left.
SIGTERM/SIGHUP raise inside :func:`signals_raise` so that cleanup runs before the process ends.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ._progress import Progress

__all__ = [
    "CACHE_ENV",
    "ModelCacheError",
    "cache_problem",
    "legacy_model_temps",
    "locked",
    "make_temp_dir",
    "remove",
    "remove_stale",
    "sha256_of",
    "signals_raise",
    "sweep_if_idle",
    "temp_name",
]

CACHE_ENV = "RXSTREAM_CACHE"
"""The environment variable that overrides the cache directory."""


def sha256_of(path: Path) -> str:
    """The hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class ModelCacheError(RuntimeError):
    """The model cache cannot be used: not a writable directory, or writing into it failed."""


def cache_problem(cache: Path, exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    where = f" ({exc.filename})" if exc.filename and Path(str(exc.filename)) != cache else ""
    return (
        f"cannot write the model cache {cache}: {reason}{where}; set {CACHE_ENV} "
        "(or pass cache_dir) to a writable directory"
    )


_TMP = ".tmp-"


def temp_name(final: Path) -> Path:
    """A fresh hidden sibling of ``final`` naming this process: ``.<name>.tmp-<pid>-<random>``."""
    return final.parent / f".{final.name}{_TMP}{os.getpid()}-{secrets.token_hex(4)}"


def make_temp_dir(final: Path) -> Path:
    tmp = temp_name(final)
    tmp.mkdir()  # mode 0o777 less the umask, like any directory the user creates
    return tmp


def remove(path: Path) -> None:
    """Remove a file, link or directory tree; nothing if it is absent."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass


def legacy_model_temps(target: Path) -> tuple[re.Pattern[str], ...]:
    # earlier versions converted into tempfile.mkdtemp(prefix=".<name>-"), 8 random characters
    return (re.compile(re.escape(f".{target.name}-") + r"[a-z0-9_]{8}"),)


def remove_stale(final: Path, legacy: Sequence[re.Pattern[str]] = ()) -> None:
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
            remove(Path(entry.path))


def sweep_if_idle(target: Path) -> None:
    """Remove stale temporaries next to a complete ``target`` if nobody holds its lock right now."""
    try:
        fd = os.open(lock_path(target), os.O_RDWR)
    except OSError:
        return  # no lock file (never pulled by this version) or a read-only cache
    try:
        if try_lock(fd):
            remove_stale(target, legacy=legacy_model_temps(target))
    finally:
        os.close(fd)  # closing releases the lock


def lock_path(final: Path) -> Path:
    return final.parent / f".{final.name}.lock"


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

else:
    import fcntl

    def try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


@contextmanager
def locked(final: Path, progress: Progress) -> Iterator[None]:
    """Hold the exclusive lock of ``final`` (the file ``.<name>.lock`` beside it).

    The lock belongs to the open file, so the system drops it when the holder dies, even by
    SIGKILL: a killed pull never blocks the next one. Waiting polls, so Ctrl-C interrupts it.
    """
    fd = os.open(lock_path(final), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        told = False
        while not try_lock(fd):
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
def signals_raise() -> Iterator[None]:
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
