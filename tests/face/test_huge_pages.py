"""``rxstream chat`` / ``serve`` start again with glibc's huge-page tunable (rxstream._huge_pages):
the decision, and the real program (its process environment after the ``exec``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rxstream._huge_pages import (
    command_of,
    glibc_version,
    huge_pages_environment,
    thp_mode,
)
from rxstream.backends import build_tiny_model
from tests.serve_process import http_request, serve_process

GLIBC = (2, 36)


@pytest.mark.parametrize(
    ("argv", "command"),
    [(["serve", "--port", "0"], "serve"), (["--version"], None), (["chat", "hi"], "chat"), ([], None)],
)
def test_the_command_is_the_first_argument_not_an_option(argv: list[str], command: str | None) -> None:
    assert command_of(argv) == command


def test_chat_and_serve_start_again_with_the_tunable_and_keep_other_tunables() -> None:
    for argv in (["serve", "--model", "m"], ["chat", "Hello"]):
        env = huge_pages_environment(argv, {"PATH": "/bin"}, mode="madvise", glibc=GLIBC)
        assert env == {"PATH": "/bin", "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
    kept = huge_pages_environment(
        ["serve"], {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=7"}, mode="madvise", glibc=GLIBC
    )
    assert kept == {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=7:glibc.malloc.hugetlb=1"}


@pytest.mark.parametrize(
    ("argv", "environ", "mode", "glibc"),
    [
        (["models", "list"], {}, "madvise", GLIBC),  # loads no model
        (["--help"], {}, "madvise", GLIBC),
        (["serve"], {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}, "madvise", GLIBC),  # started again
        (["serve"], {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}, "madvise", GLIBC),  # the user's choice
        (["serve"], {"RXSTREAM_HUGE_PAGES": "0"}, "madvise", GLIBC),  # turned off
        (["serve"], {}, "always", GLIBC),  # had already
        (["serve"], {}, "never", GLIBC),  # not to be had
        (["serve"], {}, None, GLIBC),  # no transparent huge pages (not Linux, or an old kernel)
        (["serve"], {}, "madvise", (2, 34)),  # glibc without the tunable
        (["serve"], {}, "madvise", None),  # musl
    ],
)
def test_no_restart_where_it_would_not_help(
    argv: list[str], environ: dict[str, str], mode: str | None, glibc: tuple[int, int] | None
) -> None:
    assert huge_pages_environment(argv, environ, mode=mode, glibc=glibc) is None


def test_the_kernel_mode_is_the_bracketed_word(tmp_path: Path) -> None:
    path = tmp_path / "enabled"
    path.write_text("always [madvise] never\n")
    assert thp_mode(str(path)) == "madvise"
    path.write_text("[always] madvise never\n")
    assert thp_mode(str(path)) == "always"
    path.write_text("garbage\n")
    assert thp_mode(str(path)) is None
    assert thp_mode(str(tmp_path / "missing")) is None


def applies_here() -> bool:
    glibc = glibc_version() or (0, 0)
    return sys.platform.startswith("linux") and thp_mode() == "madvise" and glibc >= (2, 35)


def environment_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("huge") / "tiny", seed=5)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_real_server_runs_with_the_tunable_in_the_same_process(tiny: Path) -> None:
    with serve_process(tiny) as sp:
        env = environment_of(sp.proc.pid)  # exec keeps the process id the caller knows
        assert sp.health()["status"] == "ok"
        status, _, _ = http_request(sp.address, "GET", "/v1/models")
        assert status == 200
    if applies_here():
        assert env["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=1"
    else:
        assert "GLIBC_TUNABLES" not in env


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_switch_turns_it_off(tiny: Path) -> None:
    with serve_process(tiny, env={"RXSTREAM_HUGE_PAGES": "0"}) as sp:
        env = environment_of(sp.proc.pid)
    assert "GLIBC_TUNABLES" not in env
