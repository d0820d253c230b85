"""Transparent huge pages for the ``rxstream`` program's model weights (Linux with glibc).

A decode step reads every weight once; with 4 KiB pages the few hundred megabytes of a model are
some 75,000 pages, far more than the TLB holds, so the step spends much of its time walking page
tables. Where transparent huge pages are enabled only on request (``madvise``, the default of
many distributions), glibc >= 2.35 asks for them on the memory it maps for large allocations when
the tunable ``glibc.malloc.hugetlb=1`` is set -- onnxruntime's weight buffers are such
allocations. A tunable is read when the process starts, so ``rxstream chat`` and ``rxstream
serve`` start themselves again (``exec``: the same process id, arguments and open files) with it
set, before importing anything heavy. Measured on SmolLM2-135M int4-a8 (docs/benchmarks.md): a
decode step 0.88x as long in one process; a streaming client of ``rxstream serve`` 0.76x.

``RXSTREAM_HUGE_PAGES=0`` turns this off; an embedding application sets the tunable itself
(``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` in the environment that starts Python).
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping, Sequence

TUNABLE = "glibc.malloc.hugetlb"
"""The glibc tunable: ``1`` makes malloc ``madvise(MADV_HUGEPAGE)`` the memory it maps."""

COMMANDS = frozenset({"chat", "serve"})
"""The subcommands that load a model and decode with it (the others do not start again)."""

THP_MODE = "/sys/kernel/mm/transparent_hugepage/enabled"
OFF_VARIABLE = "RXSTREAM_HUGE_PAGES"


def thp_mode(path: str = THP_MODE) -> str | None:
    """The kernel's transparent huge page mode (``always``, ``madvise``, ``never``), or None."""
    try:
        with open(path, encoding="ascii") as f:
            text = f.read()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else None


def glibc_version() -> tuple[int, int] | None:
    """The C library's version when it is glibc, else None."""
    name, version = platform.libc_ver()
    if name != "glibc":
        return None
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return None
    return major, minor


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand of ``rxstream`` arguments (the first argument not an option), or None."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def huge_pages_environment(
    argv: Sequence[str],
    environ: Mapping[str, str],
    *,
    mode: str | None,
    glibc: tuple[int, int] | None,
) -> dict[str, str] | None:
    """The environment to start ``rxstream argv`` again with, or None when it should not be.

    Only for :data:`COMMANDS`, on glibc >= 2.35 with transparent huge pages on request
    (``madvise``: with ``always`` they are had already, with ``never`` not at all), when the
    tunable is not set yet (so a started-again process never starts again) and
    ``RXSTREAM_HUGE_PAGES`` is not ``0``. Other tunables already set are kept.
    """
    if command_of(argv) not in COMMANDS or environ.get(OFF_VARIABLE, "").strip() == "0":
        return None
    if mode != "madvise" or glibc is None or glibc < (2, 35):
        return None
    tunables = environ.get("GLIBC_TUNABLES", "")
    if TUNABLE in tunables:
        return None
    env = dict(environ)
    env["GLIBC_TUNABLES"] = f"{tunables}:{TUNABLE}=1" if tunables else f"{TUNABLE}=1"
    return env


def start_again_with_huge_pages(argv: Sequence[str]) -> None:
    """``exec`` this interpreter again with the same command line and the tunable set, when
    :func:`huge_pages_environment` says so; returns (doing nothing) otherwise or if ``exec``
    fails. Call it first thing, from the program's entry point only."""
    if not sys.platform.startswith("linux"):
        return
    env = huge_pages_environment(argv, os.environ, mode=thp_mode(), glibc=glibc_version())
    if env is None:
        return
    command = list(getattr(sys, "orig_argv", []))
    if not command or not sys.executable:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, command, env)
    except OSError:  # pragma: no cover - exec refused (a sandbox): run without huge pages
        return
