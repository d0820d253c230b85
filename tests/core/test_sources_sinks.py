"""replay() and run_text(): recorded streams through real threads and timers."""

from __future__ import annotations

import threading
import time

import pytest

from rxstream import Finish, FinishReason, FinishRecorder, Piece, replay, run_text
from rxstream.operators import replace, stop
from rxstream.testing import MarbleTest


def test_replay_on_the_virtual_clock_is_one_item_per_interval() -> None:
    m = MarbleTest()
    m.expect(replay(["a", "b", "c"], 2.0, scheduler=m.scheduler), "--a-b-c-|")


def test_replay_is_cold_and_stop_disposes_it_on_a_timer_thread() -> None:
    emitted: list[str] = []
    src = replay(["x", "<", "end>", "after1", "after2"], 0.01)
    rec = FinishRecorder()

    def record(s: str) -> str:
        emitted.append(s)
        return s

    from reactivex import operators as ops

    text = run_text(src.pipe(ops.map(record), replace({"x": "X"}), stop("<end>", on_finish=rec)), timeout=5)
    assert text == "X"
    time.sleep(0.05)
    assert emitted == ["x", "<", "end>"]  # nothing replayed after the stop disposed it
    assert rec.finish == Finish(FinishReason.STOP, stop="<end>")
    # cold: a second subscription replays from the start
    assert run_text(src.pipe(stop("after1")), timeout=5) == "x<end>"


def test_run_text_accepts_pieces_and_raises_stream_errors() -> None:
    assert run_text(replay([Piece("a", (1,)), Piece("b", (2,))])) == "ab"
    with pytest.raises(TypeError, match="replace: expected str or Piece items, got int: 3"):
        run_text(replay(["a", 3]).pipe(replace({"a": "b"})))


def test_run_text_timeout_disposes_the_stream() -> None:
    rec = FinishRecorder()
    before = threading.active_count()
    with pytest.raises(TimeoutError):
        run_text(replay(["a"] * 1000, 0.01).pipe(stop("zz", on_finish=rec)), timeout=0.1)
    assert rec.finish == Finish(FinishReason.CANCELLED)
    time.sleep(0.05)
    assert threading.active_count() <= before + 1


def test_replay_rejects_negative_interval() -> None:
    with pytest.raises(ValueError, match="replay: interval must be >= 0"):
        replay([], -1)
