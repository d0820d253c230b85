"""text_pipeline: detokenize -> stop -> replace on real tokenizers, against the batch references;
one Finish per subscription; token ids aligned end to end."""

from __future__ import annotations

from typing import Any

import pytest
import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as rxops
from reactivex.subject import Subject

from rxstream import Finish, FinishReason, FinishRecorder, Piece
from rxstream.operators import text_pipeline
from rxstream.testing.tokenizers import byte_tokenizer, bytelevel, llama
from tests.reference import batch_replace, batch_stop

WORDS = ["Hello", " world", "<NL>", " café", " 🗼", " 中文", "!\n", "User:", " end", "<|", "|>", "##", "#"]
RULES = [("<NL>", "\n"), ("café", "CAFE"), ("#", "!"), ("<||>", "[sep]")]
STOPS = ["\nUser:", "##", " end."]


def tokenizer(family: str) -> Any:
    return bytelevel() if family == "bytelevel" else llama()


def group(ids: list[int], sizes: list[int]) -> list[list[int]]:
    """``ids`` cut into items of the given sizes (then one id per item)."""
    items, k = [], 0
    for n in [*sizes, *([1] * len(ids))]:
        if k >= len(ids):
            break
        items.append(ids[k : k + n])
        k += n
    return items


def logprob(i: int) -> float:
    return -((i % 89) + 1) / 8


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from([*WORDS, " end.", "é", "中"]), max_size=14),
    st.lists(st.integers(1, 4), max_size=40),
    st.sampled_from(["bytelevel", "llama"]),
    st.lists(st.sampled_from(STOPS), max_size=3),
    st.lists(st.sampled_from(RULES), max_size=4),
)
def test_text_matches_batch_reference_however_ids_are_grouped(
    words: list[str], sizes: list[int], family: str, stops: list[str], rules: list[tuple[str, str]]
) -> None:
    """The text is ``replace(stop(decode(ids)))`` for every grouping of the ids into items, and the
    one report says whether (and on which string) it stopped."""
    tok = tokenizer(family)
    ids = tok.encode("".join(words), add_special_tokens=False).ids
    rec = FinishRecorder()
    out: list[str] = []
    rx.from_iterable(group(ids, sizes)).pipe(
        text_pipeline(tok, stop=stops, replace=rules, on_finish=rec)
    ).subscribe(out.append)
    cut, match = batch_stop(tok.decode(ids), stops)
    assert "".join(out) == batch_replace(cut, rules)
    assert all(out)  # no empty strings
    assert len(rec.reports) == 1
    assert rec.reports[0].reason is (FinishReason.STOP if match is not None else FinishReason.EOS)
    assert rec.reports[0].stop == match


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from([*WORDS, " end.", "é"]), max_size=14),
    st.lists(st.integers(1, 3), max_size=40),
    st.sampled_from(["bytelevel", "llama"]),
    st.lists(st.sampled_from(STOPS), max_size=2),
    st.lists(st.sampled_from(RULES), max_size=3),
    st.sampled_from(["complete", "dispose", "error"]),
    st.integers(0, 20),
)
def test_aligned_every_id_is_emitted_or_reported_dropped(
    words: list[str],
    sizes: list[int],
    family: str,
    stops: list[str],
    rules: list[tuple[str, str]],
    end: str,
    at: int,
) -> None:
    """With ``aligned=True``: the pieces carry the ids whose text they complete, with their logprobs;
    the ids emitted followed by the ids in the one report's ``dropped`` are exactly the ids that
    entered, in order, however the stream ends (completion, stop, dispose, upstream error)."""
    tok = tokenizer(family)
    ids = tok.encode("".join(words), add_special_tokens=False).ids
    items = [Piece("", tuple(g), tuple(map(logprob, g))) for g in group(ids, sizes)]
    rec = FinishRecorder()
    entered: list[int] = []
    out: list[Piece] = []
    subject: Subject[Piece] = Subject()
    sub = subject.pipe(
        rxops.do_action(on_next=lambda p: entered.extend(p.ids)),
        text_pipeline(tok, stop=stops, replace=rules, aligned=True, on_finish=rec),
    ).subscribe(out.append, lambda e: None)
    for n, item in enumerate(items):
        if n == at and end == "dispose":
            sub.dispose()
        if n == at and end == "error":
            subject.on_error(RuntimeError("source failed"))
        subject.on_next(item)
    subject.on_completed()

    assert all(isinstance(p, Piece) for p in out)
    emitted = [i for p in out for i in p.ids]
    assert len(rec.reports) == 1
    finish = rec.reports[0]
    assert emitted + list(finish.dropped) == entered
    for p in out:
        assert p.logprobs == tuple(map(logprob, p.ids))
    text = "".join(p.text for p in out)
    cut, match = batch_stop(tok.decode(entered), stops)
    if finish.reason is FinishReason.EOS:
        assert text == batch_replace(cut, rules) and entered == ids and not finish.dropped
    elif finish.reason is FinishReason.STOP:
        assert text == batch_replace(cut, rules) and finish.stop == match
    else:  # cancelled or error: a prefix of the text, never more
        assert batch_replace(cut, rules).startswith(text)


@pytest.mark.parametrize("report", [True, False])
def test_stop_strings_match_the_model_text_and_replace_rewrites_after(report: bool) -> None:
    """A rule that rewrites a stop string does not hide it; a rule whose output spells one does not
    create it (with and without a report, which changes how the stages are built)."""
    tok = byte_tokenizer()
    rec = FinishRecorder()
    on_finish = rec if report else None
    out = (
        rx.from_iterable(list(b"ab##cd"))
        .pipe(
            text_pipeline(tok, stop="##", replace={"#": "!", "b": "##"}, on_finish=on_finish), rxops.to_list()
        )
        .run()
    )
    assert "".join(out) == "a##"
    assert rx.from_iterable(list(b"ab")).pipe(
        text_pipeline(tok, stop="##", replace={"b": "##"}, on_finish=on_finish), rxops.to_list()
    ).run() == ["a", "##"]
    if report:
        assert rec.reports == [Finish(FinishReason.STOP, stop="##"), Finish(FinishReason.EOS)]


@pytest.mark.parametrize(
    ("stops", "rules"), [((), ()), (("##",), ()), ((), {"x": "y"}), (("##",), {"x": "y"})]
)
def test_one_report_per_subscription(stops: tuple[str, ...], rules: Any) -> None:
    """Every combination of stages reports once per subscription, each subscription its own (the
    operator is built once and subscribed twice, the second one disposed early)."""
    tok = byte_tokenizer()
    rec = FinishRecorder()
    op = text_pipeline(tok, stop=stops, replace=rules, on_finish=rec)
    source: Subject[int] = Subject()
    first: list[str] = []
    second: list[str] = []
    source.pipe(op).subscribe(first.append)
    sub = source.pipe(op).subscribe(second.append)
    for i in b"hi x":
        source.on_next(i)
    sub.dispose()
    for i in b"##z":
        source.on_next(i)
    source.on_completed()
    reasons = [f.reason for f in rec.reports]
    assert reasons == [FinishReason.CANCELLED, FinishReason.STOP if stops else FinishReason.EOS]
    shown = "hi y" if rules else "hi x"
    assert "".join(second) == shown
    assert "".join(first) == shown + ("" if stops else "##z")


def test_prompt_ids_and_skip_special_tokens_reach_the_detokenizer() -> None:
    tok = llama()
    prompt = tok.encode("User: hi", add_special_tokens=False).ids
    ids = tok.encode("User: hi there", add_special_tokens=False).ids[len(prompt) :]
    out = rx.from_iterable(ids).pipe(text_pipeline(tok, prompt_ids=prompt), rxops.to_list()).run()
    assert "".join(out) == tok.decode(prompt + ids)[len(tok.decode(prompt)) :]


def test_bad_arguments_raise_at_construction() -> None:
    tok = byte_tokenizer()
    with pytest.raises(ValueError, match="text_pipeline: stop string must be non-empty"):
        text_pipeline(tok, stop=["ok", ""])
    with pytest.raises(TypeError, match="text_pipeline: each rule must be a"):
        text_pipeline(tok, replace=["ab"])
    with pytest.raises(TypeError, match="detokenize: unsupported tokenizer"):
        text_pipeline(object())
    with pytest.raises(ValueError, match="outside the vocabulary"):
        text_pipeline(tok, prompt_ids=[10**6])
