"""Every decoder chain the ``tokenizers`` library can express, against ``tokenizer.decode``.

Each chain goes on a real tokenizer (trained families, and a mixed vocabulary holding tokens of all
of them, byte tokens, special and added tokens); random id sequences are streamed through the
detokenizer and the concatenated deltas compared with ``decode``. Chains the exact table cannot
model must take the windowed fallback; either way the text is the decoded text.
"""

from __future__ import annotations

import json
import random
import warnings
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Regex, Tokenizer, decoders, models

from rxstream import StreamDetokenizer
from rxstream.detok import InexactDecoderWarning, table_from_hf, window_limit
from rxstream.testing import tokenizers as tf
from tests.core.test_detokenize_props import SETTINGS, chunked
from tests.reference import prompt_decided

pytestmark = [pytest.mark.slow]

# Parameter values that meet the sweep vocabularies: ▁ tokens, ## pieces, </w> suffixes, spaces.
_CHARS = ["\u2581", " ", "a", "#", "|", "Ġ"]
_STRINGS = ["\u2581", " ", "  ", "\u2581\u2581", "##", "</w>", "a", "", "<0x", "de", " ' "]


def _replace(pattern: str | Regex, content: str) -> Any:
    return decoders.Replace(pattern, content)


_leaf = st.one_of(
    st.just(("ByteLevel", {})),
    st.builds(
        lambda rep, scheme, split: (
            "Metaspace",
            {"replacement": rep, "prepend_scheme": scheme, "split": split},
        ),
        st.sampled_from(_CHARS),
        st.sampled_from(["always", "first", "never"]),
        st.booleans(),
    ),
    st.builds(
        lambda prefix, cleanup: ("WordPiece", {"prefix": prefix, "cleanup": cleanup}),
        st.sampled_from(["##", "\u2581", "a", "#"]),
        st.booleans(),
    ),
    st.builds(
        lambda suffix: ("BPEDecoder", {"suffix": suffix}), st.sampled_from(["</w>", "\u2581", "a", "w>"])
    ),
    st.builds(
        lambda pad, delim, cleanup: (
            "CTC",
            {"pad_token": pad, "word_delimiter_token": delim, "cleanup": cleanup},
        ),
        st.sampled_from(["<pad>", "a", "\u2581"]),
        st.sampled_from(["|", "\u2581", " "]),
        st.booleans(),
    ),
    st.just(("ByteFallback", {})),
    st.just(("Fuse", {})),
    st.builds(
        lambda c, a, b: ("Strip", {"content": c, "left": a, "right": b}),
        st.sampled_from(_CHARS),
        st.integers(0, 2),
        st.integers(0, 2),
    ),
    st.builds(
        lambda p, c: ("Replace", {"pattern": p, "content": c}),
        st.sampled_from(_STRINGS),
        st.sampled_from(["", " ", "\u2581", "x", "  "]),
    ),
    st.builds(
        lambda p, c: ("ReplaceRegex", {"pattern": p, "content": c}),
        st.sampled_from([r"\s+", "\u2581+", "^ ", " $", "(?<=a) ", "a|b"]),
        st.sampled_from(["", " ", "x"]),
    ),
)

Spec = Any  # a leaf (kind, params) or a list of specs (a Sequence)

chains = st.recursive(_leaf, lambda inner: st.lists(inner, min_size=0, max_size=5), max_leaves=8)


def build(spec: Spec) -> Any:
    """A ``tokenizers`` decoder from a spec."""
    if isinstance(spec, list):
        return decoders.Sequence([build(s) for s in spec])
    kind, p = spec
    if kind == "ByteLevel":
        return decoders.ByteLevel()
    if kind == "Metaspace":
        return decoders.Metaspace(
            replacement=p["replacement"], prepend_scheme=p["prepend_scheme"], split=p["split"]
        )
    if kind == "WordPiece":
        return decoders.WordPiece(prefix=p["prefix"], cleanup=p["cleanup"])
    if kind == "BPEDecoder":
        return decoders.BPEDecoder(suffix=p["suffix"])
    if kind == "CTC":
        return decoders.CTC(
            pad_token=p["pad_token"], word_delimiter_token=p["word_delimiter_token"], cleanup=p["cleanup"]
        )
    if kind == "ByteFallback":
        return decoders.ByteFallback()
    if kind == "Fuse":
        return decoders.Fuse()
    if kind == "Strip":
        return decoders.Strip(p["content"], p["left"], p["right"])
    if kind == "Replace":
        return _replace(p["pattern"], p["content"])
    if kind == "ReplaceRegex":
        return _replace(Regex(p["pattern"]), p["content"])
    raise AssertionError(kind)


def _ids(tok: Tokenizer, data: st.DataObject) -> list[int]:
    """Random ids: any id (special and added ones included), runs of byte-fallback tokens of
    valid UTF-8, repeated ids, and encoded text."""
    n = tok.get_vocab_size(with_added_tokens=True)
    byte_ids = [tok.token_to_id(f"<0x{b:02X}>") for b in range(256)]
    has_bytes = all(i is not None for i in byte_ids)
    special = [tok.token_to_id(t) for t in (*tf.SWEEP_SPECIAL, *tf.SWEEP_ADDED)]
    segment = st.one_of(
        st.lists(st.integers(0, n - 1), min_size=1, max_size=4),
        st.lists(st.sampled_from(special), min_size=1, max_size=2),
        st.builds(lambda i, k: [i] * k, st.integers(0, n - 1), st.integers(2, 9)),
        st.text(alphabet="ab \u2581.,'ñé中😀\n", max_size=12).map(lambda t: tok.encode(t).ids),
        *(
            [st.text(min_size=1, max_size=3).map(lambda t: [byte_ids[b] for b in t.encode("utf-8")])]
            if has_bytes
            else []
        ),
    )
    out: list[int] = []
    for seg in data.draw(st.lists(segment, max_size=6), label="segments"):
        out.extend(int(i) for i in seg)
    return out


def check(tok: Tokenizer, ids: list[int], sizes: list[int], skip: bool) -> StreamDetokenizer:
    """Stream ``ids`` (pushed in chunks of ``sizes``) and compare with ``decode``."""
    try:
        expected: str | None = tok.decode(ids, skip_special_tokens=skip)
    except BaseException:  # the Rust decoder panics (a Strip whose cuts cross): the stream must fail
        expected = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        det = StreamDetokenizer(tok, skip_special_tokens=skip)
    limit = window_limit(tok)
    inexact = [w for w in caught if issubclass(w.category, InexactDecoderWarning)]
    if det.exact:
        assert table_from_hf(tok, skip) is not None
    assert bool(inexact) == (not det.exact and limit is not None), (tok.decoder, limit)
    if inexact:
        return det  # no bounded window reproduces this chain: best effort, and said so
    special = {i for i, t in tok.get_added_tokens_decoder().items() if t.special}
    if expected is None and not [i for i in ids if not (skip and i in special)]:
        # decode of no tokens fails for some decoders (a Strip of trailing characters): no
        # tokens give no text
        assert "".join(det.push(chunk) for chunk in chunked(ids, sizes)) + det.finish() == ""
        return det
    if expected is None:
        with pytest.raises(Exception):  # noqa: B017 - the decoder's own failure, whatever it is
            for chunk in chunked(ids, sizes):
                det.push(chunk)
            det.finish()
        return det
    deltas = [det.push(chunk) for chunk in chunked(ids, sizes)] + [det.finish()]
    ctx = f"decoder={tok.decoder}, exact={det.exact}, ids={ids}, deltas={deltas}"
    if "\ufffd" not in expected:
        assert "".join(deltas) == expected, ctx
        assert not any("\ufffd" in d for d in deltas), ctx
    elif "ByteFallback" not in str(tok.decoder):
        assert "".join(deltas) == expected, ctx  # lossy UTF-8 (ByteLevel) is reproduced exactly
    return det


# Decoder chains as tokenizers and their conversions write them, and the shapes around them.
NAMED: dict[str, Spec] = {
    "bytelevel": ("ByteLevel", {}),
    "metaspace-always": ("Metaspace", {"replacement": "\u2581", "prepend_scheme": "always", "split": True}),
    "metaspace-first": ("Metaspace", {"replacement": "\u2581", "prepend_scheme": "first", "split": False}),
    "metaspace-never": ("Metaspace", {"replacement": "\u2581", "prepend_scheme": "never", "split": True}),
    "wordpiece": ("WordPiece", {"prefix": "##", "cleanup": True}),
    "wordpiece-nocleanup": ("WordPiece", {"prefix": "##", "cleanup": False}),
    "bpe-suffix": ("BPEDecoder", {"suffix": "</w>"}),
    "ctc": ("CTC", {"pad_token": "<pad>", "word_delimiter_token": "|", "cleanup": True}),
    "bytefallback": ("ByteFallback", {}),
    "fuse": ("Fuse", {}),
    "llama": [
        ("Replace", {"pattern": "\u2581", "content": " "}),
        ("ByteFallback", {}),
        ("Fuse", {}),
        ("Strip", {"content": " ", "left": 1, "right": 0}),
    ],
    "replace-after-fuse": [
        ("Replace", {"pattern": "\u2581", "content": " "}),
        ("Fuse", {}),
        ("Replace", {"pattern": "  ", "content": " "}),
    ],
    "llama-replace-after-fuse": [
        ("Replace", {"pattern": "\u2581", "content": " "}),
        ("ByteFallback", {}),
        ("Fuse", {}),
        ("Replace", {"pattern": "  ", "content": " "}),
        ("Strip", {"content": " ", "left": 1, "right": 0}),
    ],
    "windowed": [
        ("ByteFallback", {}),
        ("Fuse", {}),
        ("Replace", {"pattern": "\u2581", "content": " "}),
        ("Strip", {"content": " ", "left": 1, "right": 0}),
    ],
    "bytefallback-metaspace": [
        ("ByteFallback", {}),
        ("Metaspace", {"replacement": "\u2581", "prepend_scheme": "always", "split": True}),
    ],
    "strip-tokens": ("Strip", {"content": "\u2581", "left": 1, "right": 0}),
    "strip-both-fused": [("Fuse", {}), ("Strip", {"content": " ", "left": 1, "right": 1})],
    "replace-regex": ("ReplaceRegex", {"pattern": "\u2581+", "content": " "}),
    "nested": [[("Replace", {"pattern": "\u2581", "content": " "})], [[("ByteFallback", {})], ("Fuse", {})]],
    "fuse-then-bytefallback": [("Fuse", {}), ("ByteFallback", {})],
    "empty-sequence": [],
}


@pytest.mark.parametrize("base", tf.SWEEP_BASES)
@pytest.mark.parametrize("name", sorted(NAMED))
def test_named_chains(name: str, base: str) -> None:
    spec = NAMED[name]

    @SETTINGS
    @given(data=st.data(), sizes=st.lists(st.integers(0, 4), max_size=6), skip=st.booleans())
    def prop(data: st.DataObject, sizes: list[int], skip: bool) -> None:
        tok = tf.decoder_sweep_base(base, build(spec))
        check(tok, _ids(tok, data), sizes, skip)

    prop()


@SETTINGS
@given(
    spec=chains,
    base=st.sampled_from(tf.SWEEP_BASES),
    data=st.data(),
    sizes=st.lists(st.integers(0, 4), max_size=6),
    skip=st.booleans(),
)
def test_random_chains(spec: Spec, base: str, data: st.DataObject, sizes: list[int], skip: bool) -> None:
    tok = tf.decoder_sweep_base(base, build(spec))
    check(tok, _ids(tok, data), sizes, skip)


def test_no_decoder() -> None:
    tok = tf.decoder_sweep_base("mixed", None)
    assert tok.decoder is None
    det = check(tok, [5, 6, 7, 700, 1300], [1], True)
    assert det.exact


def test_replace_after_fuse_regression() -> None:
    """``Replace`` after ``Fuse`` acts on the fused text: "▁","▁","a" decode to " a" (the two spaces
    become one), not the per-token "  a". No per-id table models that, but the table's text
    through a streaming replacement does: exact, no warning, and the space that could still
    become half of a pair is held until the next token decides."""
    tok = tf.decoder_sweep_base("mixed", build(NAMED["replace-after-fuse"]))
    sp = tok.token_to_id("\u2581")
    a = tok.token_to_id("a")
    assert tok.decode([sp, sp, a]) == " a"
    with warnings.catch_warnings():
        warnings.simplefilter("error", InexactDecoderWarning)
        det = StreamDetokenizer(tok)
    assert det.exact
    assert [det.push(sp), det.push(sp), det.push(a), det.finish()] == ["", " ", "a", ""]


def test_a_multi_character_replace_after_fuse_never_streams_text_decode_lacks() -> None:
    """``[Fuse, Replace("ab", "X")]``: the window streamed "aX" where decode says "X"."""
    vocab = {t: i for i, t in enumerate(["a", "b", "ab", "c", " ", "ba", "x"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="x"))
    tok.decoder = decoders.Sequence(
        [decoders.Fuse(), decoders.Replace("ab", "X"), decoders.Replace("XX", "Y")]
    )
    rng = random.Random(3)
    for _ in range(2000):
        ids = [rng.randrange(7) for _ in range(rng.randrange(0, 14))]
        with warnings.catch_warnings():
            warnings.simplefilter("error", InexactDecoderWarning)
            det = StreamDetokenizer(tok)
        assert det.exact
        sizes = [rng.randrange(1, 4) for _ in range(8)]
        assert "".join(det.push(c) for c in chunked(ids, sizes)) + det.finish() == tok.decode(ids), ids


def test_inexact_chains_say_what_may_differ() -> None:
    tok = tf.decoder_sweep_base("mixed", build(NAMED["llama-replace-after-fuse"]))
    with pytest.warns(InexactDecoderWarning, match="already emitted is never taken back"):
        StreamDetokenizer(tok)


@pytest.mark.parametrize("name", ["replace-after-fuse", "llama-replace-after-fuse"])
def test_trained_bpe_replace_after_fuse(name: str) -> None:
    """The trained byte-fallback BPE with ``Replace`` after ``Fuse``: 1500 random id sequences
    stream to ``decode``'s text (the per-token table got 290 of them wrong); the chain whose last
    steps are literal replacements is exact, the one with a ``Strip`` after them windowed."""
    tok = Tokenizer.from_str(tf.llama().to_str())
    tok.decoder = build(NAMED[name])
    rng = random.Random(7)
    n = tok.get_vocab_size(with_added_tokens=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InexactDecoderWarning)
        for _ in range(1500):
            ids = [rng.randrange(n) for _ in range(rng.randrange(1, 30))]
            det = StreamDetokenizer(tok)
            assert det.exact == (name == "replace-after-fuse")
            out = "".join(det.push(i) for i in ids) + det.finish()
            expected = tok.decode(ids)
            if "\ufffd" not in expected:
                assert out == expected, ids


def test_decoder_json_unchanged_by_build() -> None:
    """The spec builder makes what it says (guards the sweep itself)."""
    d = json.loads(build(NAMED["llama"]).__getstate__())
    assert [s["type"] for s in d["decoders"]] == ["Replace", "ByteFallback", "Fuse", "Strip"]


@pytest.mark.parametrize("name", ["ctc", "wordpiece", "metaspace-always", "strip-both-fused"])
def test_window_sees_through_skipped_special_tokens(name: str) -> None:
    """Skipped special tokens are removed before the decoder runs: a run of them longer than the
    window must not hide the tokens the decoder looks back at (CTC merges the two "ab" into one;
    WordPiece puts no space before "##ab"; Metaspace drops the first token's "▁")."""
    tok = tf.decoder_sweep_base("mixed", build(NAMED[name]))
    if name in ("wordpiece", "metaspace-always"):  # make the chain need the window: a regex Replace
        tok.decoder = decoders.Sequence([tok.decoder, decoders.Replace(Regex("q"), "Q")])
    s = tok.token_to_id("<s>")
    ab = tok.token_to_id("##ab")
    sp = tok.token_to_id("\u2581a\u2581")
    ids = [ab, *[s] * 12, ab, sp, *[s] * 9, ab]
    det = StreamDetokenizer(tok, window=4)
    assert not det.exact
    out = "".join(det.push(i) for i in ids) + det.finish()
    assert out == tok.decode(ids)


@pytest.mark.parametrize("name", ["ctc", "wordpiece"])
def test_prompt_ending_in_skipped_special_tokens(name: str) -> None:
    """The same through a prompt: special ids at its end do not push its last tokens out of the
    window the generation continues from."""
    tok = tf.decoder_sweep_base("mixed", build(NAMED[name]))
    if name == "wordpiece":
        tok.decoder = decoders.Sequence([tok.decoder, decoders.Replace(Regex("q"), "Q")])
    s = tok.token_to_id("<s>")
    ab = tok.token_to_id("##ab")
    prompt = [ab, tok.token_to_id("a"), ab, *[s] * 12]
    gen = [ab, *[s] * 3, ab]
    det = StreamDetokenizer(tok, prompt_ids=prompt, window=4)
    out = "".join(det.push(i) for i in gen) + det.finish()
    ids = prompt + gen
    assert out == tok.decode(ids)[len(prompt_decided(tok, ids, len(prompt))) :]
