"""StreamDetokenizer: exactness per tokenizer family, UTF-8 holding rules, errors, adapters, fallback."""

from __future__ import annotations

from typing import Any

import pytest
from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
from tokenizers import models as tk_models

from rxstream import StreamDetokenizer, TokenizerProtocol
from rxstream.detok import HFTokenizerAdapter, as_detok_tokenizer, incomplete_utf8_start
from rxstream.testing import tokenizers as tf
from tests.reference import prompt_decided

SAMPLES = [
    "Hello  world",
    " leading space and trailing ",
    "def f(x):\n    return x ** 2  # 😀\n",
    "naïve café — 日本語のテキスト, 中文 and 한국어",
    "family 👨\u200d👩\u200d👧\u200d👦 flag 🇩🇪🇫🇷 thumbs 👍🏽👋🏿 done",
    "e\u0301 a\u0308 o\u0303\u0304 Z\u0335\u0321\u031b combining",
    "text <|im_end|> more <|endoftext|> <tool>call</tool> ünïcödé",
    "<s> llama <s>bos</s> and [CLS] bert [SEP] . don't ! , 's",
    "\u2581 lone metaspace char and <0x41> literal",
    "",
    "   ",
    "😀",
]


def stream(det: StreamDetokenizer, ids: list[int]) -> list[str]:
    """Push ids one by one; return every non-empty delta including the flush."""
    out = [det.push(i) for i in ids]
    out.append(det.finish())
    return [d for d in out if d]


@pytest.mark.parametrize("name", ["bytelevel", "llama", "metaspace", "unigram", "wordpiece"])
@pytest.mark.parametrize("skip", [True, False])
def test_exact_on_samples(name: str, skip: bool) -> None:
    tok = tf.all_tokenizers()[name]
    for text in SAMPLES:
        ids = tok.encode(text).ids
        det = StreamDetokenizer(tok, skip_special_tokens=skip)
        assert det.exact, f"{name} should use the exact table path"
        deltas = stream(det, ids)
        expected = tok.decode(ids, skip_special_tokens=skip)
        assert "".join(deltas) == expected, (name, text)
        if "\ufffd" not in expected:
            assert all("\ufffd" not in d for d in deltas)


@pytest.mark.parametrize("name", ["bytelevel", "llama", "metaspace", "unigram", "wordpiece"])
def test_several_ids_per_push_same_text(name: str) -> None:
    tok = tf.all_tokenizers()[name]
    ids = tok.encode(SAMPLES[4] + SAMPLES[3]).ids
    one = StreamDetokenizer(tok)
    many = StreamDetokenizer(tok)
    a = "".join(one.push(i) for i in ids) + one.finish()
    b = many.push(ids[:3]) + many.push(ids[3:7]) + many.push([]) + many.push(ids[7:]) + many.finish()
    assert a == b == tok.decode(ids)


def _valid_prefix_tail(b: bytes) -> bool:
    """Brute force: can ``b`` still become valid UTF-8 by appending bytes?"""
    for extra in (
        b"\x80",
        b"\x80\x80",
        b"\x80\x80\x80",
        b"\xa0",
        b"\xa0\x80",
        b"\x90",
        b"\x90\x80\x80",
        b"\x8f",
        b"\x8f\x80",
        b"\x8f\x80\x80",
        b"\x9f",
        b"\x9f\x80",
        b"\xbf\x80",
        b"\xbf\x80\x80",
    ):
        try:
            (b + extra).decode("utf-8")
            return True
        except UnicodeDecodeError:
            continue
    return False


def test_incomplete_utf8_start_matches_brute_force() -> None:
    # every 1..3 byte tail over lead/continuation/ascii bytes
    interesting = [
        0x41,
        0x80,
        0x8F,
        0x90,
        0x9F,
        0xA0,
        0xBF,
        0xC0,
        0xC2,
        0xDF,
        0xE0,
        0xE4,
        0xED,
        0xEF,
        0xF0,
        0xF4,
        0xF5,
        0xFF,
    ]
    tails: list[bytes] = [bytes([a]) for a in interesting]
    tails += [bytes([a, b]) for a in interesting for b in interesting]
    tails += [bytes([a, b, c]) for a in interesting[7:] for b in interesting[:7] for c in interesting[:7]]
    for tail in tails:
        cut = incomplete_utf8_start(tail)
        assert len(tail) - cut <= 3
        held = tail[cut:]
        if held:
            assert _valid_prefix_tail(held), tail.hex()
        # nothing complete-able is emitted early: the longest completable suffix is held
        for k in range(1, len(tail) + 1):
            suffix = tail[-k:]
            if suffix[0] >= 0xC0 and _valid_prefix_tail(suffix) and not _complete(suffix):
                assert len(held) >= k, tail.hex()


def _complete(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def test_impossible_bytes_are_emitted_at_once() -> None:
    tok = tf.byte_tokenizer()
    det = StreamDetokenizer(tok)
    assert det.push(0xE4) == ""  # could still become 中
    assert det.push(0xB8) == ""
    assert det.push(0x41) == "\ufffdA"  # E4 B8 can no longer complete
    assert det.push(0xED) == ""
    assert det.push(0xA0) == "\ufffd\ufffd"  # ED A0 starts a surrogate: never valid
    assert det.push(0xFF) == "\ufffd"
    assert det.push(0xF0) == ""
    assert det.push(0x9F) == ""
    assert det.push(0x98) == ""
    assert det.push(0x80) == "😀"
    assert det.push(0xC3) == ""
    assert det.finish() == "\ufffd"


def test_prompt_context_and_split_character() -> None:
    tok = tf.byte_tokenizer()
    prompt = [*"héllo ".encode(), 0xF0, 0x9F]  # the prompt ends in the middle of 😀
    det = StreamDetokenizer(tok, prompt_ids=prompt)
    assert det.push(0x98) == ""
    assert det.push([0x80, 0x21]) == "😀!"
    assert det.finish() == ""
    # the prompt's broken tail is the prompt's: its U+FFFD is not emitted
    det = StreamDetokenizer(tok, prompt_ids=prompt)
    assert det.push(0x41) == "A"
    det = StreamDetokenizer(tok, prompt_ids=prompt)
    assert det.finish() == ""


def test_prompt_spacing_llama_and_wordpiece() -> None:
    for tok in (tf.llama(), tf.metaspace(), tf.unigram(), tf.wordpiece()):
        ids = tok.encode("The quick brown fox jumps").ids
        for k in range(1, len(ids)):
            det = StreamDetokenizer(tok, prompt_ids=ids[:k])
            out = "".join(det.push(i) for i in ids[k:]) + det.finish()
            full, pre = tok.decode(ids), tok.decode(ids[:k])
            assert full.startswith(pre)
            assert out == full[len(pre) :]


def test_out_of_vocab_and_bad_args() -> None:
    tok = tf.bytelevel()
    det = StreamDetokenizer(tok)
    size = as_detok_tokenizer(tok).vocab_size
    with pytest.raises(ValueError, match=rf"token id {size} is outside the vocabulary \(size {size}\)"):
        det.push(size)
    with pytest.raises(ValueError, match="token id -1"):
        det.push(-1)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        StreamDetokenizer(tok, prompt_ids=[1, 10**9])
    with pytest.raises(TypeError, match=r"unsupported tokenizer.*tokenizers\.Tokenizer.*tiktoken"):
        StreamDetokenizer(object())
    with pytest.raises(ValueError, match="window"):
        StreamDetokenizer(tok, window=0)


def test_transformers_style_backend_tokenizer() -> None:
    class FastTokenizerLike:
        def __init__(self, backend: Tokenizer) -> None:
            self.backend_tokenizer = backend

    tok = tf.llama()
    det = StreamDetokenizer(FastTokenizerLike(tok))
    ids = tok.encode(SAMPLES[3]).ids
    assert "".join(stream(det, ids)) == tok.decode(ids)


def test_adapter_cache_and_staleness() -> None:
    tok = Tokenizer.from_str(tf.bytelevel().to_str())
    a = as_detok_tokenizer(tok)
    assert isinstance(a, HFTokenizerAdapter)
    assert as_detok_tokenizer(tok).decode_table(True) is a.decode_table(True)  # shared tables
    size = a.vocab_size
    tok.add_tokens(["<new-token>"])
    b = as_detok_tokenizer(tok)
    assert b.decode_table(True) is not None and b.vocab_size == size + 1
    new_id = tok.token_to_id("<new-token>")
    det = StreamDetokenizer(tok)
    assert det.push(new_id) == "<new-token>"


def _windowed_tokenizer() -> Tokenizer:
    """ByteLevel BPE whose decoder also strips a trailing space: no exact table exists."""
    tok = Tokenizer.from_str(tf.bytelevel().to_str())
    tok.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Strip(" ", 0, 1)])
    return tok


def test_windowed_fallback_on_unsupported_decoder() -> None:
    tok = _windowed_tokenizer()
    for text in SAMPLES:
        ids = tok.encode(text).ids
        if not ids:
            continue  # this decoder panics on an empty id list (a tokenizers bug)
        det = StreamDetokenizer(tok)
        assert not det.exact
        deltas = stream(det, ids)
        expected = tok.decode(ids)
        # a trailing-strip decoder cannot be streamed exactly: everything but trailing spaces is
        assert "".join(deltas).rstrip(" ") == expected.rstrip(" "), text
        if "\ufffd" not in expected:
            assert all("\ufffd" not in d for d in deltas)


def test_windowed_fallback_prompt_and_bounded_memory() -> None:
    tok = _windowed_tokenizer()
    text = "abc 日本語 😀 " * 200
    ids = tok.encode(text).ids
    det = StreamDetokenizer(tok, prompt_ids=ids[:5], window=4, cap=6)
    out = "".join(det.push(i) for i in ids[5:]) + det.finish()
    full, pre = tok.decode(ids), tok.decode(ids[:5])
    assert pre.endswith("\ufffd")  # the prompt ends inside a character: it is emitted when complete
    stable = pre.rstrip("\ufffd")
    assert out.rstrip() == full[len(stable) :].rstrip()
    engine: Any = det.push_one.__self__
    assert len(engine._ctx) <= 4 and len(engine._pend) <= 6


class _CustomTokenizer:
    """A user tokenizer implementing the protocol with no table: ids are code points + 1."""

    vocab_size = 0x110000

    def decode(self, ids: list[int], skip_special_tokens: bool) -> str:
        return "".join(chr(i - 1) for i in ids if i > 0 or not skip_special_tokens)

    def decode_table(self, skip_special_tokens: bool) -> None:
        return None


def test_custom_protocol_tokenizer() -> None:
    custom = _CustomTokenizer()
    assert isinstance(custom, TokenizerProtocol)
    det = StreamDetokenizer(custom)
    ids = [ord(c) + 1 for c in "héllo 😀"]
    assert "".join(stream(det, ids)) == "héllo 😀"


def test_windowed_fallback_bpe_decoder_is_exact() -> None:
    """A BPEDecoder (``</w>`` word suffix) depends on which token is last: no table, but the
    windowed decode reproduces ``decode`` on valid text."""
    tok = Tokenizer(tk_models.BPE(end_of_word_suffix="</w>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    tok.train_from_iterator(
        tf.corpus(100_000),
        trainers.BpeTrainer(vocab_size=800, end_of_word_suffix="</w>", show_progress=False),
    )
    for text in SAMPLES[:5]:
        ids = tok.encode(text).ids
        det = StreamDetokenizer(tok)
        assert not det.exact
        assert "".join(stream(det, ids)) == tok.decode(ids)


def test_documented_byte_fallback_difference() -> None:
    """Where a byte run is invalid, HF's ByteFallback decoder rewrites the whole run as U+FFFD (one
    per byte), complete characters included; the stream has already emitted the complete
    characters and never retracts them: it emits one U+FFFD per invalid subpart instead."""
    tok = tf.llama()
    ids = [tok.token_to_id(f"<0x{b:02X}>") for b in "中".encode() + b"\xff"]
    det = StreamDetokenizer(tok)
    deltas = stream(det, ids)
    assert deltas == ["中", "\ufffd"]
    assert tok.decode(ids) == "\ufffd" * 4


@pytest.mark.parametrize("replacement", ["\u2581", "_"])
@pytest.mark.parametrize("scheme", ["always", "first", "never"])
def test_metaspace_after_byte_fallback_rewrites_byte_spelled_replacement(
    replacement: str, scheme: str
) -> None:
    """A ``Metaspace`` step after ``ByteFallback`` sees a run of byte tokens as one string: when the
    bytes spell the replacement character it becomes a space (or vanishes in the first run)."""
    tok = Tokenizer.from_str(tf.metaspace().to_str())
    tok.decoder = decoders.Sequence(
        [decoders.ByteFallback(), decoders.Metaspace(replacement=replacement, prepend_scheme=scheme)]
    )

    def byte_ids(text: str) -> list[int]:
        return [tok.token_to_id(f"<0x{b:02X}>") for b in text.encode()]

    word = tok.encode("hello world").ids
    special = tok.token_to_id("<s>")
    cases = [
        word + byte_ids(replacement) + word,  # was "hello world▁hello world"
        byte_ids(replacement) + word,
        byte_ids("a" + replacement + "b") + word + byte_ids(replacement + "é" + replacement),
        [special, *byte_ids(replacement), *word],
        byte_ids(replacement),
    ]
    for ids in cases:
        for skip in (True, False):
            det = StreamDetokenizer(tok, skip_special_tokens=skip)
            assert det.exact
            assert "".join(stream(det, ids)) == tok.decode(ids, skip_special_tokens=skip), (ids, skip)
            for k in range(1, len(ids)):  # the run rule continues from the prompt
                det = StreamDetokenizer(tok, skip_special_tokens=skip, prompt_ids=ids[:k])
                full = tok.decode(ids, skip_special_tokens=skip)
                pre = tok.decode(ids[:k], skip_special_tokens=skip)
                if full.startswith(pre) and "\ufffd" not in pre:
                    assert "".join(stream(det, ids[k:])) == full[len(pre) :], (ids, k, skip)


def test_push_accepts_numpy_ids_and_rejects_bools() -> None:
    np = pytest.importorskip("numpy")
    tok = tf.bytelevel()
    ids = tok.encode("naïve 😀 text").ids
    det = StreamDetokenizer(tok, prompt_ids=np.array(ids[:2]))
    out = det.push(np.int64(ids[2])) + det.push(np.array(ids[3:5])) + det.push([np.int32(i) for i in ids[5:]])
    assert out + det.finish() == tok.decode(ids)[len(tok.decode(ids[:2])) :]
    det = StreamDetokenizer(tok)
    with pytest.raises(TypeError, match="bool"):
        det.push(True)  # was: silently the text of id 1
    with pytest.raises(TypeError, match="bool"):
        det.push([65, False])
    with pytest.raises(TypeError, match="prompt_ids"):
        StreamDetokenizer(tok, prompt_ids=[True])
    empty, none = StreamDetokenizer(tok, prompt_ids=[]), StreamDetokenizer(tok, prompt_ids=None)
    assert empty.push(ids) == none.push(ids)


def test_million_token_stream_keeps_memory_flat() -> None:
    """SEMANTICS §4: memory held per stream is bounded (no list of all ids)."""
    import itertools
    import time
    import tracemalloc

    tok = tf.llama()
    pattern = tok.encode("Hello world, 你好 😀 naïve <s> text\n").ids
    pattern += [tok.token_to_id(f"<0x{b:02X}>") for b in "👨\u200d👩\u200d👧".encode()]
    det = StreamDetokenizer(tok)
    push = det.push_one
    for i in itertools.islice(itertools.cycle(pattern), 10_000):  # warm up
        push(i)
    total = 0
    start = time.perf_counter()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        for i in itertools.islice(itertools.cycle(pattern), 1_000_000):
            total += len(push(i))
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total > 0
    assert peak - before < 64 * 1024, (before, after, peak)
    assert after - before < 16 * 1024, (before, after, peak)
    assert time.perf_counter() - start < 30


def test_windowed_fallback_long_byte_fallback_run() -> None:
    """A window that started inside a character made a ByteFallback decoder turn the whole byte
    run into U+FFFD, and the stream emitted them ("👨\u200d" then 18 U+FFFD for a ZWJ family)."""
    tok = Tokenizer.from_str(tf.llama().to_str())
    tok.decoder = decoders.Sequence(  # Replace after Fuse: no exact table
        [decoders.ByteFallback(), decoders.Fuse(), decoders.Replace("\u2581", " "), decoders.Strip(" ", 1, 0)]
    )
    family = "👨\u200d👩\u200d👧\u200d👦"
    for text in (f"naïve {family} café", f"{family}{family} x 🇩🇪🇫🇷 {family}"):
        ids = tok.encode(text).ids
        assert len(ids) > 25  # the emoji are runs of byte tokens
        det = StreamDetokenizer(tok)
        assert not det.exact
        deltas = stream(det, ids)
        assert "".join(deltas) == tok.decode(ids) == text
        assert all("\ufffd" not in d for d in deltas)


@pytest.mark.parametrize("window", [6, 2, 1])
def test_windowed_fallback_prompt_ends_inside_byte_run(window: int) -> None:
    """Prompt ending inside (or with a window starting inside) a run of byte tokens, windowed path.

    The ByteFallback decoder turns the prompt's whole byte run into U+FFFD while its last character
    is incomplete, so the prompt's complete characters were taken for undecided text: a prompt
    ending after 🇩 and two bytes of 🇪 gave "🇩🇪" (🇩 again), and a window starting inside 🇩 gave
    "\ufffd" * 7 + " " instead of "🇪 ".
    """
    tok = tf.llama_windowed()
    family = "👨\u200d👩\u200d👧\u200d👦"
    for text in ("x 🇩🇪 y", f"a {family}中 b", "🇩🇪", f"{family}{family}"):
        ids = tok.encode(text).ids
        for k in range(len(ids) + 1):
            det = StreamDetokenizer(tok, prompt_ids=ids[:k], window=window)
            assert not det.exact
            deltas = stream(det, ids[k:])
            expected = tok.decode(ids)[len(prompt_decided(tok, ids, k)) :]
            assert "".join(deltas) == expected, (text, k, deltas)
            assert all("\ufffd" not in d for d in deltas), (text, k, deltas)


@pytest.mark.parametrize("decoder", tf.UNIGRAM_BYTE_DECODERS)
def test_unigram_byte_fallback_every_split(decoder: str) -> None:
    """Unigram with byte fallback: characters the vocabulary lacks come out of byte tokens, a
    ``▁`` spelled in byte tokens is decoded as ``decode`` does (a space only where the decoder's
    ``Metaspace`` step sees it), and every prompt/generation split gives the rest exactly."""
    tok = tf.unigram_byte_fallback(decoder)
    meta = [tok.token_to_id(f"<0x{b:02X}>") for b in "\u2581".encode()]
    emoji = "👨\u200d👩\u200d👧\u200d👦"
    for ids in (
        tok.encode(f"x 🇩🇪 y {emoji} 𝔘𝔫𝔦 ✓ 中文").ids,
        meta + tok.encode("hello 😀").ids + meta + tok.encode("🦀").ids,
        [tok.token_to_id("</s>"), *meta, *tok.encode(" a").ids],
    ):
        assert any(tok.id_to_token(i).startswith("<0x") for i in ids)
        for skip in (True, False):
            full = tok.decode(ids, skip_special_tokens=skip)
            assert "".join(stream(StreamDetokenizer(tok, skip_special_tokens=skip), ids)) == full
            for k in range(len(ids) + 1):
                det = StreamDetokenizer(tok, skip_special_tokens=skip, prompt_ids=ids[:k])
                deltas = stream(det, ids[k:])
                decided = prompt_decided(tok, ids, k, skip)
                assert "".join(deltas) == full[len(decided) :], (decoder, ids, k, skip, deltas)
                assert all("\ufffd" not in d for d in deltas), (decoder, ids, k, deltas)
