"""stop_on_tokens with stop id sequences: a batch reference for every chunking, the earliest
emission of each id, timing and upstream disposal, Piece items, and the construction checks."""

from __future__ import annotations

import sys
from itertools import pairwise
from types import FrameType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from reactivex.subject import Subject

from rxstream import Finish, FinishReason, FinishRecorder, Piece
from rxstream.operators import _stop_on_tokens, stop_on_tokens
from rxstream.testing import MarbleTest

Stops = list[tuple[int, ...]]


def batch_stop(ids: list[int], stops: Stops) -> tuple[int, tuple[int, ...]] | None:
    """The batch stop (SEMANTICS §3, as for text): the earliest start of an occurrence of a stop,
    the longest of those starting there; None: no occurrence."""
    for start in range(len(ids)):
        here = [s for s in stops if tuple(ids[start : start + len(s)]) == s]
        if here:
            return start, max(here, key=len)
    return None


def reported(stop: tuple[int, ...]) -> int | tuple[int, ...]:
    """``Finish.stop`` for a stop: the id of a one-id stop, else the whole sequence."""
    return stop[0] if len(stop) == 1 else stop


def reference(ids: list[int], stops: Stops, include: bool) -> list[int]:
    """The ids a whole input gives: those before the batch stop (through it, with include)."""
    found = batch_stop(ids, stops)
    if found is None:
        return list(ids)
    start, stop = found
    return ids[: start + len(stop) if include else start]


def live_starts(prefix: list[int], stops: Stops) -> list[int]:
    """Where the live partial matches of a prefix start: each suffix that is a non-empty proper
    prefix of some stop (it may still complete)."""
    n = len(prefix)
    return [q for q in range(n) if any(len(s) > n - q and s[: n - q] == tuple(prefix[q:]) for s in stops)]


def decided(prefix: list[int], stops: Stops) -> tuple[int, tuple[int, ...]] | None:
    """The stop, once the prefix makes the cut certain: a completed match that no live partial
    match starting at or before it can undercut (earlier start, or longer at the same start)."""
    found = batch_stop(prefix, stops)
    if found is None or any(q <= found[0] for q in live_starts(prefix, stops)):
        return None
    return found


def provable(prefix: list[int], stops: Stops, include: bool) -> int:
    """How many ids of an undecided prefix are certainly in the output: those before the
    earliest live partial match and before the earliest completed one (with include, everything
    through the completed one, or all ids if none)."""
    found = batch_stop(prefix, stops)
    if include:
        return len(prefix) if found is None else found[0] + len(found[1])
    return min([len(prefix), *live_starts(prefix, stops), *([found[0]] if found else [])])


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
    want = reference(ids, stops, include)
    # the first prefix that makes the cut certain: the stream ends in the frame of its last id
    when = next((m for m in range(1, len(ids) + 1) if decided(ids[:m], stops)), None)
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
        if when is not None and seen >= when:  # this item made the cut certain
            start, stop = decided(ids[:when], stops) or (0, ())
            assert completed and not subject.observers  # ended and disposed in that frame
            assert rec.finish == Finish(
                FinishReason.STOP, stop=reported(stop), dropped=tuple(ids[start + len(stop) : seen])
            )
            break
        assert not completed
        # earliest emission: every id out as soon as no stop can still start at or before it
        assert flat(out) == ids[: provable(ids[:seen], stops, include)]
    else:
        subject.on_completed()
        found = batch_stop(ids, stops)  # no partial match can complete any more
        if found is None:
            assert rec.finish == Finish(FinishReason.EOS)
        else:
            start, stop = found
            assert rec.finish == Finish(
                FinishReason.STOP, stop=reported(stop), dropped=tuple(ids[start + len(stop) :])
            )
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
    assert single == whole == reference(ids, stops, include)
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
    assert rec.finish == Finish(FinishReason.STOP, stop=(2, 3, 4))


def test_a_stop_sequence_across_items_cuts_the_last_item_and_reports_the_rest() -> None:
    # 2 of the first item waits; the second item completes the stop and nothing of it goes out
    m = MarbleTest()
    rec = FinishRecorder()
    src = m.cold("-a-b-c-|", {"a": (5, 2), "b": [3, 4, 8], "c": 1})
    m.expect(src.pipe(stop_on_tokens([[2, 3, 4]], on_finish=rec)), "-a-|", {"a": (5,)})
    m.expect_subscriptions(src, "^--!")
    assert rec.finish == Finish(FinishReason.STOP, stop=(2, 3, 4), dropped=(8,))


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


@pytest.mark.parametrize(
    ("fourth", "result", "upstream", "finish"),
    [
        # 4 completes the stop that starts first: the cut is before 1
        (4, "-------|", "^------!", Finish(FinishReason.STOP, stop=(1, 2, 3, 4))),
        # anything else rules it out: the cut is before 2 ([2, 3]) and 1 goes out then
        (5, "-------(a|)", "^------!", Finish(FinishReason.STOP, stop=(2, 3), dropped=(5,))),
    ],
)
def test_an_earlier_start_that_may_still_complete_is_waited_for(
    fourth: int, result: str, upstream: str, finish: Finish
) -> None:
    m = MarbleTest()
    rec = FinishRecorder()
    src = m.cold("-a-b-c-d-|", {"a": 1, "b": 2, "c": 3, "d": fourth})
    # on 3 the [2, 3] match is complete, but [1, 2, 3, 4] starts earlier and may still complete
    m.expect(src.pipe(stop_on_tokens([[1, 2, 3, 4], [2, 3]], on_finish=rec)), result, {"a": 1})
    m.expect_subscriptions(src, upstream)
    assert rec.finish == finish


def test_at_one_start_the_longest_stop_wins_and_is_waited_for() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-c-|", {"a": 1, "b": 2, "c": 5})
    # [1, 2] is complete on 2 but [1, 2, 3] starts at the same id and is longer: the stream waits
    # for it (with include_stop the ids of [1, 2] go out at once: they are emitted either way)
    m.expect(src.pipe(stop_on_tokens([[1, 2], [1, 2, 3]], include_stop=True)), "-a-b-|", {"a": 1, "b": 2})
    m.expect_subscriptions(src, "^----!")
    out: list[Any] = []
    rec = FinishRecorder()
    subject: Subject[Any] = Subject()
    subject.pipe(stop_on_tokens([[1, 2], [1, 2, 3]], on_finish=rec)).subscribe(out.append)
    for i in (0, 1, 2, 3):
        subject.on_next(i)
    assert out == [0] and rec.finish == Finish(FinishReason.STOP, stop=(1, 2, 3))
    assert not subject.observers


def test_a_completed_stop_still_waiting_ends_the_stream_when_the_source_completes() -> None:
    m = MarbleTest()
    rec = FinishRecorder()
    src = m.cold("-a-b-c-|", {"a": 1, "b": 2, "c": 3})
    m.expect(src.pipe(stop_on_tokens([[1, 2, 3, 4], [2, 3]], on_finish=rec)), "-------(a|)", {"a": 1})
    assert rec.finish == Finish(FinishReason.STOP, stop=(2, 3))


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
    """Long stops that share prefixes (the worst case of a naive matcher): the work, counted as
    the lines the operator's module runs, is linear in the total stop length and the number of
    ids (a failed partial match is not rescanned). Work is counted, not timed."""
    if sys.gettrace() is not None:
        pytest.skip("another tracer (coverage, a debugger) is active")

    def work(n: int) -> int:
        stops = [[1] * n + [2], [1] * (n // 2) + [3], [4, 4]]
        ids = ([1] * n + [4]) * 5 + [1] * n + [3]  # ends on the shorter stop, started long before
        lines = 0

        def local(frame: FrameType, event: str, arg: object) -> Any:
            nonlocal lines
            lines += event == "line"
            return local

        def tracer(frame: FrameType, event: str, arg: object) -> Any:
            return local if frame.f_code.co_filename == _stop_on_tokens.__file__ else None

        out: list[Any] = []
        sys.settrace(tracer)
        try:
            op = stop_on_tokens(stops)
            subject: Subject[Any] = Subject()
            subject.pipe(op).subscribe(out.append)
            subject.on_next(tuple(ids))
        finally:
            sys.settrace(None)
        assert flat(out) == ids[: -(n // 2) - 1]
        return lines

    small, large = work(500), work(5_000)
    assert large < small * 11  # ten times the size: ten times the work, not a hundred
