"""The ``measure`` operator (SEMANTICS §14): a pipeline's stages timed by a :class:`Meter` with a
clock the test drives — time to first token, gaps, tokens and characters, how long each stage
held text back — while the stream itself is unchanged (items, timing, disposal, dropped ids)."""

from __future__ import annotations

import itertools

import pytest
import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops
from reactivex.subject import Subject

from rxstream import FinishReason, FinishRecorder, Piece
from rxstream.operators import (
    Meter,
    detokenize,
    hold_back,
    measure,
    replace,
    route,
    stop,
    text_pipeline,
)
from rxstream.testing import MarbleTest
from rxstream.testing.tokenizers import byte_tokenizer


class Clock:
    """A clock the test sets."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def drive(pipeline: object, items: list[tuple[float, object]], clock: Clock, end: float) -> list[object]:
    """Push ``items`` (each at its time) through ``pipeline``, complete at ``end``; the output."""
    src: Subject[object] = Subject()
    out: list[object] = []
    src.pipe(pipeline).subscribe(out.append)  # type: ignore[arg-type]
    for t, item in items:
        clock.t = t
        src.on_next(item)
    clock.t = end
    src.on_completed()
    return out


def test_a_stop_string_start_held_until_the_item_that_decides_it() -> None:
    clock = Clock()
    meter = Meter(clock)
    meter.start(0.0)
    out = drive(
        measure(meter, stop(["ab"]), replace({"z": "Z"})),
        [(1.0, "xa"), (3.0, "y"), (6.0, "z")],
        clock,
        end=7.0,
    )
    assert out == ["x", "ay", "Z"]
    report = meter.report()
    held = {s.name: s for s in report.stages}
    assert (held["stop"].held, held["stop"].holds, held["stop"].longest) == (2.0, 1, 2.0)
    assert held["replace"].held == 0.0 and held["replace"].holds == 0
    assert report.chars == 4 and report.items == 3
    assert report.ttft == 1.0  # the first output came with the first item
    assert (report.gaps, report.gap_mean, report.gap_max) == (2, 2.5, 3.0)
    assert report.seconds == 7.0 and report.tokens == 0  # text in: no token ids


def test_a_stop_that_ends_the_stream_closes_its_hold() -> None:
    clock = Clock()
    meter = Meter(clock)
    meter.start(0.0)
    out = drive(measure(meter, stop(["##"])), [(1.0, "ab#"), (3.0, "#c"), (4.0, "never")], clock, end=5.0)
    assert out == ["ab"]
    stage = meter.report().stages[0]
    assert (stage.held, stage.holds) == (2.0, 1)  # "#" from 1.0 until the stop at 3.0, once
    assert meter.report().seconds == 3.0


def test_text_released_only_at_the_end_is_held_until_the_end() -> None:
    clock = Clock()
    meter = Meter(clock)
    meter.start(0.0)
    out = drive(measure(meter, hold_back(["<tool>"])), [(1.0, "a<to"), (2.0, "o")], clock, end=5.0)
    assert "".join(out) == "a<too"
    stage = meter.report().stages[0]
    assert (stage.held, stage.holds) == (4.0, 1)  # from 1.0 (after "a<to") to the end at 5.0


def test_detokenize_holds_the_bytes_of_an_incomplete_character() -> None:
    tok = byte_tokenizer()
    euro = list("€".encode())  # three byte tokens
    clock = Clock()
    meter = Meter(clock)
    meter.start(0.0)
    items = [(1.0, ord("a")), (2.0, euro[0]), (4.0, euro[1]), (7.0, euro[2]), (8.0, ord("b"))]
    out = drive(measure(meter, detokenize(tok)), items, clock, end=9.0)  # type: ignore[arg-type]
    assert "".join(out) == "a€b"  # type: ignore[arg-type]
    report = meter.report()
    assert report.tokens == 5
    assert (report.stages[0].held, report.stages[0].holds) == (5.0, 1)  # from 2.0 to 7.0
    assert report.stages[0].name == "detokenize"


def test_a_composite_stage_holds_while_any_of_its_operators_does() -> None:
    tok = byte_tokenizer()
    clock = Clock()
    meter = Meter(clock)
    meter.start(0.0)
    ids = [(1.0, [ord(c) for c in "hi #"]), (2.0, [ord("x")])]
    out = drive(measure(meter, text_pipeline(tok, stop=["##"])), ids, clock, end=3.0)
    assert "".join(out) == "hi #x"  # type: ignore[arg-type]
    stage = meter.report().stages[0]
    assert stage.name == "_text_pipeline" and (stage.held, stage.holds) == (1.0, 1)


def test_a_route_holds_a_possible_delimiter() -> None:
    clock = Clock()
    meter = Meter(clock)
    meter.start(0.0)
    out = drive(
        measure(meter, route("qwen3"), names=["route"]), [(1.0, "ok <th"), (4.0, "en")], clock, end=5.0
    )
    assert "".join(s.text for s in out) == "ok <then"  # type: ignore[attr-defined]
    stage = meter.report().stages[0]
    assert (stage.name, stage.held, stage.holds) == ("route", 3.0, 1)


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet="ab#<>xy\n", max_size=40), cuts=st.lists(st.integers(0, 40), max_size=8))
def test_the_stream_is_the_same_with_and_without_the_meter(text: str, cuts: list[int]) -> None:
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    chunks = [text[a:b] for a, b in itertools.pairwise(bounds)]

    def pipeline() -> list[object]:
        return [stop(["##", "\n\n"]), replace({"<>": "[]", "x": "X"})]

    plain = rx.from_iterable(chunks).pipe(*pipeline(), ops.to_list()).run()
    meter = Meter()
    measured = rx.from_iterable(chunks).pipe(measure(meter, *pipeline()), ops.to_list()).run()  # type: ignore[arg-type]
    assert measured == plain
    report = meter.report()
    assert report.chars == sum(map(len, plain))
    assert report.items == len(plain)
    assert all(s.held >= 0.0 and s.longest <= s.held for s in report.stages)
    names = [(o.stage, o.name) for o in report.operators]
    assert names == [("stop", "stop"), ("replace", "replace")]
    if "##" not in text and "\n\n" not in text and any(c.endswith(("#", "\n")) for c in chunks):
        assert report.stages[0].holds >= 1  # a chunk ended in a stop string's start: held


def test_emission_timing_and_disposal_pass_through() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-c-|", {"a": "x#", "b": "#y", "c": "z"})
    m.expect(src.pipe(measure(Meter(), stop(["##"]))), "-a-|", {"a": "x"})
    m.expect_subscriptions(src, "^--!")  # the stop disposed the source through the taps


def test_dropped_ids_are_still_reported_through_the_taps() -> None:
    tok = byte_tokenizer()
    ids = [ord(c) for c in "ab##cd"]
    plain, metered = FinishRecorder(), FinishRecorder()
    out1 = (
        rx.from_iterable(ids)
        .pipe(text_pipeline(tok, stop=["##"], aligned=True, on_finish=plain), ops.to_list())
        .run()
    )
    stage = text_pipeline(tok, stop=["##"], aligned=True, on_finish=metered)
    out2 = rx.from_iterable(ids).pipe(measure(Meter(), stage), ops.to_list()).run()
    assert out1 == out2 and all(isinstance(p, Piece) for p in out2)
    assert plain.finish is not None and metered.finish is not None
    assert metered.finish.reason is FinishReason.STOP and metered.finish.dropped == plain.finish.dropped


def test_one_stream_at_a_time_and_a_fresh_start_for_the_next() -> None:
    meter = Meter()
    gate: Subject[str] = Subject()
    piped = gate.pipe(measure(meter, stop(["!"])))
    piped.subscribe()
    errors: list[Exception] = []
    piped.subscribe(on_error=errors.append)  # a second stream while the first runs
    assert len(errors) == 1 and "one stream at a time" in str(errors[0])
    gate.on_next("ab")
    gate.on_completed()
    assert meter.report().chars == 2
    rx.from_iterable(["xyz"]).pipe(measure(meter, stop(["!"]))).run()
    assert meter.report().chars == 3  # figures of the new stream only


def test_bad_arguments_are_refused_at_construction() -> None:
    with pytest.raises(TypeError, match="must be a Meter"):
        measure(object(), stop(["a"]))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one stage"):
        measure(Meter())
    with pytest.raises(TypeError, match="must be an operator"):
        measure(Meter(), "stop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2 stages but 1 names"):
        measure(Meter(), stop(["a"]), replace({"a": "b"}), names=["x"])
    with pytest.raises(TypeError, match="clock must be callable"):
        Meter(clock=3.0)  # type: ignore[arg-type]
