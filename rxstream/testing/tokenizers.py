"""Real ``tokenizers`` tokenizers trained in-process on local text, for tests and benchmarks.

``from rxstream.testing import tokenizers`` then ``tokenizers.bytelevel()``, ``tokenizers.llama()``
(SentencePiece-style BPE with byte fallback), ``tokenizers.metaspace()``, ``tokenizers.unigram()``,
``tokenizers.wordpiece()``, ``tokenizers.byte_tokenizer()``: the tokenizer families real models
use, built in well under a second each with no download, so a test can check a streaming parser
against a real tokenizer's splits.

Every builder is cached for the test session (training takes well under a second each). The
corpus is the Python standard library's own source files (always present wherever Python runs)
plus a small deterministic block of multilingual text, so that some CJK and accented characters
get merged tokens while most emoji and rare characters stay split across byte tokens.
"""

from __future__ import annotations

import functools
import json
import random
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from rxstream.detok import bytelevel_char_to_byte

__all__ = [
    "BYTELEVEL_ADDED",
    "BYTELEVEL_SPECIAL",
    "all_tokenizers",
    "byte_tokenizer",
    "bytelevel",
    "corpus",
    "decoder_sweep_base",
    "llama",
    "llama_windowed",
    "metaspace",
    "unigram",
    "unigram_byte_fallback",
    "wordpiece",
]

BYTELEVEL_SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""Special tokens of the ByteLevel tokenizer (skipped with ``skip_special_tokens=True``)."""
BYTELEVEL_ADDED = ("<tool>", "</tool>", "ünïcödé")
"""Added, non-special tokens of the ByteLevel tokenizer (always decoded)."""

_MULTILINGUAL = (
    "Grüße aus München, schöne Äpfel und Öl. Ça va très bien, merci beaucoup. "
    "日本語のテキストです。中文文本在这里。한국어 텍스트입니다. "
    "Русский текст здесь. Ελληνικά γράμματα. עברית כאן. العربية هنا. "
    "naïve café résumé façade coöperate piñata jalapeño "
)


def _stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in root.glob("*.py") if p.is_file())


@functools.cache
def corpus(max_bytes: int = 400_000) -> tuple[str, ...]:
    """Training lines: standard-library source (up to ``max_bytes``) plus multilingual text."""
    lines: list[str] = []
    total = 0
    for path in _stdlib_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for line in text.splitlines():
            lines.append(line)
            total += len(line)
        if total >= max_bytes:
            break
    rng = random.Random(1234)
    words = _MULTILINGUAL.split()
    for _ in range(400):
        lines.append(" ".join(rng.choice(words) for _ in range(12)))
    return tuple(lines)


def _lines(max_bytes: int) -> Iterator[str]:
    yield from corpus(max_bytes)


def _add_byte_tokens(tok: Tokenizer) -> Tokenizer:
    """Return a copy of a BPE tokenizer whose model vocabulary also holds ``<0x00>``..``<0xFF>``."""
    data = json.loads(tok.to_str())
    vocab: dict[str, int] = data["model"]["vocab"]
    added_ids = {t["id"] for t in data.get("added_tokens", [])}
    next_id = max([*vocab.values(), *added_ids]) + 1
    for b in range(256):
        name = f"<0x{b:02X}>"
        if name not in vocab:
            vocab[name] = next_id
            next_id += 1
    return Tokenizer.from_str(json.dumps(data))


@functools.cache
def bytelevel(vocab_size: int = 2000, max_bytes: int = 400_000) -> Tokenizer:
    """GPT-2 style ByteLevel BPE with special tokens and added (non-special) tokens."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=list(BYTELEVEL_SPECIAL),
        show_progress=False,
    )
    tok.train_from_iterator(_lines(max_bytes), trainer=trainer)
    tok.add_tokens([AddedToken(t, normalized=False) for t in BYTELEVEL_ADDED])
    return tok


def _train_sentencepiece_bpe(tok: Tokenizer, vocab_size: int, max_bytes: int) -> None:
    """Train a SentencePiece-style BPE (``<unk>``, ``<s>``, ``</s>``; a small alphabet, so that
    rare characters fall back to byte tokens) on the corpus."""
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<unk>", "<s>", "</s>"],
        limit_alphabet=120,
        show_progress=False,
    )
    tok.train_from_iterator(_lines(max_bytes), trainer=trainer)


@functools.cache
def llama(vocab_size: int = 2000, max_bytes: int = 400_000) -> Tokenizer:
    """SentencePiece-style byte-fallback BPE: ``▁`` normalizer, Replace/ByteFallback/Fuse/Strip decoder."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    _train_sentencepiece_bpe(tok, vocab_size, max_bytes)
    return _add_byte_tokens(tok)


@functools.cache
def llama_windowed() -> Tokenizer:
    """The :func:`llama` model with a decoder no per-id table reproduces (``Replace`` after ``Fuse``),
    so that detokenization takes the windowed fallback over runs of byte-fallback tokens."""
    tok = Tokenizer.from_str(llama().to_str())
    tok.decoder = decoders.Sequence(
        [decoders.ByteFallback(), decoders.Fuse(), decoders.Replace("\u2581", " "), decoders.Strip(" ", 1, 0)]
    )
    return tok


@functools.cache
def metaspace(vocab_size: int = 1500, max_bytes: int = 300_000) -> Tokenizer:
    """Metaspace pre-tokenizer BPE with byte fallback and a ByteFallback + Metaspace decoder."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(replacement="▁")])
    _train_sentencepiece_bpe(tok, vocab_size, max_bytes)
    return _add_byte_tokens(tok)


@functools.cache
def unigram(vocab_size: int = 1500, max_bytes: int = 200_000) -> Tokenizer:
    """T5 style Unigram with a Metaspace pre-tokenizer and decoder."""
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(
        vocab_size=vocab_size,
        special_tokens=["<pad>", "</s>", "<unk>"],
        unk_token="<unk>",
        show_progress=False,
    )
    tok.train_from_iterator(_lines(max_bytes), trainer=trainer)
    return tok


UNIGRAM_BYTE_DECODERS = ("sentencepiece", "metaspace", "fuse", "windowed")
"""Decoders of :func:`unigram_byte_fallback`, as conversions of SentencePiece models write them."""


@functools.cache
def unigram_byte_fallback(decoder: str = "sentencepiece") -> Tokenizer:
    """SentencePiece Unigram with byte fallback, built by hand (``UnigramTrainer`` ignores
    ``byte_fallback``): the trained :func:`unigram` pieces and scores, plus ``<0x00>``..``<0xFF>``
    pieces used for every character the vocabulary lacks (emoji, most CJK).

    ``decoder`` picks the decoder chain:

    * ``"sentencepiece"``: ``Replace("▁", " ")``, ``ByteFallback``, ``Fuse``, ``Strip(" ", 1, 0)``
      (what converting a byte-fallback SentencePiece model gives);
    * ``"metaspace"``: ``ByteFallback`` then ``Metaspace`` (a Unigram tokenizer's own decoder with
      ``ByteFallback`` put in front);
    * ``"fuse"``: ``ByteFallback``, ``Fuse`` (``▁`` stays in the text);
    * ``"windowed"``: ``ByteFallback``, ``Fuse``, ``Replace``, ``Strip`` (no exact table: the
      detokenizer falls back to its window).
    """
    data = json.loads(unigram().to_str())
    pieces: list[tuple[str, float]] = [(str(p), float(s)) for p, s in data["model"]["vocab"]]
    known = {p for p, _ in pieces}
    pieces += [(f"<0x{b:02X}>", 0.0) for b in range(256) if f"<0x{b:02X}>" not in known]
    model = models.Unigram(pieces, unk_id=data["model"]["unk_id"], byte_fallback=True)
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    chains = {
        "sentencepiece": [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ],
        "metaspace": [decoders.ByteFallback(), decoders.Metaspace(replacement="▁", prepend_scheme="always")],
        "fuse": [decoders.ByteFallback(), decoders.Fuse()],
        "windowed": [
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Replace("▁", " "),
            decoders.Strip(" ", 1, 0),
        ],
    }
    tok.decoder = decoders.Sequence(chains[decoder])
    tok.add_special_tokens(["<pad>", "</s>", "<unk>"])
    return tok


@functools.cache
def wordpiece(vocab_size: int = 2000, max_bytes: int = 300_000) -> Tokenizer:
    """BERT style WordPiece (BertNormalizer, BertPreTokenizer, WordPiece decoder with cleanup)."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"],
        show_progress=False,
    )
    tok.train_from_iterator(_lines(max_bytes), trainer=trainer)
    return tok


@functools.cache
def byte_tokenizer() -> Tokenizer:
    """A ByteLevel tokenizer without merges whose id ``n`` is the byte ``n`` (for diagrams)."""
    byte_to_char = {b: c for c, b in bytelevel_char_to_byte().items()}
    vocab = {byte_to_char[b]: b for b in range(256)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def all_tokenizers() -> dict[str, Tokenizer]:
    """Every tokenizer family by name."""
    return {
        "bytelevel": bytelevel(),
        "llama": llama(),
        "metaspace": metaspace(),
        "unigram": unigram(),
        "wordpiece": wordpiece(),
    }


SWEEP_SPECIAL = ("<s>", "</s>", "<pad>")
"""Special tokens of every :func:`decoder_sweep_base` tokenizer."""
SWEEP_ADDED = ("<tool>", "x\u2581y", "##ab", "</w>")
"""Added, non-special tokens of every :func:`decoder_sweep_base` tokenizer (they go through the
decoder too: ``▁``, ``##`` and ``</w>`` inside them meet Metaspace, WordPiece and BPEDecoder)."""
SWEEP_BASES = ("llama", "wordpiece", "bytelevel", "mixed")


@functools.cache
def _mixed_vocab() -> tuple[str, ...]:
    """Token strings from every trained family, plus pieces the decoders act on (``</w>``
    suffixes, CTC delimiters and repeats, strip and replace characters, runs of ``▁``)."""
    names: dict[str, None] = {}
    for tok in (llama(), wordpiece(), bytelevel()):
        vocab = tok.get_vocab(with_added_tokens=False)
        for token, _ in sorted(vocab.items(), key=lambda kv: kv[1])[:700]:
            names[token] = None
    for b in range(256):
        names[f"<0x{b:02X}>"] = None
    for extra in (
        "\u2581",
        "\u2581\u2581",
        " ",
        "  ",
        "|",
        "a",
        "a</w>",
        "b</w>",
        "de</w>",
        "</w>x",
        "##",
        "<0x",
        "41>",
        "<0x+A>",
        "\u2581a\u2581",
        "Ġ",
        "ĠĠ",
        " ' ",
        " .",
        " n't",
        "\ufffd",
    ):
        names[extra] = None
    return tuple(names)


@functools.cache
def _sweep_json(base: str) -> str:
    if base == "mixed":
        tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(_mixed_vocab())}, unk_token="a"))
    else:
        trained = {"llama": llama, "wordpiece": wordpiece, "bytelevel": bytelevel}[base]()
        tok = Tokenizer.from_str(trained.to_str())
    tok.add_special_tokens(list(SWEEP_SPECIAL))
    tok.add_tokens([AddedToken(t, normalized=False) for t in SWEEP_ADDED])
    return tok.to_str()


def decoder_sweep_base(base: str, decoder: Any) -> Tokenizer:
    """A fresh tokenizer (a new object every call) with the vocabulary of ``base`` (one of
    :data:`SWEEP_BASES`: a trained family, or ``"mixed"``, a WordLevel vocabulary that holds tokens
    of all of them, byte tokens and pieces the decoders act on), :data:`SWEEP_SPECIAL` and
    :data:`SWEEP_ADDED`, and ``decoder`` (a ``tokenizers.decoders`` object, or None for none)."""
    tok = Tokenizer.from_str(_sweep_json(base))
    tok.decoder = decoder
    return tok
