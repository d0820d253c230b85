"""Properties of StreamDetokenizer (SEMANTICS §4), checked with hypothesis on real tokenizers."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from rxstream import StreamDetokenizer
from rxstream.testing import tokenizers as tf
from tests.reference import prompt_decided

FAMILIES = ("bytelevel", "llama", "metaspace", "unigram", "wordpiece")
SPECIALS = {
    "bytelevel": [*tf.BYTELEVEL_SPECIAL, *tf.BYTELEVEL_ADDED],
    "llama": ["<s>", "</s>", "<unk>"],
    "metaspace": ["<s>", "</s>"],
    "unigram": ["</s>", "<pad>"],
    "unigram_byte_fallback": ["</s>", "<pad>", "<unk>"],
    "wordpiece": ["[CLS]", "[SEP]", "[MASK]"],
}
EMOJI = [
    "👨\u200d👩\u200d👧\u200d👦",
    "🧑🏾\u200d💻",
    "🏳️\u200d🌈",
    "🇩🇪",
    "🇯🇵🇰🇷",
    "👍🏽",
    "👋🏿",
    "❤️",
    "😀",
    "🫠",
    "🦀",
]

settings.register_profile(
    "detok",
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SETTINGS = settings.get_profile("detok")

_words = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCXYZ0123456789 .,!?'\n\t-_()", max_size=12)
_cjk = st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x4FFF), min_size=1, max_size=4)
_hangul = st.text(alphabet=st.characters(min_codepoint=0xAC00, max_codepoint=0xAC40), min_size=1, max_size=3)
_combining = st.builds(
    lambda base, marks: base + marks,
    st.sampled_from("aeiouzAZ"),
    st.text(alphabet=st.characters(min_codepoint=0x300, max_codepoint=0x36F), min_size=1, max_size=3),
)
_any = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\ufffd"), max_size=4
)


def texts(family: str) -> st.SearchStrategy[str]:
    """Random text: words, emoji sequences, CJK, combining marks, special tokens, anything."""
    fragment = st.one_of(
        _words,
        _words,
        _cjk,
        _hangul,
        _combining,
        st.sampled_from(EMOJI),
        st.sampled_from(SPECIALS[family]),
        _any,
    )
    return st.lists(fragment, max_size=12).map("".join)


def chunked(ids: Sequence[int], sizes: Sequence[int]) -> list[list[int]]:
    """Cut ``ids`` into consecutive chunks of the given sizes (cycled; 0 gives an empty chunk)."""
    out: list[list[int]] = []
    k = 0
    j = 0
    while k < len(ids):
        n = sizes[j % len(sizes)] if sizes else 1
        j += 1
        out.append(list(ids[k : k + n]))
        k += n
        if j > 10 * len(ids) + 10:
            out.append(list(ids[k:]))
            break
    return out


def run(
    tok: Tokenizer, items: Sequence[Sequence[int]], skip: bool, prompt: Sequence[int] | None = None
) -> list[str]:
    det = StreamDetokenizer(tok, skip_special_tokens=skip, prompt_ids=prompt)
    out = [det.push(item) for item in items]
    out.append(det.finish())
    return out


def byte_ids(tok: Tokenizer, text: str) -> list[int]:
    """The byte-fallback token ids of ``text``'s UTF-8 bytes."""
    out = []
    for b in text.encode("utf-8"):
        i = tok.token_to_id(f"<0x{b:02X}>")
        assert i is not None
        out.append(i)
    return out


def _check_exact(tok: Tokenizer, ids: list[int], sizes: list[int], skip: bool) -> None:
    deltas = run(tok, chunked(ids, sizes), skip)
    expected = tok.decode(ids, skip_special_tokens=skip)
    assert "".join(deltas) == expected
    if "\ufffd" not in expected:
        assert not any("\ufffd" in d for d in deltas), deltas


def _exact_property(family: str) -> None:
    tok = tf.all_tokenizers()[family]

    @SETTINGS
    @given(text=texts(family), sizes=st.lists(st.integers(0, 4), max_size=6), skip=st.booleans())
    def prop(text: str, sizes: list[int], skip: bool) -> None:
        _check_exact(tok, tok.encode(text).ids, sizes, skip)

    prop()


def test_exact_bytelevel() -> None:
    _exact_property("bytelevel")


def test_exact_llama() -> None:
    _exact_property("llama")


def test_exact_metaspace() -> None:
    _exact_property("metaspace")


def test_exact_unigram() -> None:
    _exact_property("unigram")


def test_exact_wordpiece() -> None:
    _exact_property("wordpiece")


@SETTINGS
@given(
    parts=st.lists(st.tuples(texts("llama"), st.booleans()), min_size=1, max_size=6),
    sizes=st.lists(st.integers(0, 4), max_size=6),
    skip=st.booleans(),
)
def test_random_byte_fallback_runs(parts: list[tuple[str, bool]], sizes: list[int], skip: bool) -> None:
    """Text mixed with runs of byte-fallback tokens (valid UTF-8 as a whole)."""
    for family in ("llama", "metaspace"):
        tok = tf.all_tokenizers()[family]
        ids: list[int] = []
        for text, as_bytes in parts:
            ids += byte_ids(tok, text) if as_bytes else tok.encode(text).ids
        _check_exact(tok, ids, sizes, skip)


@SETTINGS
@given(data=st.data(), sizes=st.lists(st.integers(1, 4), max_size=6))
def test_bytelevel_arbitrary_ids_even_invalid_utf8(data: st.DataObject, sizes: list[int]) -> None:
    """ByteLevel decodes bytes lossily like Python: equal to decode() even for invalid UTF-8."""
    tok = tf.bytelevel()
    n = tok.get_vocab_size(with_added_tokens=True)
    ids = data.draw(st.lists(st.integers(0, n - 1), max_size=30))
    skip = data.draw(st.booleans())
    deltas = run(tok, chunked(ids, sizes), skip)
    assert "".join(deltas) == tok.decode(ids, skip_special_tokens=skip)


@SETTINGS
@given(data=st.data())
def test_random_ids_all_families(data: st.DataObject) -> None:
    """Any id sequence: exact whenever its bytes are valid UTF-8 (decode shows no U+FFFD)."""
    for family, tok in tf.all_tokenizers().items():
        n = tok.get_vocab_size(with_added_tokens=True)
        ids = data.draw(st.lists(st.integers(0, n - 1), max_size=20), label=family)
        expected = tok.decode(ids)
        deltas = run(tok, [[i] for i in ids], True)
        if "\ufffd" not in expected:
            assert "".join(deltas) == expected, family


def _prompt_property(family: str) -> None:
    tok = tf.all_tokenizers()[family]

    @SETTINGS
    @given(text=texts(family), data=st.data(), skip=st.booleans())
    def prop(text: str, data: st.DataObject, skip: bool) -> None:
        ids = tok.encode(text).ids
        k = data.draw(st.integers(0, len(ids)), label="split")
        prompt, gen = ids[:k], ids[k:]
        out = "".join(run(tok, [[i] for i in gen], skip, prompt))
        full = tok.decode(ids, skip_special_tokens=skip)
        assert out == full[len(prompt_decided(tok, ids, k, skip)) :]

    prop()


def test_prompt_bytelevel() -> None:
    _prompt_property("bytelevel")


def test_prompt_llama() -> None:
    _prompt_property("llama")


def test_prompt_metaspace() -> None:
    _prompt_property("metaspace")


def test_prompt_wordpiece() -> None:
    _prompt_property("wordpiece")


@SETTINGS
@given(data=st.data())
def test_prompt_split_byte_fallback(data: st.DataObject) -> None:
    """A character split across the prompt/generation boundary in byte-fallback tokens."""
    tok = tf.llama()
    before = data.draw(texts("llama"), label="before")
    char = data.draw(st.sampled_from([*EMOJI, "中", "é", "한"]), label="char")
    after = data.draw(texts("llama"), label="after")
    cbytes = byte_ids(tok, char)
    cut = data.draw(st.integers(1, len(cbytes)), label="cut")
    ids = tok.encode(before).ids + cbytes + tok.encode(after).ids
    k = len(tok.encode(before).ids) + cut
    out = "".join(run(tok, [[i] for i in ids[k:]], True, ids[:k]))
    assert out == tok.decode(ids)[len(prompt_decided(tok, ids, k, True)) :]


_emoji_cjk = st.one_of(
    st.sampled_from(EMOJI),
    _cjk,
    _hangul,
    _words,
    st.text(alphabet=st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF), min_size=1, max_size=3),
)


@SETTINGS
@given(
    parts=st.lists(
        st.tuples(st.lists(_emoji_cjk, min_size=1, max_size=4).map("".join), st.booleans()),
        min_size=1,
        max_size=5,
    ),
    data=st.data(),
    sizes=st.lists(st.integers(0, 4), max_size=6),
    window=st.sampled_from([6, 6, 4, 2]),
)
def test_prompt_split_windowed_fallback(
    parts: list[tuple[str, bool]], data: st.DataObject, sizes: list[int], window: int
) -> None:
    """Windowed fallback with a ByteFallback decoder: the prompt may end anywhere, inside a run of
    byte tokens and inside a character included; the generation emits exactly the rest, the
    split character once and whole, no U+FFFD."""
    tok = tf.llama_windowed()
    ids: list[int] = []
    for text, as_bytes in parts:
        ids += byte_ids(tok, text) if as_bytes else tok.encode(text).ids
    k = data.draw(st.integers(0, len(ids)), label="split")
    det = StreamDetokenizer(tok, prompt_ids=ids[:k], window=window)
    assert not det.exact
    deltas = [det.push(item) for item in chunked(ids[k:], sizes)] + [det.finish()]
    full = tok.decode(ids)
    assert "".join(deltas) == full[len(prompt_decided(tok, ids, k, True)) :]
    if "\ufffd" not in full:
        assert not any("\ufffd" in d for d in deltas), deltas


@pytest.mark.parametrize("decoder", tf.UNIGRAM_BYTE_DECODERS)
def test_unigram_byte_fallback(decoder: str) -> None:
    """SentencePiece Unigram with byte fallback (built by hand, with each decoder chain conversions
    write): exact against ``decode`` for text the vocabulary lacks (emoji, rare CJK, anything: byte
    tokens), for mixed byte runs and any chunking, and from any prompt/generation split."""
    tok = tf.unigram_byte_fallback(decoder)
    assert StreamDetokenizer(tok).exact == (decoder != "windowed")

    @SETTINGS
    @given(
        parts=st.lists(st.tuples(texts("unigram_byte_fallback"), st.booleans()), min_size=1, max_size=4),
        data=st.data(),
        sizes=st.lists(st.integers(0, 4), max_size=6),
        skip=st.booleans(),
    )
    def prop(parts: list[tuple[str, bool]], data: st.DataObject, sizes: list[int], skip: bool) -> None:
        ids: list[int] = []
        for text, as_bytes in parts:
            ids += byte_ids(tok, text) if as_bytes else tok.encode(text).ids
        _check_exact(tok, ids, sizes, skip)
        k = data.draw(st.integers(0, len(ids)), label="split")
        out = "".join(run(tok, chunked(ids[k:], sizes), skip, ids[:k]))
        full = tok.decode(ids, skip_special_tokens=skip)
        assert out == full[len(prompt_decided(tok, ids, k, skip)) :]

    prop()
