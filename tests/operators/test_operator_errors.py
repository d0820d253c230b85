"""Bad input gets a clear error at construction or on on_error; nothing is raised into the producer."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import reactivex as rx
from reactivex.subject import Subject

from rxstream import Finish, FinishReason, FinishRecorder
from rxstream.operators import (
    deltas,
    hold_back,
    max_tokens,
    replace,
    serialize,
    snapshots,
    stop,
    stop_on_tokens,
)


@pytest.mark.parametrize(
    ("make", "error", "text"),
    [
        (lambda: replace({"": "x"}), ValueError, "replace: pattern must be non-empty"),
        (lambda: replace([("a", 1)]), TypeError, "replacement for 'a' must be a str"),
        (lambda: replace([("a",)]), TypeError, "must be a (pattern, replacement) pair"),
        (lambda: replace("ab"), TypeError, "mapping or (pattern, replacement) pairs"),
        (lambda: hold_back([""]), ValueError, "hold_back: pattern must be non-empty"),
        (lambda: hold_back([3]), TypeError, "hold_back: pattern must be a str"),
        (lambda: stop(""), ValueError, "stop: stop string must be non-empty"),
        (lambda: stop(["a", None]), TypeError, "stop: stop string must be a str, got NoneType"),
        (lambda: stop("a", prompt=5), TypeError, "stop: prompt must be a str"),
        (lambda: max_tokens(-1), ValueError, "max_tokens: budget must be >= 0, got -1"),
        (lambda: max_tokens(True), TypeError, "max_tokens: budget must be an int"),
        (lambda: max_tokens(2.5), TypeError, "max_tokens: budget must be an int"),
        (lambda: stop_on_tokens([-3]), ValueError, "stop_on_tokens: token ids must be >= 0"),
        (lambda: stop_on_tokens(["2"]), TypeError, "stop_on_tokens: token ids must be int"),
    ],
)
def test_construction_errors(make: Any, error: type[Exception], text: str) -> None:
    with pytest.raises(error) as info:
        make()
    assert text in str(info.value)


@pytest.mark.parametrize(
    ("op", "bad", "text"),
    [
        (replace({"a": "b"}), 7, "replace: expected str or Piece items, got int: 7"),
        (hold_back("a"), b"x", "hold_back: expected str or Piece items, got bytes: b'x'"),
        (stop("a"), None, "stop: expected str or Piece items, got NoneType: None"),
        (deltas(), 1.5, "deltas: expected str snapshots, got float: 1.5"),
        (snapshots(), ["x"], "snapshots: expected str deltas, got list: ['x']"),
        (stop_on_tokens(2), "2", "stop_on_tokens: expected an int token id"),
        (max_tokens(3), 1.0, "max_tokens: expected an int token id"),
        (max_tokens(3), [1, "x"], "max_tokens: token ids must be integers, got str: 'x'"),
    ],
)
def test_runtime_bad_item_goes_to_on_error_not_the_producer(op: Any, bad: Any, text: str) -> None:
    subject: Subject[Any] = Subject()
    errors: list[Exception] = []
    items: list[Any] = []
    subject.pipe(op).subscribe(items.append, errors.append)
    subject.on_next(bad)  # must not raise here
    subject.on_next("late")  # ignored after the error
    assert len(errors) == 1 and text in str(errors[0])
    assert items == []
    assert not subject.observers  # the operator disposed its upstream


def test_token_operators_accept_numpy_integer_ids() -> None:
    import numpy as np

    rec = FinishRecorder()
    out: list[Any] = []
    items = [np.int64(5), np.array([6, 7], dtype=np.int32), np.int64(2), np.int64(9)]
    rx.from_iterable(items).pipe(max_tokens(10), stop_on_tokens([2], on_finish=rec)).subscribe(out.append)
    assert [int(x) for item in out for x in np.atleast_1d(item)] == [5, 6, 7]
    assert rec.finish == Finish(FinishReason.STOP, stop=2)
    errors: list[Exception] = []
    rx.from_iterable([np.bool_(True)]).pipe(max_tokens(3)).subscribe(on_error=errors.append)
    assert errors and "max_tokens" in str(errors[0])


def test_no_patterns_is_a_pass_through() -> None:
    rec = FinishRecorder()
    out: list[str] = []
    rx.from_iterable(["a", "b"]).pipe(replace({}), stop([], on_finish=rec)).subscribe(out.append)
    assert out == ["a", "b"] and rec.finish == Finish(FinishReason.EOS)


def test_stop_reports_error_finish_for_bad_item() -> None:
    rec = FinishRecorder()
    subject: Subject[Any] = Subject()
    subject.pipe(stop("x", on_finish=rec)).subscribe(on_error=lambda e: None)
    subject.on_next(5)
    assert rec.finish is not None and rec.finish.reason is FinishReason.ERROR
    assert isinstance(rec.finish.error, TypeError)


def test_mixing_str_and_piece_is_an_error() -> None:
    from rxstream import Piece

    errors: list[Exception] = []
    rx.from_iterable(["a", Piece("b", (1,))]).pipe(replace({"x": "y"})).subscribe(on_error=errors.append)
    assert errors and "replace" in str(errors[0])


def test_finish_reported_once_even_with_many_stages() -> None:
    rec = FinishRecorder()
    out: list[str] = []
    rx.from_iterable(["a<", "end>", "b"]).pipe(
        stop("<end>", on_finish=rec), stop("zz", on_finish=rec)
    ).subscribe(out.append)
    assert out == ["a"]
    assert rec.reports == [Finish(FinishReason.STOP, stop="<end>"), Finish(FinishReason.EOS)]
    assert rec.finish == Finish(FinishReason.STOP, stop="<end>")


def test_serialize_makes_concurrent_producers_safe() -> None:
    """Four threads push at once; downstream never sees overlapping calls and loses nothing."""
    subject: Subject[str] = Subject()
    inside = threading.Lock()
    overlaps = 0
    got: list[str] = []

    def on_next(v: str) -> None:
        nonlocal overlaps
        if not inside.acquire(blocking=False):
            overlaps += 1
            return
        try:
            got.append(v)
            time.sleep(0)  # invite a thread switch while "inside"
        finally:
            inside.release()

    subject.pipe(serialize(), replace({"<x>": "X"})).subscribe(on_next)
    per_thread = 500

    def produce(k: int) -> None:
        for i in range(per_thread):
            subject.on_next(f"[{k}:{i}]")

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert overlaps == 0
    text = "".join(got)
    for k in range(4):
        seq = [int(x.split(":")[1]) for x in text.strip("[]").split("][") if x.startswith(f"{k}:")]
        assert seq == list(range(per_thread))  # each thread's order is kept


def test_serialize_stops_after_terminal_and_on_dispose() -> None:
    subject: Subject[str] = Subject()
    got: list[str] = []
    done: list[bool] = []
    sub = subject.pipe(serialize()).subscribe(got.append, on_completed=lambda: done.append(True))
    subject.on_next("a")
    sub.dispose()
    subject.on_next("b")
    assert got == ["a"] and not done


def test_serialize_after_a_subscriber_exception_stops_and_disposes_upstream() -> None:
    """A raising subscriber must not wedge serialize: later items from any thread are neither
    delivered nor queued, the upstream is disposed, and the exception reaches the delivering
    thread (as through reactivex's own operators)."""
    subject: Subject[int] = Subject()
    got: list[int] = []
    completed: list[bool] = []
    raised: list[BaseException] = []

    def on_next(v: int) -> None:
        got.append(v)
        if v == 3:
            raise RuntimeError("subscriber failed")

    subject.pipe(serialize()).subscribe(on_next, on_completed=lambda: completed.append(True))
    assert len(subject.observers) == 1

    def produce(values: range) -> None:
        for v in values:
            try:
                subject.on_next(v)
            except RuntimeError as exc:
                raised.append(exc)

    produce(range(5))  # the subscriber raises at 3
    assert got == [0, 1, 2, 3]
    assert [str(e) for e in raised] == ["subscriber failed"]
    assert subject.observers == []  # upstream disposed: nothing more can be queued
    threads = [threading.Thread(target=produce, args=(range(1000),)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    threading.Thread(target=subject.on_completed).start()
    assert got == [0, 1, 2, 3] and not completed and len(raised) == 1


def test_serialize_subscriber_exception_while_other_threads_queue() -> None:
    """Threads queue items while the delivering thread's subscriber raises: the queued items are
    discarded, nothing is delivered afterwards, and every producer thread finishes."""
    subject: Subject[int] = Subject()
    got: list[int] = []
    entered = threading.Event()
    release = threading.Event()

    def on_next(v: int) -> None:
        got.append(v)
        if v == 0:
            entered.set()
            release.wait(10)  # other threads queue behind this delivery
            raise RuntimeError("subscriber failed")

    subject.pipe(serialize()).subscribe(on_next)
    raised: list[BaseException] = []

    def deliver_first() -> None:
        try:
            subject.on_next(0)
        except RuntimeError as exc:
            raised.append(exc)

    first = threading.Thread(target=deliver_first)
    first.start()
    assert entered.wait(10)
    others = [
        threading.Thread(target=lambda k=k: [subject.on_next(1 + k * 100 + i) for i in range(100)])
        for k in range(4)
    ]
    for t in others:
        t.start()
    for t in others:
        t.join(10)
    release.set()
    first.join(10)
    assert not first.is_alive() and not any(t.is_alive() for t in others)
    assert got == [0] and len(raised) == 1
    assert subject.observers == []
    subject.on_next(999)
    assert got == [0]


SUBSCRIBER_CASES = [
    (lambda: deltas(), ["a", "ab", "abc"]),
    (lambda: snapshots(), ["a", "b", "c"]),
    (lambda: replace({"<x>": "X"}), ["a", "b", "c"]),
    (lambda: hold_back("<x>"), ["a", "b", "c"]),
    (lambda: stop("<end>"), ["a", "b", "c"]),
    (lambda: max_tokens(10), [1, 2, 3]),
    (lambda: stop_on_tokens(99), [1, 2, 3]),
]


@pytest.mark.parametrize(("make", "items"), SUBSCRIBER_CASES)
def test_subscriber_exception_stops_the_operator_and_disposes_upstream(make: Any, items: list[Any]) -> None:
    """A subscriber whose on_next raises (and that has no on_error, so reactivex re-raises):
    the operator delivers nothing more and disposes its upstream, even though routing the error
    to the subscriber raised again; it never keeps the upstream running into a dead stream."""
    subject: Subject[Any] = Subject()
    got: list[Any] = []

    def on_next(v: Any) -> None:
        got.append(v)
        raise RuntimeError("subscriber failed")

    subject.pipe(make()).subscribe(on_next)
    with pytest.raises(RuntimeError, match="subscriber failed"):
        subject.on_next(items[0])
    assert subject.observers == []
    for v in items[1:]:
        subject.on_next(v)
    assert len(got) == 1


def test_stop_disposes_upstream_even_if_the_subscribers_on_completed_raises() -> None:
    subject: Subject[str] = Subject()

    def on_completed() -> None:
        raise RuntimeError("subscriber failed")

    subject.pipe(stop("<end>")).subscribe(lambda v: None, lambda e: None, on_completed)
    with pytest.raises(RuntimeError, match="subscriber failed"):
        subject.on_next("a<end>")
    assert subject.observers == []  # the generator upstream is cancelled all the same
