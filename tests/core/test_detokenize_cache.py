"""The per-tokenizer tables follow the tokenizer: every kind of change that can change ``decode``
is seen by the next detokenizer built for it; tables are shared by identity only and do not keep
tokenizers alive."""

from __future__ import annotations

import gc
import json
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import pytest
import reactivex as rx
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers

from rxstream import StreamDetokenizer
from rxstream.operators import detokenize
from rxstream.testing import tokenizers as tf

TEXT = "def f(x):\n    return x  # naïve café 日本語 😀 <tool> done </tool>"


def _fresh(family: str = "bytelevel") -> Tokenizer:
    return Tokenizer.from_str(tf.all_tokenizers()[family].to_str())


def _stream(tok: Any, ids: list[int], skip: bool = True) -> str:
    det = StreamDetokenizer(tok, skip_special_tokens=skip)
    return "".join(det.push(i) for i in ids) + det.finish()


def _make_existing_special(tok: Tokenizer) -> list[int]:
    ids = tok.encode(TEXT).ids
    tok.add_special_tokens([tok.id_to_token(ids[1])])  # a model token becomes special
    return ids


def _add_tokens(tok: Tokenizer) -> list[int]:
    tok.add_tokens([AddedToken("<fresh>", normalized=False)])
    tok.add_special_tokens(["<|fresh-special|>"])
    return [*tok.encode(TEXT).ids, tok.token_to_id("<fresh>"), tok.token_to_id("<|fresh-special|>")]


def _added_becomes_special(tok: Tokenizer) -> list[int]:
    ids = [*tok.encode(TEXT).ids, tok.token_to_id("<tool>")]
    tok.add_special_tokens([AddedToken("<tool>", special=True, normalized=False)])
    return ids


def _replace_decoder(tok: Tokenizer) -> list[int]:
    ids = tok.encode(TEXT).ids
    tok.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Strip("d", 1, 0)])
    return ids


def _decoder_parameter(tok: Tokenizer) -> list[int]:
    ids = tok.encode(" " + TEXT).ids
    tok.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Strip(" ", 1, 0)])
    return ids


def _replace_model(tok: Tokenizer) -> list[int]:
    """A model whose vocabulary has the same size but other tokens at the same ids."""
    ids = tok.encode(TEXT).ids
    vocab = tok.get_vocab(with_added_tokens=False)
    tokens = sorted(vocab, key=vocab.__getitem__)
    rotated = {t: (vocab[t] + 7) % len(tokens) for t in tokens}
    tok.model = models.BPE(vocab=rotated, merges=[])
    return ids


def _normalizer_and_pre_tokenizer(tok: Tokenizer) -> list[int]:
    """They do not take part in decoding (the detokenizer must agree either way)."""
    ids = tok.encode(TEXT).ids
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return ids


MUTATIONS: dict[str, Callable[[Tokenizer], list[int]]] = {
    "existing-token-made-special": _make_existing_special,
    "tokens-added": _add_tokens,
    "added-token-made-special": _added_becomes_special,
    "decoder-replaced": _replace_decoder,
    "decoder-parameter-changed": _decoder_parameter,
    "model-replaced-same-size": _replace_model,
    "normalizer-and-pre-tokenizer": _normalizer_and_pre_tokenizer,
}


@pytest.mark.parametrize("skip", [True, False])
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_detokenizer_follows_tokenizer_changes(mutation: str, skip: bool) -> None:
    tok = _fresh()
    ids = tok.encode(TEXT).ids
    assert _stream(tok, ids, skip) == tok.decode(ids, skip_special_tokens=skip)  # tables built
    ids = MUTATIONS[mutation](tok)
    assert _stream(tok, ids, skip) == tok.decode(ids, skip_special_tokens=skip)


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_operator_built_before_the_change(mutation: str) -> None:
    """``detokenize(tok)`` built, then the tokenizer changes, then a subscription: the
    subscription decodes the way the tokenizer does when it starts."""
    tok = _fresh()
    op = detokenize(tok)
    ids = MUTATIONS[mutation](tok)
    out: list[str] = []
    rx.from_iterable(ids).pipe(op).subscribe(out.append)
    assert "".join(out) == tok.decode(ids)


def test_llama_decoder_replaced_with_windowed_chain() -> None:
    """From the exact table to a chain that needs the window, and back."""
    tok = _fresh("llama")
    byte_run = [tok.token_to_id(f"<0x{b:02X}>") for b in "🦀".encode()]
    ids = [*tok.encode("Grüße 日本語 😀 x").ids, *byte_run]
    assert StreamDetokenizer(tok).exact
    original = tok.decoder
    tok.decoder = tf.llama_windowed().decoder
    det = StreamDetokenizer(tok)
    assert not det.exact
    assert _stream(tok, ids) == tok.decode(ids)
    tok.decoder = original
    assert StreamDetokenizer(tok).exact
    assert _stream(tok, ids) == tok.decode(ids)


class _Wrapper:
    """A transformers-like tokenizer: ``backend_tokenizer`` is the ``tokenizers.Tokenizer``; it
    compares equal to every other wrapper (value semantics a cache must not rely on)."""

    def __init__(self, backend: Tokenizer) -> None:
        self.backend_tokenizer = backend

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Wrapper)

    def __hash__(self) -> int:
        return 0


def test_wrappers_that_compare_equal_do_not_share_tables() -> None:
    a, b = _fresh("bytelevel"), _fresh("wordpiece")
    wa, wb = _Wrapper(a), _Wrapper(b)
    assert wa == wb and hash(wa) == hash(wb)
    ids = b.encode("Hello , world ! unaffable").ids
    assert _stream(wa, a.encode(TEXT).ids) == a.decode(a.encode(TEXT).ids)
    assert _stream(wb, ids) == b.decode(ids)


def test_wrapper_backend_replaced() -> None:
    w = _Wrapper(_fresh("bytelevel"))
    ids = w.backend_tokenizer.encode(TEXT).ids
    assert _stream(w, ids) == w.backend_tokenizer.decode(ids)
    w.backend_tokenizer = _fresh("wordpiece")
    ids = w.backend_tokenizer.encode("Hello , world ! unaffable").ids
    assert _stream(w, ids) == w.backend_tokenizer.decode(ids)


def test_tables_do_not_keep_the_tokenizer_alive() -> None:
    tok = _fresh()
    ref = weakref.ref(tok)
    det = StreamDetokenizer(tok)
    det.push(tok.encode(TEXT).ids)
    del det, tok
    gc.collect()
    assert ref() is None


def test_skip_special_tokens_is_a_bool_everywhere() -> None:
    """A truthy or falsy non-bool (0, 1, numpy's bool) selects the same tables and decodes on the
    windowed path too."""
    tok = _fresh()
    tok.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Replace("ab", "AB")])  # window
    ids = [tok.token_to_id("<|endoftext|>"), *tok.encode(TEXT).ids]
    for skip in (0, 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the chain is windowed (and said to be inexact)
            det = StreamDetokenizer(tok, skip_special_tokens=skip)  # type: ignore[arg-type]
        out = "".join(det.push(i) for i in ids) + det.finish()
        assert out == tok.decode(ids, skip_special_tokens=bool(skip))


def test_fingerprint_cost_is_small() -> None:
    """Building a detokenizer for an unchanged tokenizer does not rebuild its table."""
    tok = _fresh()
    StreamDetokenizer(tok)
    a = StreamDetokenizer(tok).engine
    b = StreamDetokenizer(tok).engine
    assert a._texts is b._texts  # type: ignore[union-attr]


def test_serialized_tokenizer_json_unchanged() -> None:
    """Building detokenizers never changes the tokenizer."""
    tok = _fresh()
    before = json.loads(tok.to_str())
    StreamDetokenizer(tok)
    assert json.loads(tok.to_str()) == before
