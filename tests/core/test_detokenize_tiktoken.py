"""tiktoken encodings: one built in the test from a BPE vocabulary, and the named ones (their
vocabularies rebuilt from the npm registry's js-tiktoken: :mod:`tests.tiktoken_vocab`)."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rxstream import StreamDetokenizer
from rxstream.detok import bytelevel_char_to_byte
from rxstream.testing import tokenizers as tf
from tests.core.test_detokenize_props import chunked, texts
from tests.tiktoken_vocab import tiktoken_encoding

tiktoken = pytest.importorskip("tiktoken", reason="tiktoken is not installed")

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


@functools.cache
def local_encoding() -> Any:
    """A tiktoken ``Encoding`` made from the ByteLevel test tokenizer's vocabulary (no download)."""
    tok = tf.bytelevel()
    char_to_byte = bytelevel_char_to_byte()
    ranks: dict[bytes, int] = {bytes([b]): b for b in range(256)}
    for token, _ in sorted(tok.get_vocab(with_added_tokens=False).items(), key=lambda kv: kv[1]):
        if all(c in char_to_byte for c in token):
            b = bytes(char_to_byte[c] for c in token)
            ranks.setdefault(b, len(ranks))
    special = {"<|endoftext|>": len(ranks), "<|fim_middle|>": len(ranks) + 1}
    return tiktoken.Encoding(
        "rxstream-test", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens=special
    )


@settings(max_examples=60, deadline=None)
@given(text=texts("bytelevel"), sizes=st.lists(st.integers(0, 4), max_size=6), skip=st.booleans())
def test_local_encoding_exact(text: str, sizes: list[int], skip: bool) -> None:
    enc = local_encoding()
    ids = enc.encode(text.replace("<|im_end|>", "<|fim_middle|>"), allowed_special="all")
    det = StreamDetokenizer(enc, skip_special_tokens=skip)
    assert det.exact
    deltas = [det.push(chunk) for chunk in chunked(ids, sizes)] + [det.finish()]
    special = {enc.encode_single_token(s) for s in enc.special_tokens_set}
    reference = [i for i in ids if not (skip and i in special)]
    expected = enc.decode(reference)
    assert "".join(deltas) == expected
    if "\ufffd" not in expected:
        assert not any("\ufffd" in d for d in deltas)


def test_local_encoding_out_of_vocab() -> None:
    enc = local_encoding()
    det = StreamDetokenizer(enc)
    with pytest.raises(ValueError, match=f"outside the vocabulary \\(size {enc.n_vocab}\\)"):
        det.push(enc.n_vocab)


@pytest.mark.network
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "o200k_harmony"])
def test_named_encodings(name: str) -> None:
    """The named encodings (their vocabularies rebuilt from js-tiktoken, hash-checked by tiktoken)
    stream exactly as ``decode``, special tokens kept or skipped, one id at a time."""
    enc = tiktoken_encoding(name)
    text = "naïve café 日本語 👨\u200d👩\u200d👧 🇩🇪 👍🏽 e\u0301 " * 5
    ids = enc.encode(text)
    det = StreamDetokenizer(enc)
    assert det.exact
    assert "".join(det.push(i) for i in ids) + det.finish() == enc.decode(ids)
    special = sorted(enc.special_tokens_set)[0]
    ids = enc.encode(f"{text}{special}{text}", allowed_special="all")
    for skip in (True, False):
        det = StreamDetokenizer(enc, skip_special_tokens=skip)
        expected = enc.decode(ids).replace(special, "") if skip else enc.decode(ids)
        assert "".join(det.push(i) for i in ids) + det.finish() == expected


@settings(max_examples=30, deadline=None)
@given(text=texts("bytelevel"), sizes=st.lists(st.integers(0, 4), max_size=6))
@pytest.mark.network
def test_o200k_exact_for_every_chunking(text: str, sizes: list[int]) -> None:
    enc = tiktoken_encoding("o200k_base")
    ids = enc.encode(text, disallowed_special=())
    det = StreamDetokenizer(enc)
    assert "".join([det.push(chunk) for chunk in chunked(ids, sizes)] + [det.finish()]) == enc.decode(ids)


def test_tables_do_not_keep_the_encoding_alive_and_are_per_encoding() -> None:
    """Two encodings (one a copy with other special ids) get their own tables; an encoding is
    not kept alive by the detokenizer's cache once its detokenizers are gone."""
    import gc
    import weakref

    base = local_encoding()
    other = tiktoken.Encoding(
        "rxstream-test-copy",
        pat_str=GPT2_PATTERN,
        mergeable_ranks=base._mergeable_ranks,
        special_tokens={"<|other|>": base.n_vocab},
    )
    ids = [*base.encode("naïve café 日本語"), base.n_vocab]
    for skip in (True, False):
        det = StreamDetokenizer(other, skip_special_tokens=skip)
        out = "".join(det.push(i) for i in ids) + det.finish()
        assert out == other.decode(ids[:-1]) + ("" if skip else "<|other|>")
    ref = weakref.ref(other)
    del det, other
    gc.collect()
    assert ref() is None
