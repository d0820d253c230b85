"""Prompt lookup (backends/onnx/_lookup.py) and the scheduler's draft passes (_scheduler.py).

Drafts must never change what a generation emits: every test compares a model that drafts with
one that does not and with the plain loop (``batching=False``), id for id, finish for finish,
logprob for logprob. The tiny random-weight model falls into loops under greedy decoding, so
its drafts are both kept and missed.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import reactivex
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops

from rxstream import Finish, FinishReason, FinishRecorder
from rxstream.backends import OnnxModel, build_tiny_model
from rxstream.backends.onnx import BatchConfig
from rxstream.backends.onnx._lookup import MAX_BACKOFF, MAX_MATCH, MIN_MATCH, PromptLookup

# ------------------------------------------------------------------ the index


def test_a_draft_continues_the_latest_earlier_occurrence() -> None:
    lookup = PromptLookup([1, 2, 3, 4, 5, 6, 9, 1, 2, 3, 7, 8, 1, 2, 3], max_draft=4)
    assert lookup.draft(10) == [7, 8, 1, 2]  # the later occurrence of 1 2 3, not the first
    assert lookup.draft(2) == [7, 8]  # the limit bounds it
    assert lookup.draft(0) == []


def test_the_longest_match_wins_and_short_ones_are_not_looked_up() -> None:
    # 2 3 4 is followed by 9 later, but 1 2 3 4 (longer) by 5
    lookup = PromptLookup([1, 2, 3, 4, 5, 0, 2, 3, 4, 9, 0, 1, 2, 3, 4], max_draft=3)
    assert lookup.draft(3) == [5, 0, 2]
    assert PromptLookup([1, 2, 5, 1, 2], max_draft=3).draft(3) == []  # 2 ids: below MIN_MATCH
    assert MIN_MATCH == 3


def test_the_context_never_matches_itself_and_appends_are_indexed() -> None:
    lookup = PromptLookup([7, 8, 9], max_draft=4)
    assert lookup.draft(4) == []
    lookup.extend([1, 7, 8, 9])
    assert lookup.draft(4) == [1, 7, 8, 9]
    lookup.append(1)  # 8 9 1 occurred once: followed by 7 8 9 1
    assert lookup.draft(4) == [7, 8, 9, 1]


def test_a_miss_backs_off_doubling_and_a_kept_draft_resets_it() -> None:
    lookup = PromptLookup([5, 6, 7, 1, 5, 6, 7], max_draft=2)
    waits = []
    for _ in range(8):
        lookup.kept(0)
        wait = 0
        while not lookup.draft(2):
            wait += 1
        waits.append(wait)
    assert waits == [1, 2, 4, 8, 16, 32, 32, 32]
    assert MAX_BACKOFF == 32
    lookup.kept(2)
    assert lookup.draft(2) == [1, 5]
    assert lookup.accepted == 2 and lookup.drafted == 9 * 2


def test_expected_is_a_moving_average_of_kept_ids() -> None:
    lookup = PromptLookup([1, 2, 3], max_draft=4)
    assert lookup.expected == 4.0
    for _ in range(20):
        lookup.kept(1)
    assert lookup.expected == pytest.approx(1.0, abs=0.01)


def test_max_draft_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_draft must be at least 1"):
        PromptLookup([1, 2, 3], max_draft=0)


@settings(max_examples=300, deadline=None)
@given(
    ids=st.lists(st.integers(0, 4), min_size=0, max_size=80),
    limit=st.integers(1, 8),
    split=st.integers(0, 80),
)
def test_a_draft_is_always_what_followed_an_earlier_occurrence_of_the_end(
    ids: list[int], limit: int, split: int
) -> None:
    # the same context, given at once or as a prompt and appended ids, drafts the same
    lookup = PromptLookup(ids, max_draft=8)
    other = PromptLookup(ids[:split], max_draft=8)
    other.extend(ids[split:])
    draft = lookup.draft(limit)
    assert draft == other.draft(limit)
    assert len(draft) <= limit
    if not draft:
        return
    starts = [
        s
        for n in range(MIN_MATCH, MAX_MATCH + 1)
        for s in range(n, len(ids))
        if len(ids) > n and ids[s - n : s] == ids[-n:]
    ]
    assert any(ids[s : s + len(draft)] == draft for s in starts)


# ------------------------------------------------------------------ the scheduler


@pytest.fixture(scope="module")
def gqa_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "gqa", seed=0, attention="gqa")


@pytest.fixture(scope="module")
def models(gqa_dir: Path) -> dict[str, OnnxModel]:
    return {
        "alone": OnnxModel.load(gqa_dir, provider="cpu", batching=False),
        "off": OnnxModel.load(gqa_dir, provider="cpu", batching=BatchConfig(draft_tokens=0)),
        "on": OnnxModel.load(gqa_dir, provider="cpu", batching=BatchConfig(draft_tokens=4)),
        "wide": OnnxModel.load(gqa_dir, provider="cpu", batching=BatchConfig(draft_tokens=16)),
    }


TEXTS = ["What is the capital of France?", "a b c a b c a b c a b c", "hello hello hello", "1 2 3 4 5"]


def run(model: OnnxModel, prompt: list[int], **kw: Any) -> tuple[list[Any], Any]:
    rec = FinishRecorder()
    items: list[Any] = model.generate(prompt, on_finish=rec, **kw).pipe(ops.to_list()).run()
    return items, rec.finish


def test_drafting_emits_exactly_what_plain_decoding_emits(models: dict[str, OnnxModel]) -> None:
    on = models["on"]
    before = on.batch_stats()
    for text in TEXTS:
        prompt = on.encode_chat([{"role": "user", "content": text}])
        for kw in ({"max_new_tokens": 60, "ignore_eos": True}, {"max_new_tokens": 37}):
            expected = run(models["alone"], prompt, **kw)
            for name in ("off", "on", "wide"):
                assert run(models[name], prompt, **kw) == expected, (text, name, kw)
    stats = on.batch_stats()
    kept = stats["kept_draft_tokens"] - before["kept_draft_tokens"]
    drafted = stats["drafted_tokens"] - before["drafted_tokens"]
    assert 0 < kept < drafted  # drafts were kept and missed
    assert stats["draft_tokens"] == 4 and models["off"].batch_stats()["drafted_tokens"] == 0


def test_seeded_sampling_logprobs_and_penalties_are_unchanged_by_drafts(models: dict[str, OnnxModel]) -> None:
    # each id is sampled from the logits of exactly the ids before it, in the same order: the
    # sampler's random draws, its repetition penalty and the logprobs are plain decoding's
    prompt = models["on"].encode_chat([{"role": "user", "content": TEXTS[1]}])
    cases: list[dict[str, Any]] = [
        {"temperature": 0.8, "seed": 7},
        {"temperature": 0.0, "repetition_penalty": 1.3},
        {"temperature": 0.0, "logprobs": 3},
    ]
    for kw in cases:
        expected, finish = run(models["alone"], prompt, max_new_tokens=40, ignore_eos=True, **kw)
        got, got_finish = run(models["on"], prompt, max_new_tokens=40, ignore_eos=True, **kw)
        assert got_finish == finish
        if "logprobs" not in kw:
            assert got == expected, kw
            continue
        assert [p.ids for p in got] == [p.ids for p in expected]
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-4)
            assert [t for t, _ in a.top_logprobs[0]] == [t for t, _ in b.top_logprobs[0]]


def test_nothing_past_a_stop_id_or_the_budget_inside_a_draft(models: dict[str, OnnxModel]) -> None:
    prompt = models["on"].encode_chat([{"role": "user", "content": TEXTS[1]}])
    plain, _ = run(models["alone"], prompt, max_new_tokens=60, ignore_eos=True)
    # every budget and every first occurrence of an id as a stop id: ends exactly where plain does
    for budget in range(1, 30):
        got, finish = run(models["on"], prompt, max_new_tokens=budget, ignore_eos=True)
        assert got == plain[:budget] and finish.reason is FinishReason.LENGTH
    for token in dict.fromkeys(plain[1:]):
        cut = plain.index(token)
        got, finish = run(models["wide"], prompt, max_new_tokens=60, ignore_eos=True, stop_token_ids=[token])
        assert got == plain[:cut], token
        assert finish.reason is FinishReason.STOP and finish.stop == token


def test_a_disposal_inside_a_draft_emits_nothing_more(models: dict[str, OnnxModel]) -> None:
    on = models["wide"]
    prompt = on.encode_chat([{"role": "user", "content": TEXTS[2]}])
    plain, _ = run(models["alone"], prompt, max_new_tokens=60, ignore_eos=True)
    for cut in (1, 3, 5, 9):
        assert cancelled_after(on, prompt, cut) == plain[:cut]


def cancelled_after(model: OnnxModel, prompt: list[int], cut: int) -> list[int]:
    """The ids a subscription sees when it disposes itself in the ``on_next`` of its ``cut``-th."""
    seen: list[int] = []
    holder: list[Any] = []
    done = threading.Event()
    rec = FinishRecorder()

    def on_next(token: int) -> None:
        seen.append(token)
        if len(seen) == cut:
            holder[0].dispose()

    def on_finish(finish: Finish) -> None:
        rec(finish)
        done.set()

    holder.append(
        model.generate(prompt, max_new_tokens=60, ignore_eos=True, on_finish=on_finish).subscribe(on_next)
    )
    assert done.wait(10)
    assert rec.finish is not None and rec.finish.reason is FinishReason.CANCELLED
    return seen


def test_rows_in_company_and_grammar_rows_do_not_draft(models: dict[str, OnnxModel]) -> None:
    on = models["on"]
    prompts = [on.encode_chat([{"role": "user", "content": t}]) for t in TEXTS]
    before = on.batch_stats()["drafted_tokens"]
    subscriptions = [on.generate(p, max_new_tokens=20, ignore_eos=True).pipe(ops.to_list()) for p in prompts]
    results = reactivex.merge(
        *[s.pipe(ops.map(lambda ids, i=i: (i, ids))) for i, s in enumerate(subscriptions)]
    )
    got = dict(results.pipe(ops.to_list()).run())
    for i, p in enumerate(prompts):
        assert got[i] == run(models["alone"], p, max_new_tokens=20, ignore_eos=True)[0]
    # four rows together: at most the last one left alone drafts
    assert on.batch_stats()["drafted_tokens"] - before <= 20


def test_an_int8_activation_graph_does_not_draft_by_default(tmp_path: Path) -> None:
    from rxstream.backends.convert import build_tiny_model as build

    a8 = build(tmp_path / "a8", seed=0, attention="gqa", quantization="int4-a8")
    exact = build(tmp_path / "int4", seed=0, attention="gqa", quantization="int4")
    assert OnnxModel.load(a8, provider="cpu")._session.int8_activations
    assert not OnnxModel.load(exact, provider="cpu")._session.int8_activations
    for directory, default in ((a8, 0), (exact, 4)):
        model = OnnxModel.load(directory, provider="cpu")
        prompt = model.encode_chat([{"role": "user", "content": TEXTS[1]}])
        run(model, prompt, max_new_tokens=30, ignore_eos=True)
        assert model.batch_stats()["draft_tokens"] == default
    asked = OnnxModel.load(a8, provider="cpu", batching=BatchConfig(draft_tokens=3))  # asked for: it drafts
    run(asked, asked.encode_chat([{"role": "user", "content": TEXTS[1]}]), max_new_tokens=30, ignore_eos=True)
    assert asked.batch_stats()["draft_tokens"] == 3


def test_batch_config_bounds_draft_tokens() -> None:
    with pytest.raises(ValueError, match="draft_tokens must be >= 0"):
        BatchConfig(draft_tokens=-1)
    with pytest.raises(ValueError, match="draft_tokens must be <= 16"):
        BatchConfig(draft_tokens=17)
    with pytest.raises(TypeError, match="draft_tokens must be an int"):
        BatchConfig(draft_tokens=2.0)  # type: ignore[arg-type]
