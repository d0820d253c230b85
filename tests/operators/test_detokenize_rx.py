"""The ``detokenize`` operator: emission timing, disposal, errors, aligned Pieces, speculative items."""

from __future__ import annotations

from typing import Any

import pytest
import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops

from rxstream import Piece
from rxstream.operators import detokenize
from rxstream.testing import MarbleTest, check_docstring_marbles
from rxstream.testing import tokenizers as tf
from tests.core.test_detokenize_props import EMOJI, chunked, texts
from tests.reference import prompt_decided

SETTINGS = settings(max_examples=60, deadline=None)


def test_docstring_marble() -> None:
    assert check_docstring_marbles(detokenize, {"detokenize": detokenize, "tokenizer": tf.byte_tokenizer()})


@pytest.mark.parametrize("char", ["é", "中", "😀"])
def test_multibyte_char_emits_at_frame_of_last_token(char: str) -> None:
    data = char.encode("utf-8")
    m = MarbleTest()
    letters = "bcde"[: len(data)]
    src = m.cold(
        "-a-" + "-".join(letters) + "-f-|",
        {"a": ord("x"), **{k: v for k, v in zip(letters, data, strict=True)}, "f": ord("y")},
    )
    # nothing while the character is incomplete, the whole character with its last byte
    expected = "-a-" + "--" * (len(data) - 1) + "c-f-|"
    m.expect(src.pipe(detokenize(tf.byte_tokenizer())), expected, {"a": "x", "c": char, "f": "y"})
    m.expect_subscriptions(src, "^" + "-" * (len(expected) - 2) + "!")


def test_character_spread_over_real_tokens() -> None:
    """Each byte of 😀 is its own token in the ByteLevel tokenizer: emitted with the 4th."""
    tok = tf.bytelevel()
    ids = tok.encode("hi 😀!").ids
    m = MarbleTest()
    names = "abcdefghij"[: len(ids)]
    src = m.cold("".join(f"-{n}" for n in names) + "-|", dict(zip(names, ids, strict=True)))
    events = m.run(src.pipe(detokenize(tok)))
    texts_ = [e.value for e in events if e.kind == "N"]
    assert "".join(texts_) == "hi 😀!"
    assert "😀" in texts_ or any("😀" in t for t in texts_)
    assert all("\ufffd" not in t and t for t in texts_)
    emoji_frame = next(e.frame for e in events if e.kind == "N" and "😀" in e.value)
    # the frame of the last byte of 😀 is the frame of the last id before "!"
    last_byte_index = len(tok.encode("hi 😀").ids) - 1
    assert emoji_frame == 2 * last_byte_index + 1


def test_dispose_reaches_upstream_and_stops_emission() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-c-d-e-|", {k: ord(k) for k in "abcde"})
    m.expect(src.pipe(detokenize(tf.byte_tokenizer())), "-a-b-", dispose_at=5)
    m.expect_subscriptions(src, "^----!")


def test_out_of_vocab_goes_to_on_error_and_disposes_upstream() -> None:
    tok = tf.bytelevel()
    size = tok.get_vocab_size(with_added_tokens=True)
    m = MarbleTest()
    src = m.cold("-a-b-c-|", {"a": ord("h"), "b": 10**6, "c": ord("i")})
    events = m.run(src.pipe(detokenize(tok)))
    assert [e.kind for e in events] == ["N", "E"]
    err = events[1].value
    assert isinstance(err, ValueError)
    assert "detokenize" in str(err) and "1000000" in str(err) and f"size {size}" in str(err)
    m.expect_subscriptions(src, "^--!")


@pytest.mark.parametrize("bad", ["a", 1.5, True, None, [1, "x"], b"ab"])
def test_non_int_items_go_to_on_error(bad: Any) -> None:
    m = MarbleTest()
    src = m.cold("-a-b-|", {"a": 65, "b": bad})
    events = m.run(src.pipe(detokenize(tf.byte_tokenizer())))
    assert [e.kind for e in events] == ["N", "E"]
    assert isinstance(events[1].value, TypeError) and "detokenize" in str(events[1].value)


def test_upstream_error_is_forwarded_and_held_bytes_dropped() -> None:
    m = MarbleTest()
    boom = RuntimeError("backend died")
    src = m.cold("-a-b-#", {"a": 65, "b": 0xE4}, error=boom)
    m.expect(src.pipe(detokenize(tf.byte_tokenizer())), "-a---#", {"a": "A"}, error=boom)


def test_construction_errors() -> None:
    with pytest.raises(TypeError, match=r"unsupported tokenizer.*tiktoken"):
        detokenize("gpt2")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        detokenize(tf.bytelevel(), prompt_ids=[10**7])
    with pytest.raises(TypeError, match="prompt_ids"):
        detokenize(tf.bytelevel(), prompt_ids=["a"])  # type: ignore[list-item]


def test_never_emits_empty_strings_and_flushes_at_completion() -> None:
    tok = tf.bytelevel()
    special = tok.token_to_id("<|im_end|>")
    items: list[Any] = [special, [special, special], [], 0xE4 - 0xE4 + tok.token_to_id("ä")]
    out = rx.from_iterable(items).pipe(detokenize(tok), ops.to_list()).run()
    assert out == ["\ufffd"]  # the incomplete byte is flushed as U+FFFD at completion
    out = rx.from_iterable([special, special]).pipe(detokenize(tok), ops.to_list()).run()
    assert out == []


def test_prompt_ids_operator() -> None:
    tok = tf.llama()
    ids = tok.encode("Hello world, 你好 😀 there").ids
    full = tok.decode(ids)
    for k in range(len(ids) + 1):
        out = rx.from_iterable(ids[k:]).pipe(detokenize(tok, prompt_ids=ids[:k]), ops.to_list()).run()
        assert "".join(out) == full[len(prompt_decided(tok, ids, k, True)) :]
        assert all(out)


def test_each_subscription_is_independent() -> None:
    tok = tf.bytelevel()
    ids = tok.encode("naïve 😀 text").ids
    obs = rx.from_iterable(ids).pipe(detokenize(tok))
    a = obs.pipe(ops.to_list()).run()
    b = obs.pipe(ops.to_list()).run()
    assert a == b and "".join(a) == "naïve 😀 text"


@SETTINGS
@given(text=texts("bytelevel"), sizes=st.lists(st.integers(0, 4), max_size=6), skip=st.booleans())
def test_operator_matches_decode_with_speculative_items(text: str, sizes: list[int], skip: bool) -> None:
    tok = tf.bytelevel()
    ids = tok.encode(text).ids
    out = (
        rx.from_iterable(chunked(ids, sizes))
        .pipe(detokenize(tok, skip_special_tokens=skip), ops.to_list())
        .run()
    )
    assert "".join(out) == tok.decode(ids, skip_special_tokens=skip)
    assert all(out)


# -- aligned mode ---------------------------------------------------------------------------------


def test_aligned_pieces_carry_the_ids_they_complete() -> None:
    tok = tf.byte_tokenizer()
    data = list("a😀b".encode())
    m = MarbleTest()
    names = "abcdef"
    src = m.cold("".join(f"-{n}" for n in names) + "-|", dict(zip(names, data, strict=True)))
    m.expect(
        src.pipe(detokenize(tok, aligned=True)),
        "-a-------e-f-|",
        {"a": Piece("a", (97,)), "e": Piece("😀", tuple(data[1:5])), "f": Piece("b", (98,))},
    )


def test_aligned_held_ids_flushed_at_completion() -> None:
    tok = tf.bytelevel()
    special = tok.token_to_id("<|im_end|>")
    e4 = tok.token_to_id("ä")
    out = (
        rx.from_iterable([65 - 65 + tok.token_to_id("A"), special, [e4]])
        .pipe(detokenize(tok, aligned=True), ops.to_list())
        .run()
    )
    assert out == [Piece("A", (tok.token_to_id("A"),)), Piece("\ufffd", (special, e4))]
    out = rx.from_iterable([special]).pipe(detokenize(tok, aligned=True), ops.to_list()).run()
    assert out == [Piece("", (special,))]


@SETTINGS
@given(
    text=texts("llama"),
    sizes=st.lists(st.integers(0, 4), max_size=6),
    emoji=st.sampled_from(EMOJI),
    skip=st.booleans(),
)
def test_aligned_properties(text: str, sizes: list[int], emoji: str, skip: bool) -> None:
    tok = tf.llama()
    ids = tok.encode(text + emoji + text).ids
    pieces = (
        rx.from_iterable(chunked(ids, sizes))
        .pipe(detokenize(tok, skip_special_tokens=skip, aligned=True), ops.to_list())
        .run()
    )
    one_by_one = (
        rx.from_iterable(ids)
        .pipe(detokenize(tok, skip_special_tokens=skip, aligned=True), ops.to_list())
        .run()
    )
    assert pieces == one_by_one  # chunking does not change the pieces
    assert "".join(p.text for p in pieces) == tok.decode(ids, skip_special_tokens=skip)
    assert [i for p in pieces for i in p.ids] == ids  # every id exactly once, in order
    assert all(p.text for p in pieces[:-1])
    assert all(p.ids for p in pieces)


def test_aligned_input_pieces_keep_logprobs_aligned() -> None:
    tok = tf.byte_tokenizer()
    data = list("a中b".encode())  # a, three bytes of 中, b
    items = [
        Piece("", (data[0], data[1]), (-0.1, -0.2)),
        Piece("", (data[2], data[3]), (-0.3, -0.4)),
        data[4],
    ]
    out = rx.from_iterable(items).pipe(detokenize(tok, aligned=True), ops.to_list()).run()
    assert out == [
        Piece("a", (data[0],), (-0.1,)),
        Piece("中", (data[1], data[2], data[3]), (-0.2, -0.3, -0.4)),
        Piece("b", (data[4],), None),  # a plain int id carries no logprob
    ]
    text = rx.from_iterable(items).pipe(detokenize(tok), ops.to_list()).run()
    assert text == ["a", "中", "b"]


def test_numpy_ids_and_prompt_are_accepted_bools_are_not() -> None:
    """numpy-based backends send ``numpy.int64`` ids and arrays; a ``bool`` is never an id."""
    np = pytest.importorskip("numpy")
    tok = tf.llama()
    ids = tok.encode("Hello world, 你好 😀 there").ids
    k = 3
    expected = rx.from_iterable(ids[k:]).pipe(detokenize(tok, prompt_ids=ids[:k]), ops.to_list()).run()
    assert "".join(expected) == tok.decode(ids)[len(prompt_decided(tok, ids, k, True)) :]
    # was: ValueError "truth value of an array is ambiguous" at construction
    for prompt in (np.array(ids[:k]), [np.int64(i) for i in ids[:k]], tuple(np.array(ids[:k], np.int32))):
        for items in (
            [np.int64(i) for i in ids[k:]],
            [np.array(ids[k:])],
            [[np.uint32(i) for i in ids[k:]]],
            [Piece("", tuple(np.array(ids[k:])))],
        ):
            # was: TypeError "expected an int token id" for numpy scalars
            out = rx.from_iterable(items).pipe(detokenize(tok, prompt_ids=prompt), ops.to_list()).run()
            assert "".join(out) == "".join(expected)
            pieces = (
                rx.from_iterable(items)
                .pipe(detokenize(tok, prompt_ids=prompt, aligned=True), ops.to_list())
                .run()
            )
            assert [i for p in pieces for i in p.ids] == ids[k:]
            assert all(type(i) is int for p in pieces for i in p.ids)
    empty_prompt = detokenize(tok, prompt_ids=np.array([], np.int64))
    assert rx.from_iterable([]).pipe(empty_prompt, ops.to_list()).run() == []
    for bad in (True, np.True_, np.float64(3.0), [1, True], np.array([[1, 2]]), Piece("", (True,))):
        for aligned in (False, True):
            events = MarbleTest().run(rx.of(bad).pipe(detokenize(tok, aligned=aligned)))  # type: ignore[call-overload]
            assert [e.kind for e in events] == ["E"], bad
            assert isinstance(events[0].value, TypeError) and "detokenize" in str(events[0].value)
    with pytest.raises(TypeError, match="prompt_ids"):
        detokenize(tok, prompt_ids=[1, True])
    with pytest.raises(TypeError, match="prompt_ids"):
        detokenize(tok, prompt_ids=5)  # type: ignore[arg-type]
