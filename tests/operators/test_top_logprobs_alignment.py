"""Per-token data (logprobs, top logprobs, token text) stays with its token through
detokenize(aligned=True), replace, hold_back, stop, route, channels and to_async_iterable
(SEMANTICS §5), on real tokenizers, however the ids are grouped and however a stop cuts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as rxops

from rxstream import FinishReason, FinishRecorder, Piece
from rxstream.aio import to_async_iterable
from rxstream.channels import Segment, route_spec
from rxstream.operators import channels, detokenize, hold_back, replace, route, stop
from rxstream.testing.tokenizers import bytelevel, llama
from tests.reference import batch_replace, batch_stop

WORDS = [
    "Hello",
    " world",
    "<NL>",
    " café",
    " 🗼",
    " 中文",
    "!\n",
    "User:",
    " end",
    "<|",
    "|>",
    "STOP",
    " end.",
]
RULES = [("<NL>", "\n"), ("café", "CAFE"), ("<||>", "[sep]")]
STOPS = ["\nUser:", "STOP", " end.", "ld", "é"]  # "ld" and "é" start or end inside tokens
SPEC = route_spec({"reasoning": ("<think>", "</think>")})


def lp(i: int) -> float:
    return -((i % 97) + 1) / 10


def top(i: int) -> tuple[tuple[int | str, float], ...]:
    return ((i, lp(i)), (i + 1, lp(i) - 1.5))


def items_of(ids: list[int], sizes: list[int]) -> list[Piece]:
    """The ids grouped into items of 1-3 ids, each a Piece with logprobs and top logprobs."""
    items, k = [], 0
    for n in [*sizes, *([1] * len(ids))]:
        if k >= len(ids):
            break
        group = tuple(ids[k : k + n])
        items.append(Piece("", group, tuple(lp(i) for i in group), tuple(top(i) for i in group)))
        k += n
    return items


def assert_aligned(pieces: list[Piece]) -> None:
    for p in pieces:
        assert p.logprobs == tuple(lp(i) for i in p.ids)
        if p.ids:
            assert p.top_logprobs == tuple(top(i) for i in p.ids)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(WORDS), max_size=14),
    st.lists(st.integers(1, 3), max_size=40),
    st.sampled_from(["bytelevel", "llama"]),
    st.booleans(),
)
def test_top_logprobs_stay_with_their_ids_through_replace_hold_back_and_stop(
    words: list[str], sizes: list[int], family: str, include_stop: bool
) -> None:
    tok = bytelevel() if family == "bytelevel" else llama()
    ids = tok.encode("".join(words), add_special_tokens=False).ids
    decoded = tok.decode(ids)
    rec = FinishRecorder()
    out: list[Piece] = []
    entered: list[int] = []
    rx.from_iterable(items_of(ids, sizes)).pipe(
        rxops.do_action(on_next=lambda p: entered.extend(p.ids)),
        detokenize(tok, aligned=True),
        replace(RULES),
        hold_back(["<|"]),
        stop(STOPS, include_stop, on_finish=rec),
    ).subscribe(out.append)
    expected, match = batch_stop(batch_replace(decoded, RULES), STOPS, include_stop=include_stop)
    assert "".join(p.text for p in out) == expected
    assert_aligned(out)
    kept = [i for p in out for i in p.ids]
    assert rec.finish is not None
    assert kept + list(rec.finish.dropped) == entered
    if match is not None:
        assert rec.finish.reason is FinishReason.STOP


def test_a_stop_inside_a_token_drops_that_token_with_its_alternatives() -> None:
    """The stop string "fé" starts inside the token " café": the text before it (" ca") is
    emitted, but the token is not (nor its logprob and alternatives): it is reported dropped."""
    tok = bytelevel()
    ids = tok.encode("Hello café end.", add_special_tokens=False).ids
    assert [tok.decode([i]) for i in ids][3] == " café"  # the cut is inside this token
    rec = FinishRecorder()
    out: list[Piece] = []
    rx.from_iterable(items_of(ids, [])).pipe(
        detokenize(tok, aligned=True), stop("fé", on_finish=rec)
    ).subscribe(out.append)
    assert "".join(p.text for p in out) == "Hello ca"
    assert [i for p in out for i in p.ids] == ids[:3]
    assert_aligned(out)
    assert rec.finish is not None and rec.finish.dropped == (ids[3],)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from([*WORDS, "<think>", "</think>", "<th", "ink>"]), max_size=14),
    st.lists(st.integers(1, 3), max_size=40),
)
def test_top_logprobs_travel_with_their_ids_through_route_and_channels(
    words: list[str], sizes: list[int]
) -> None:
    tok = bytelevel()
    ids = tok.encode("".join(words), add_special_tokens=False).ids
    segs: list[Segment] = (
        rx.from_iterable(items_of(ids, sizes))
        .pipe(detokenize(tok, aligned=True), route(SPEC), rxops.to_list())
        .run()
    )
    assert [i for s in segs for i in (s.ids or ())] == ids
    for s in segs:
        if s.ids:
            assert s.logprobs == tuple(lp(i) for i in s.ids)
            assert s.top_logprobs == tuple(top(i) for i in s.ids)
    # the views turn them back into pieces; a stop on one view keeps the alignment there
    views = rx.from_iterable(items_of(ids, sizes)).pipe(
        detokenize(tok, aligned=True), route(SPEC), channels("reasoning", "content", on_dispose="all")
    )
    got: dict[str, list[Piece]] = {"reasoning": [], "content": []}
    views["reasoning"].subscribe(got["reasoning"].append)
    views["content"].pipe(stop(["ld", "é"])).subscribe(got["content"].append)
    for name in got:
        assert_aligned(got[name])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=14), st.lists(st.integers(0, 2), max_size=40))
def test_tokens_named_by_text_stay_aligned(words: list[str], cuts: list[int]) -> None:
    """Pieces that name their tokens by text (a remote server that sends no ids): each output
    piece carries the next tokens in order, with their own logprobs and alternatives."""
    tok = bytelevel()
    ids = tok.encode("".join(words), add_special_tokens=False).ids
    texts = [tok.decode([i]) for i in ids]
    items = []
    for k, t in enumerate(texts):
        items.append(Piece(t, (), (-k / 10,), ((("alt", -k / 10 - 1),),), (t,)))
    rec = FinishRecorder()
    out: list[Piece] = []
    rx.from_iterable(items).pipe(replace(RULES), stop(STOPS, on_finish=rec)).subscribe(out.append)
    carried = [t for p in out for t in (p.tokens or ())]
    assert carried == texts[: len(carried)]
    lps = [x for p in out for x in (p.logprobs or ())]
    assert lps == [-k / 10 for k in range(len(carried))]
    assert [a for p in out for a in (p.top_logprobs or ())] == [
        (("alt", -k / 10 - 1),) for k in range(len(carried))
    ]
    segs: list[Segment] = rx.from_iterable(items).pipe(route(SPEC), rxops.to_list()).run()
    assert [t for s in segs for t in (s.tokens or ())] == texts
    assert [x for s in segs for x in (s.logprobs or ())] == [-k / 10 for k in range(len(texts))]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=10), st.lists(st.integers(1, 3), max_size=20))
def test_to_async_iterable_joins_pieces_without_losing_alignment(words: list[str], sizes: list[int]) -> None:
    tok = bytelevel()
    ids = tok.encode("".join(words), add_special_tokens=False).ids
    stream = rx.from_iterable(items_of(ids, sizes)).pipe(detokenize(tok, aligned=True), replace(RULES))

    async def collect() -> list[Any]:
        return [p async for p in to_async_iterable(stream)]

    out = asyncio.run(collect())
    assert [i for p in out for i in p.ids] == ids
    assert_aligned(out)


def test_piece_checks_one_entry_per_token() -> None:
    with pytest.raises(ValueError, match="top_logprobs"):
        Piece("a", (1, 2), (-1.0, -2.0), (((1, -1.0),),))
    with pytest.raises(ValueError, match="tokens"):
        Piece("a", (1, 2), tokens=("a",))
    with pytest.raises(ValueError, match="logprobs"):
        Piece("ab", (), (-1.0,), tokens=("a", "b"))
    assert Piece("ab", (), (-1.0, -2.0), tokens=("a", "b")).size == 2
    with pytest.raises(ValueError, match="top_logprobs"):
        Segment("content", "chunk", "a", (1,), (-1.0,), top_logprobs=())


def test_stop_on_tokens_and_max_tokens_take_pieces_with_their_numbers() -> None:
    """A backend's pieces (one or several ids each, with logprobs) through the id operators: a cut
    inside a piece keeps the data of the ids it keeps; detokenize then aligns them with text."""
    from rxstream.operators import max_tokens, stop_on_tokens

    tok = bytelevel()
    ids = tok.encode("Hello world, café", add_special_tokens=False).ids
    items = items_of(ids, [2, 3, 1, 2])
    rec = FinishRecorder()
    out: list[Piece] = (
        rx.from_iterable(items)
        .pipe(max_tokens(4, on_finish=rec), detokenize(tok, aligned=True), rxops.to_list())
        .run()
    )
    assert [i for p in out for i in p.ids] == ids[:4]  # the second item (3 ids) is cut after 2
    assert_aligned(out)
    assert rec.finish is not None and rec.finish.dropped == tuple(ids[4:5])  # the rest of the cut item
    rec = FinishRecorder()
    out = (
        rx.from_iterable(items)
        .pipe(stop_on_tokens(ids[4], on_finish=rec), detokenize(tok, aligned=True), rxops.to_list())
        .run()
    )
    assert [i for p in out for i in p.ids] == ids[:4]
    assert_aligned(out)
    assert rec.finish is not None and rec.finish.reason is FinishReason.STOP
