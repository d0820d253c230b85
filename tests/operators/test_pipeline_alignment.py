"""detokenize(aligned=True) -> replace -> stop on a real tokenizer: ids and logprobs stay aligned
with the text end to end (SEMANTICS §4–§5), however the ids are grouped into items."""

from __future__ import annotations

from typing import Any

import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as rxops
from reactivex.subject import Subject

from rxstream import FinishReason, FinishRecorder, Piece
from rxstream.operators import detokenize, hold_back, replace, stop
from rxstream.testing.tokenizers import bytelevel, llama
from tests.reference import batch_replace, batch_stop

WORDS = ["Hello", " world", "<NL>", " café", " 🗼", " 中文", "!\n", "User:", " end", "<|", "|>", " 👩‍👩‍👧"]
RULES = [("<NL>", "\n"), ("café", "CAFE"), ("<||>", "[sep]")]
STOPS = ["\nUser:", "STOP", " end."]


def logprob(i: int) -> float:
    return -((i % 97) + 1) / 10


@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.sampled_from([*WORDS, " end.", "STOP"]), max_size=14),
    st.lists(st.integers(1, 3), max_size=40),
    st.sampled_from(["bytelevel", "llama"]),
)
def test_pipeline_keeps_ids_and_logprobs_aligned(words: list[str], sizes: list[int], family: str) -> None:
    tok = bytelevel() if family == "bytelevel" else llama()
    text = "".join(words)
    ids = tok.encode(text, add_special_tokens=False).ids
    decoded = tok.decode(ids)
    # group ids into items of 1-3 ids (speculative decoding), each a Piece with logprobs
    items, k = [], 0
    for n in [*sizes, *([1] * len(ids))]:
        if k >= len(ids):
            break
        group = tuple(ids[k : k + n])
        items.append(Piece("", group, tuple(logprob(i) for i in group)))
        k += n
    rec = FinishRecorder()
    out: list[Piece] = []
    rx.from_iterable(items).pipe(
        detokenize(tok, aligned=True), replace(RULES), stop(STOPS, on_finish=rec)
    ).subscribe(out.append)

    expected_text, match = batch_stop(batch_replace(decoded, RULES), STOPS)
    assert "".join(p.text for p in out) == expected_text
    kept = [i for p in out for i in p.ids]
    for p in out:
        assert p.logprobs == tuple(logprob(i) for i in p.ids)
    assert rec.finish is not None
    if match is None:
        assert rec.finish.reason is FinishReason.EOS
        assert kept == ids  # every id comes out exactly once, in order
    else:
        assert rec.finish.reason is FinishReason.STOP and rec.finish.stop == match
        dropped = list(rec.finish.dropped)
        assert kept + dropped == ids[: len(kept) + len(dropped)]
        # the kept ids are a prefix of the stream, and the stop cut nothing before their text ends
        assert decoded.startswith(tok.decode(kept))
        assert len(batch_replace(tok.decode(kept), RULES)) <= len(expected_text) + max(map(len, STOPS))


# -- every id that enters is emitted or reported dropped (SEMANTICS §5) ----------------------------
PATTERNS = ["<NL>", "café", "<||>", "\nUser:", "STOP", " end.", "<|", "Hel", "lo w", "中文", "🗼 ", "e"]

rule_st = st.tuples(st.sampled_from(PATTERNS), st.sampled_from(["", "X", "<"]))
stage_st = st.one_of(
    st.tuples(st.just("replace"), st.lists(rule_st, min_size=1, max_size=3)),
    st.tuples(st.just("hold_back"), st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=3)),
    st.tuples(
        st.just("stop"), st.tuples(st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=3), st.booleans())
    ),
)


def build(kind: str, arg: Any, rec: FinishRecorder | None) -> Any:
    if kind == "replace":
        return replace(arg, on_finish=rec)
    if kind == "hold_back":
        return hold_back(arg, on_finish=rec)
    stops, include = arg
    return stop(stops, include, on_finish=rec)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from([*WORDS, " end.", "STOP", "é", "中"]), max_size=14),
    st.lists(st.integers(1, 3), max_size=40),
    st.lists(stage_st, min_size=1, max_size=4),
    st.lists(st.booleans(), min_size=4, max_size=4),
    st.sampled_from(["bytelevel", "llama"]),
    st.sampled_from(["complete", "dispose_in_on_next", "dispose_between", "error"]),
    st.integers(0, 30),
)
def test_every_id_is_emitted_or_reported_dropped(
    words: list[str],
    sizes: list[int],
    stages: list[Any],
    reporters: list[bool],
    family: str,
    end: str,
    at: int,
) -> None:
    """Random chains of replace / hold_back / stop after detokenize(aligned=True), random rules
    and groupings of ids into items, ended by completion, a stop, the subscriber disposing (from
    its on_next, or between items) or an upstream error: the ids emitted followed by the ids
    reported in ``Finish.dropped`` (over all reports, in order) are exactly the ids that entered
    the pipeline, in order. The last stage always reports; others at random."""
    tok = bytelevel() if family == "bytelevel" else llama()
    ids = tok.encode("".join(words), add_special_tokens=False).ids
    items, k = [], 0
    for n in [*sizes, *([1] * len(ids))]:
        if k >= len(ids):
            break
        items.append(Piece("", tuple(ids[k : k + n]), tuple(logprob(i) for i in ids[k : k + n])))
        k += n
    rec = FinishRecorder()
    ops_ = [detokenize(tok, aligned=True)]
    for j, (kind, arg) in enumerate(stages):
        last = j == len(stages) - 1
        ops_.append(build(kind, arg, rec if last or reporters[j] else None))
    entered: list[int] = []
    out: list[Piece] = []
    subject: Subject[Piece] = Subject()
    source = subject.pipe(rxops.do_action(on_next=lambda p: entered.extend(p.ids)))
    holder: dict[str, Any] = {}

    def on_next(p: Piece) -> None:
        out.append(p)
        if end == "dispose_in_on_next" and len(out) > at % 4:
            holder["sub"].dispose()

    holder["sub"] = source.pipe(*ops_).subscribe(on_next, lambda e: None)
    for n, item in enumerate(items):
        if end == "dispose_between" and n == at:
            holder["sub"].dispose()
        if end == "error" and n == at:
            subject.on_error(RuntimeError("source failed"))
        subject.on_next(item)
    subject.on_completed()

    emitted = [i for p in out for i in p.ids]
    dropped = [i for f in rec.reports for i in f.dropped]
    assert emitted + dropped == entered
    for p in out:
        assert p.logprobs == tuple(logprob(i) for i in p.ids)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([*WORDS, " end.", "STOP", "<N"]), max_size=14),
    st.lists(st.integers(1, 3), max_size=40),
    st.sampled_from(["bytelevel", "llama"]),
)
def test_stop_reports_ids_still_held_upstream(words: list[str], sizes: list[int], family: str) -> None:
    """detokenize(aligned=True) -> replace -> stop with one on_finish, on the stop: when the stop
    fires, the ids replace (or detokenize) still holds are in ``Finish.dropped`` -- every id is
    emitted or reported dropped."""
    tok = bytelevel() if family == "bytelevel" else llama()
    ids = tok.encode("".join(words), add_special_tokens=False).ids
    items, k = [], 0
    for n in [*sizes, *([1] * len(ids))]:
        if k >= len(ids):
            break
        items.append(tuple(ids[k : k + n]))
        k += n
    rec = FinishRecorder()
    entered: list[int] = []
    out: list[Piece] = []
    rx.from_iterable(items).pipe(
        rxops.do_action(on_next=entered.extend),
        detokenize(tok, aligned=True),
        replace(RULES),
        stop(STOPS, on_finish=rec),
    ).subscribe(out.append)
    assert rec.finish is not None
    assert [i for p in out for i in p.ids] + list(rec.finish.dropped) == entered


def test_ids_held_by_replace_and_by_detokenize_when_stop_fires() -> None:
    """Byte tokens: "é" takes two ids (detokenize holds the first), "<" may start "<NL>" (replace
    holds it); the stop fires on "STOP" in the same item, so the rest of that item never reaches
    the text stages: all of it is reported dropped, in order."""
    tok = bytelevel()
    head = tok.encode("Hi ", add_special_tokens=False).ids
    tail = [*tok.encode("STOP", add_special_tokens=False).ids, *tok.encode("<", add_special_tokens=False).ids]
    rest = tok.encode(" café and more", add_special_tokens=False).ids
    rec = FinishRecorder()
    out: list[Piece] = []
    rx.from_iterable([tuple(head), tuple(tail), tuple(rest)]).pipe(
        detokenize(tok, aligned=True),
        replace({"<NL>": "\n"}),
        stop("STOP", on_finish=rec),
    ).subscribe(out.append)
    assert "".join(p.text for p in out) == "Hi "
    assert rec.finish is not None and rec.finish.reason is FinishReason.STOP
    assert [i for p in out for i in p.ids] + list(rec.finish.dropped) == [*head, *tail]
