"""The test helper that rebuilds tiktoken's vocabularies from js-tiktoken (tests/tiktoken_vocab.py)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from tests import tiktoken_vocab as tv

HELLO_WORLD = {"cl100k_base": [15339, 1917], "o200k_base": [24912, 2375]}
"""The ids every user of these encodings knows."""


def test_convert_writes_rank_order_lines() -> None:
    tokens = [base64.b64encode(b).decode() for b in (b"a", b"b", b" c", b"\xff")]
    ranks = f"! 2 {tokens[2]} {tokens[3]}\\n! 0 {tokens[0]} {tokens[1]}"
    module = 'export default {"pat_str":"x","bpe_ranks":"' + ranks + '"};'
    assert tv.convert(module).decode().splitlines() == [f"{t} {r}" for r, t in enumerate(tokens)]


def test_convert_rejects_a_token_that_is_not_base64() -> None:
    with pytest.raises(ValueError):
        tv.convert('export default {"bpe_ranks":"! 0 YQ== @@@"};')


def test_an_unreachable_registry_is_reported_as_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPM_CONFIG_REGISTRY", "http://127.0.0.1:9")
    with pytest.raises(tv.VocabUnavailable, match=r"cannot download http://127\.0\.0\.1:9/js-tiktoken/"):
        tv._tarball(tmp_path)
    assert not list(tmp_path.iterdir())


def test_the_cache_key_is_tiktokens() -> None:
    """tiktoken names its cached file by the sha1 of the blob URL (tiktoken/load.py)."""
    url = tv.blob_url("o200k_base")
    assert url == "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    assert hashlib.sha1(url.encode()).hexdigest() == "fb374d419588a4632f3f557e76b4b70aebbca790"


@pytest.mark.network
@pytest.mark.parametrize("name", sorted(tv.EXPECTED_SHA256))
def test_rebuilt_vocabulary_has_tiktokens_hash(name: str) -> None:
    """The rebuilt file's sha256 is the one tiktoken_ext/openai_public.py checks; tiktoken loads
    it from the cache (a wrong hash there would make it download, which fails offline)."""
    directory = tv.vocab_dir()
    data = (directory / f"{name}.tiktoken").read_bytes()
    assert hashlib.sha256(data).hexdigest() == tv.EXPECTED_SHA256[name]
    tiktoken_ext = pytest.importorskip("tiktoken_ext.openai_public")
    source = Path(tiktoken_ext.__file__).read_text()
    assert f'expected_hash="{tv.EXPECTED_SHA256[name]}"' in source
    enc = tv.tiktoken_encoding(name)
    assert enc.encode("hello world") == HELLO_WORLD[name]
    assert enc.decode_single_token_bytes(0) == b"!"
