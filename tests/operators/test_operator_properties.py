"""SEMANTICS §1–§3 and §5–§6 as properties of the Rx operators (hypothesis)."""

from __future__ import annotations

from functools import partial
from typing import Any

import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import Observable

from rxstream import Finish, FinishReason, FinishRecorder, Piece
from rxstream.operators import deltas, hold_back, replace, snapshots, stop
from tests.reference import batch_replace, batch_stop, replace_emitted, replace_resolved, stop_state

ALPHA = "ab<>|\n"
texts = st.text(alphabet=ALPHA, max_size=40)
patterns = st.text(alphabet=ALPHA, min_size=1, max_size=5)
rules_st = st.lists(st.tuples(patterns, st.text(alphabet="XY", max_size=3)), min_size=1, max_size=8)
stops_st = st.lists(patterns, min_size=1, max_size=5)


@st.composite
def chunked(draw: st.DrawFn, text_strategy: st.SearchStrategy[str] = texts) -> list[str]:
    """A text cut into chunks, empty chunks included."""
    text = draw(text_strategy)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    chunks, last = [], 0
    for c in cuts:
        chunks.append(text[last:c])
        last = c
    chunks.append(text[last:])
    return chunks


def run_steps(chunks: list[Any], op: Any) -> tuple[list[list[Any]], list[Any], bool]:
    """Push chunks one at a time through ``op``; return what came out after each push."""
    subject: rx.subject.Subject[Any] = rx.subject.Subject()
    out: list[Any] = []
    state = {"completed": False}
    subject.pipe(op).subscribe(
        out.append, lambda e: (_ for _ in ()).throw(e), lambda: state.__setitem__("completed", True)
    )
    steps = []
    for c in chunks:
        subject.on_next(c)
        steps.append(list(out))
        if state["completed"]:
            break
    subject.on_completed()
    return steps, out, state["completed"]


def collect(source: Observable[Any]) -> list[Any]:
    out: list[Any] = []
    source.subscribe(out.append)
    return out


@settings(max_examples=300, deadline=None)
@given(chunked(), rules_st)
def test_replace_earliest_emission_and_batch_equivalence(chunks: list[str], rules) -> None:
    steps, out, _ = run_steps(chunks, replace(rules))
    seen = ""
    for chunk, emitted in zip(chunks, steps, strict=True):
        seen += chunk
        assert "".join(emitted) == replace_emitted(seen, rules)
    assert "".join(out) == batch_replace("".join(chunks), rules)
    assert "" not in out


@settings(max_examples=200, deadline=None)
@given(chunked(), chunked(), rules_st)
def test_replace_chunking_invariance(a: list[str], b: list[str], rules) -> None:
    text = "".join(a)
    rechunked = [text[: len("".join(b))], text[len("".join(b)) :], ""]
    out1 = "".join(collect(rx.from_iterable(a).pipe(replace(rules))))
    out2 = "".join(collect(rx.from_iterable(rechunked).pipe(replace(rules))))
    out3 = "".join(collect(rx.from_iterable(list(text)).pipe(replace(rules))))
    assert out1 == out2 == out3


@settings(max_examples=200, deadline=None)
@given(chunked(), stops_st)
def test_hold_back_passes_text_unchanged_and_holds_only_open_text(chunks: list[str], pats) -> None:
    steps, out, _ = run_steps(chunks, hold_back(pats))
    seen = ""
    for chunk, emitted in zip(chunks, steps, strict=True):
        seen += chunk
        assert "".join(emitted) == replace_emitted(seen, [(p, p) for p in pats])
    assert "".join(out) == "".join(chunks)


@settings(max_examples=300, deadline=None)
@given(chunked(), stops_st, st.booleans())
def test_stop_streaming_rule_and_finish_reason(chunks: list[str], stops, include) -> None:
    rec = FinishRecorder()
    steps, out, _completed = run_steps(chunks, stop(stops, include, on_finish=rec))
    seen = ""
    for chunk, emitted in zip(chunks, steps, strict=True):
        seen += chunk
        expected, decided = stop_state(seen, stops, include)
        assert "".join(emitted) == expected
        if decided:
            break
    text = "".join(chunks)
    batch_out, batch_match = batch_stop(text, stops, include)
    assert "".join(out) == batch_out
    assert rec.finish == (
        Finish(FinishReason.STOP, stop=batch_match) if batch_match is not None else Finish(FinishReason.EOS)
    )
    assert "" not in out


@settings(max_examples=200, deadline=None)
@given(chunked(), stops_st, rules_st, st.booleans())
def test_replace_then_stop_is_chunking_invariant(chunks: list[str], stops, rules, include) -> None:
    text = "".join(chunks)
    results = []
    for pieces in (chunks, [text], list(text)):
        rec = FinishRecorder()
        out = collect(rx.from_iterable(pieces).pipe(replace(rules), stop(stops, include, on_finish=rec)))
        results.append(("".join(out), rec.finish))
    assert results[0] == results[1] == results[2]
    expected, _match = batch_stop(batch_replace(text, rules), stops, include)
    assert results[0][0] == expected


@settings(max_examples=150, deadline=None)
@given(chunked(st.text(alphabet="ab<>", max_size=30)))
def test_deltas_snapshots_round_trip(chunks: list[str]) -> None:
    snaps = collect(rx.from_iterable(chunks).pipe(snapshots()))
    text = "".join(chunks)
    assert snaps == [text[: len("".join(chunks[: i + 1]))] for i in range(len(chunks)) if chunks[i]]
    assert "".join(collect(rx.from_iterable(snaps).pipe(deltas()))) == text


# -- token alignment (SEMANTICS §5) ---------------------------------------------------------------
@st.composite
def pieces(draw: st.DrawFn) -> list[Piece]:
    """Pieces of text each carrying one or two made-up ids and logprobs."""
    chunks = draw(chunked())
    out, next_id = [], 100
    for c in chunks:
        n = draw(st.integers(1, 2))
        ids = tuple(range(next_id, next_id + n))
        next_id += n
        out.append(Piece(c, ids, tuple(-0.5 * i for i in ids)))
    return out


def id_ends(inp: list[Piece]) -> list[tuple[int, int]]:
    """(id, position where its piece's text ends) for every input id, in order."""
    pos, out = 0, []
    for p in inp:
        pos += len(p.text)
        out.extend((i, pos) for i in p.ids)
    return out


def check_steps(inp: list[Piece], steps: list[list[Piece]], resolved_at: list[int]) -> None:
    """After each input piece: ids come out in order, once each, with their own logprobs; none
    before its text is resolved; and a step that emits text hands out every id resolved by then."""
    ends = id_ends(inp)
    all_ids = [i for i, _ in ends]
    before = 0
    for k, (step, resolved) in enumerate(zip(steps, resolved_at, strict=False)):
        received = sum(len(p.ids) for p in inp[: k + 1])
        ids = [i for p in step for i in p.ids]
        assert ids == all_ids[: len(ids)]
        for p in step:
            assert p.logprobs == tuple(-0.5 * i for i in p.ids)
        assert all(end <= resolved for _, end in ends[: len(ids)])
        if len(step) > before:
            assert ids == [i for i, end in ends[:received] if end <= resolved]
        before = len(step)


@settings(max_examples=200, deadline=None)
@given(pieces(), rules_st)
def test_replace_keeps_ids_aligned(inp: list[Piece], rules) -> None:
    steps, out, _ = run_steps(inp, replace(rules))
    text = "".join(p.text for p in inp)
    assert "".join(p.text for p in out) == batch_replace(text, rules)
    seen, resolved_at = "", []
    for p in inp:
        seen += p.text
        resolved_at.append(replace_resolved(seen, rules))
    check_steps(inp, steps, resolved_at)
    assert [i for p in out for i in p.ids] == [i for p in inp for i in p.ids]  # nothing lost


@settings(max_examples=200, deadline=None)
@given(pieces(), stops_st, st.booleans())
def test_stop_keeps_ids_aligned_and_reports_dropped(inp: list[Piece], stops, include) -> None:
    rec = FinishRecorder()
    steps, out, _ = run_steps(inp, stop(stops, include, on_finish=rec))
    text = "".join(p.text for p in inp)
    expected, match = batch_stop(text, stops, include)
    assert "".join(p.text for p in out) == expected
    seen, resolved_at = "", []
    for p in inp:
        seen += p.text
        resolved_at.append(len(stop_state(seen, stops, include)[0]))
    check_steps(inp, steps, resolved_at)
    kept = [i for p in out for i in p.ids]
    assert rec.finish is not None
    everything = [i for p in inp for i in p.ids]
    if match is None:
        assert kept == everything
    else:
        received = id_ends(inp[: len(steps)])
        assert kept == [i for i, end in received if end <= len(expected)]
        dropped = list(rec.finish.dropped)
        assert kept + dropped == everything[: len(kept) + len(dropped)]
        # every id whose text reaches past the output up to the stop's end is reported dropped
        stop_end = len(expected) + (0 if include else len(match))
        assert set(dropped) >= {i for i, end in received if len(expected) < end <= stop_end}


# -- SEMANTICS §1 completion rules: error and disposal at any point ---------------------------------------
@settings(max_examples=150, deadline=None)
@given(chunked(), rules_st, stops_st, st.integers(0, 20), st.sampled_from(["error", "dispose"]))
def test_error_or_disposal_at_any_point_flushes_nothing(
    chunks: list[str], rules, stops, cut: int, how: str
) -> None:
    """An upstream error is forwarded without the held text; a disposal stops all emission and
    reaches the source. Either way the output is exactly what earliest emission had released."""
    cut = min(cut, len(chunks))
    for make, released in (
        (lambda: replace(rules), lambda seen: replace_emitted(seen, rules)),
        (lambda: hold_back(stops), lambda seen: replace_emitted(seen, [(p, p) for p in stops])),
        (lambda: stop(stops), lambda seen: stop_state(seen, stops)[0]),
    ):
        subject: rx.subject.Subject[str] = rx.subject.Subject()
        out: list[str] = []
        errors: list[Exception] = []
        completed: list[bool] = []
        sub = subject.pipe(make()).subscribe(out.append, errors.append, partial(completed.append, True))
        seen = ""
        for c in chunks[:cut]:
            if completed:
                break
            subject.on_next(c)
            seen += c
        if completed:  # a stop decided before the cut: nothing more to check here
            continue
        boom = RuntimeError("upstream failed")
        if how == "error":
            subject.on_error(boom)
            assert errors == [boom]
        else:
            sub.dispose()
            assert not subject.observers  # the disposal reached the source
            subject.on_next("more text")
            subject.on_completed()
            assert not errors and not completed
        assert "".join(out) == released(seen)


def prompt_stop(prompt: str, text: str, stops: list[str], include: bool) -> tuple[str, str | None]:
    """Batch stop with a prompt (SEMANTICS §3, ``prompt=``): occurrences in prompt + text that end
    inside the prompt do not count; the output never contains prompt text."""
    full = prompt + text
    best: tuple[int, int] | None = None
    for s in stops:
        p = full.find(s)
        while p >= 0 and p + len(s) <= len(prompt):
            p = full.find(s, p + 1)
        if p >= 0 and (best is None or (p, -len(s)) < (best[0], -best[1])):
            best = (p, len(s))
    if best is None:
        return text, None
    end = best[0] + (best[1] if include else 0)
    matched = full[best[0] : best[0] + best[1]]
    return full[len(prompt) : max(end, len(prompt))], matched


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=ALPHA, max_size=8), chunked(), stops_st, st.booleans())
def test_stop_with_prompt_matches_the_batch_rule(prompt: str, chunks: list[str], stops, include) -> None:
    rec = FinishRecorder()
    steps, out, _ = run_steps(chunks, stop(stops, include, prompt=prompt, on_finish=rec))
    expected, matched = prompt_stop(prompt, "".join(chunks), stops, include)
    assert all(expected.startswith("".join(step)) for step in steps)
    assert "".join(out) == expected
    assert rec.finish is not None
    assert rec.finish.stop == matched
    assert "" not in out
