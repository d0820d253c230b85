"""stop_on_tokens with stop id sequences: a batch reference for every chunking, the earliest
emission of each id, timing and upstream disposal, Piece items, and the construction checks."""

from __future__ import annotations

import time
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from reactivex.subject import Subject

from rxstream import Finish, FinishReason, FinishRecorder, Piece
from rxstream.operators import stop_on_tokens
from rxstream.testing import MarbleTest

Stops = list[tuple[int, ...]]


def reference(ids: list[int], stops: Stops, include: bool) -> tuple[list[int], int | None, int | None]:
    """Cut at the earliest id that completes a stop (the longest stop ending there): the ids
    emitted, the index of that id and the stop's length (None, None: no stop)."""
    for end in range(len(ids)):
        ending = [len(s) for s in stops if len(s) <= end + 1 and tuple(ids[end + 1 - len(s) : end + 1]) == s]
        if ending:
            length = max(ending)
            return ids[: end + 1 if include else end + 1 - length], end, length
    return list(ids), None, None


def provable(prefix: list[int], stops: Stops, include: bool) -> int:
    """How many ids of a prefix with no completed stop are provably emitted: all but the
    longest suffix that is a proper prefix of some stop (all of them with include_stop)."""
    if include:
        return len(prefix)
    held = max(
        (d for s in stops for d in range(1, len(s)) if d <= len(prefix) and tuple(prefix[-d:]) == s[:d]),
        default=0,
    )
    return len(prefix) - held


def flat(items: list[Any]) -> list[int]:
    out: list[int] = []
    for item in items:
        if isinstance(item, Piece):
            out.extend(item.ids)
        elif isinstance(item, int):
            out.append(item)
        else:
            out.extend(int(i) for i in item)
    return out


def as_items(ids: list[int], cuts: list[int], kinds: list[int]) -> list[Any]:
    """``ids`` cut at ``cuts`` into items of varied kinds: int, tuple, list, Piece, or empty."""
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(ids)}), len(ids)]
    items: list[Any] = []
    for n, (a, b) in enumerate(pairwise(bounds)):
        chunk = ids[a:b]
        kind = kinds[n % len(kinds)] if kinds else 0
        if kind == 0 and len(chunk) == 1:
            items.append(chunk[0])
        elif kind == 1:
            items.append(list(chunk))
        elif kind == 2:
            items.append(Piece("", tuple(chunk), tuple(-float(i) for i in chunk)))
        else:
            items.append(tuple(chunk))
        if kind == 3:
            items.append(())
    return items


alphabet = st.integers(0, 3)
stop_lists = st.lists(st.lists(alphabet, min_size=1, max_size=4).map(tuple), min_size=1, max_size=4)


@given(
    ids=st.lists(alphabet, max_size=30),
    stops=stop_lists,
    cuts=st.lists(st.integers(0, 30), max_size=30),
    kinds=st.lists(st.integers(0, 3), max_size=6),
    include=st.booleans(),
)
def test_any_chunking_matches_the_batch_reference_and_emits_each_id_when_provable(
    ids: list[int], stops: Stops, cuts: list[int], kinds: list[int], include: bool
) -> None:
    want, end, _ = reference(ids, stops, include)
    items = as_items(ids, cuts, kinds)
    rec = FinishRecorder()
    subject: Subject[Any] = Subject()
    out: list[Any] = []
    completed: list[bool] = []
    subject.pipe(stop_on_tokens(stops, include_stop=include, on_finish=rec)).subscribe(
        out.append, lambda e: pytest.fail(repr(e)), lambda: completed.append(True)
    )
    seen = 0
    for item in items:
        assert subject.observers, "fed after the stop: the upstream should be disposed"
        subject.on_next(item)
        seen += len(flat([item]))
        if end is not None and seen > end:  # this item completed the stop
            assert completed and not subject.observers  # ended and disposed in that frame
            assert rec.finish is not None and rec.finish.reason is FinishReason.STOP
            assert rec.finish.stop == ids[end]
            assert rec.finish.dropped == tuple(ids[end + 1 : seen])
            break
        # earliest emission: every id out as soon as no stop can still start at or before it
        assert flat(out) == ids[: provable(ids[:seen], stops, include)]
    else:
        subject.on_completed()
        assert rec.finish == Finish(FinishReason.EOS)
    assert completed
    assert flat(out) == want
    for item in out:  # a Piece keeps each id's log-probability
        if isinstance(item, Piece):
            assert item.logprobs == tuple(-float(i) for i in item.ids)


@given(ids=st.lists(alphabet, max_size=30), stops=stop_lists, include=st.booleans())
def test_one_id_at_a_time_equals_one_item(ids: list[int], stops: Stops, include: bool) -> None:
    def run(items: list[Any]) -> tuple[list[int], Finish | None]:
        rec = FinishRecorder()
        out: list[Any] = []
        subject: Subject[Any] = Subject()
        subject.pipe(stop_on_tokens(stops, include, on_finish=rec)).subscribe(out.append)
        for item in items:
            subject.on_next(item)
        subject.on_completed()
        return flat(out), rec.finish

    single, f1 = run(list(ids))
    whole, f2 = run([tuple(ids)])
    assert single == whole == reference(ids, stops, include)[0]
    assert f1 is not None and f2 is not None and f1.stop == f2.stop and f1.reason == f2.reason


def test_a_stop_sequence_holds_its_start_until_ruled_out_and_disposes_on_completion() -> None:
    m = MarbleTest()
    rec = FinishRecorder()
    src = m.cold("-a-b-c-d-e-f-g-h-|", {"a": 5, "b": 2, "c": 3, "d": 7, "e": 2, "f": 3, "g": 4, "h": 8})
    # 2 and 3 wait; 7 rules the sequence out and all three go out in its frame; 2, 3, 4 ends it
    m.expect(
        src.pipe(stop_on_tokens([[2, 3, 4], 9], on_finish=rec)),
        "-a-----(bcd)-----|",
        {"a": 5, "b": 2, "c": 3, "d": 7},
    )
    m.expect_subscriptions(src, "^------------!")
    assert rec.finish == Finish(FinishReason.STOP, stop=4)


def test_a_stop_sequence_across_items_cuts_the_last_item_and_reports_the_rest() -> None:
    # 2 of the first item waits; the second item completes the stop and nothing of it goes out
    m = MarbleTest()
    rec = FinishRecorder()
    src = m.cold("-a-b-c-|", {"a": (5, 2), "b": [3, 4, 8], "c": 1})
    m.expect(src.pipe(stop_on_tokens([[2, 3, 4]], on_finish=rec)), "-a-|", {"a": (5,)})
    m.expect_subscriptions(src, "^--!")
    assert rec.finish == Finish(FinishReason.STOP, stop=4, dropped=(8,))


def test_include_stop_emits_the_whole_sequence_and_holds_nothing() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-c-d-|", {"a": 2, "b": 3, "c": 4, "d": 1})
    m.expect(src.pipe(stop_on_tokens([[2, 3, 4]], include_stop=True)), "-a-b-(c|)", {"a": 2, "b": 3, "c": 4})
    m.expect_subscriptions(src, "^----!")


def test_held_ids_go_out_when_the_source_completes() -> None:
    m = MarbleTest()
    rec = FinishRecorder()
    src = m.cold("-a-b-|", {"a": 5, "b": 2})
    m.expect(src.pipe(stop_on_tokens([[2, 3]], on_finish=rec)), "-a---(b|)", {"a": 5, "b": 2})
    assert rec.finish == Finish(FinishReason.EOS)


def test_the_longest_stop_ending_on_an_id_wins() -> None:
    out: list[Any] = []
    rec = FinishRecorder()
    subject: Subject[Any] = Subject()
    subject.pipe(stop_on_tokens([[3], [1, 2, 3]], on_finish=rec)).subscribe(out.append)
    for i in (0, 1, 2, 3):
        subject.on_next(i)
    assert out == [0] and rec.finish == Finish(FinishReason.STOP, stop=3)


def test_cancel_reports_the_held_ids_as_dropped() -> None:
    rec = FinishRecorder()
    out: list[Any] = []
    subject: Subject[Any] = Subject()
    sub = subject.pipe(stop_on_tokens([[2, 3, 4]], on_finish=rec)).subscribe(out.append)
    subject.on_next(Piece("", (5, 2), (-0.5, -0.25)))
    subject.on_next(3)
    assert out == [Piece("", (5,), (-0.5,))]
    sub.dispose()
    assert rec.finish == Finish(FinishReason.CANCELLED, dropped=(2, 3))
    assert not subject.observers


@pytest.mark.parametrize(
    ("token_ids", "error", "text"),
    [
        ([[2, 3], []], ValueError, "stop_on_tokens: a stop id sequence must be non-empty (token_ids[1])"),
        ([[2, -1]], ValueError, "stop_on_tokens: token ids must be >= 0, got -1 (token_ids[0][1])"),
        ([[2, "3"]], TypeError, "stop_on_tokens: token ids must be int, got str"),
        ([[2, True]], TypeError, "(token_ids[0][1])"),
        ([[2.0]], TypeError, "stop_on_tokens: token ids must be int, got float"),
        (["23"], TypeError, "a sequence of ints for a multi-token stop, got str"),
        ([{2}], TypeError, "(token_ids[0])"),
        ("23", TypeError, "stop_on_tokens: token_ids must be an int or an iterable"),
        (-4, ValueError, "(token_ids)"),
    ],
)
def test_construction_errors_name_the_argument(token_ids: Any, error: type[Exception], text: str) -> None:
    with pytest.raises(error) as info:
        stop_on_tokens(token_ids)
    assert text in str(info.value)


def test_building_and_matching_are_linear_in_the_stop_length() -> None:
    """Long stops that share prefixes (the worst case of a naive matcher): building is linear in
    their total length and every id costs amortized O(1) (a failed partial match is not rescanned)."""

    def run(n: int) -> float:
        stops = [[1] * n + [2], [1] * (n // 2) + [3]]
        ids = ([1] * n + [4]) * 20
        t = time.perf_counter()
        out: list[Any] = []
        subject: Subject[Any] = Subject()
        subject.pipe(stop_on_tokens(stops)).subscribe(out.append)
        subject.on_next(tuple(ids))
        subject.on_completed()
        assert flat(out) == ids
        return time.perf_counter() - t

    run(200)
    small, large = min(run(2_000) for _ in range(3)), min(run(20_000) for _ in range(3))
    assert large < small * 30  # ten times the size: about ten times the time, not a hundred
