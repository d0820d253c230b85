"""Log-probabilities from the ONNX backend: :func:`token_logprobs` against a float64 reference,
``generate(..., logprobs=k)`` against recomputed logits, and its pieces through the operators."""

from __future__ import annotations

import itertools
import math
import threading
from typing import Any

import numpy as np
import pytest
import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from reactivex import operators as ops

from rxstream import FinishReason, FinishRecorder, GenerativeModel, Piece, supports_logprobs
from rxstream.backends import OnnxModel
from rxstream.backends.onnx import token_logprobs
from rxstream.operators import detokenize, stop


def reference(logits: np.ndarray) -> np.ndarray:
    """log_softmax in float64, the textbook way (exact enough for moderate logits)."""
    x = logits.astype(np.float64)
    m = x.max()
    return x - m - math.log(float(np.exp(x - m).sum()))


finite32 = st.floats(-1e4, 1e4, width=32, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(hnp.arrays(np.float32, st.integers(1, 300), elements=finite32), st.data())
def test_token_logprobs_is_log_softmax_and_the_k_best(logits: np.ndarray, data: st.DataObject) -> None:
    token = data.draw(st.integers(0, logits.shape[0] - 1))
    k = data.draw(st.integers(0, 25))
    ref = reference(logits)
    logprob, top = token_logprobs(logits, token, k)
    assert isinstance(logprob, float)
    assert logprob == pytest.approx(ref[token], abs=1e-6 * max(1.0, abs(ref[token])))
    assert len(top) == min(k, logits.shape[0])
    order = sorted(range(logits.shape[0]), key=lambda i: (-logits[i], i))
    # the k best values (ids may differ only among equal logits at the k-th place)
    assert [logits[i] for i, _ in top] == [logits[i] for i in order[: len(top)]]
    assert [v for _, v in top] == sorted((v for _, v in top), reverse=True)
    for i, v in top:
        assert type(i) is int and v == pytest.approx(ref[i], abs=1e-6 * max(1.0, abs(ref[i])))
    assert len({i for i, _ in top}) == len(top)


@settings(max_examples=100, deadline=None)
@given(st.integers(1000, 6000), st.integers(1, 20), st.integers(1, 50), st.integers(0, 2**32 - 1))
def test_the_k_best_of_a_large_row_with_ties(n: int, k: int, distinct: int, seed: int) -> None:
    """Rows large enough for the blocked pre-filter, with few distinct values (many ties, also
    across blocks): the values of the k best are exactly those of a full sort."""
    rng = np.random.default_rng(seed)
    logits = rng.integers(0, distinct, n).astype(np.float32)
    _, top = token_logprobs(logits, 0, k)
    assert [logits[i] for i, _ in top] == sorted(logits, reverse=True)[:k]
    assert len({i for i, _ in top}) == k
    ids = [i for i, _ in top]
    for a, b in itertools.pairwise(ids):  # ties among them: lower id first
        assert logits[a] > logits[b] or a < b


def test_token_logprobs_is_stable_for_huge_logits_and_keeps_minus_infinity() -> None:
    logits = np.array([1e30, 1e30 - 1e24, -np.inf, 0.0], np.float32)
    logprob, top = token_logprobs(logits, 0, 4)
    assert math.isfinite(logprob) and logprob <= 0.0
    assert top[-1] == (2, -math.inf)
    assert token_logprobs(logits, 2, 0) == (-math.inf, ())
    # probabilities sum to one
    lps = [token_logprobs(logits, i, 0)[0] for i in range(4)]
    assert sum(math.exp(v) for v in lps) == pytest.approx(1.0)


def test_token_logprobs_does_not_modify_the_row() -> None:
    row = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    before = row.copy()
    token_logprobs(row, 3, 20)
    np.testing.assert_array_equal(row, before)


def prompt_of(model: OnnxModel) -> list[int]:
    return model.encode_chat([{"role": "user", "content": "What is the capital of France?"}])


@pytest.mark.parametrize(
    "sampling", [{}, {"temperature": 1.3, "top_k": 5, "seed": 7, "repetition_penalty": 1.3}]
)
def test_generate_with_logprobs_reports_the_raw_distribution(
    model: OnnxModel, sampling: dict[str, Any]
) -> None:
    """Same ids as without logprobs; each logprob and alternative is log_softmax of the logits a
    full recomputation gives at that position (the raw distribution, whatever the sampling)."""
    prompt = prompt_of(model)
    kw: dict[str, Any] = {"max_new_tokens": 8, "ignore_eos": True, **sampling}
    plain: list[int] = model.generate(prompt, **kw).pipe(ops.to_list()).run()
    pieces: list[Piece] = model.generate(prompt, logprobs=3, **kw).pipe(ops.to_list()).run()
    assert all(isinstance(p, Piece) and p.text == "" and len(p.ids) == 1 for p in pieces)
    assert [p.ids[0] for p in pieces] == plain
    seq = list(prompt)
    for p in pieces:
        logits, _ = model.forward([seq])
        ref = reference(logits[0, -1])
        token = p.ids[0]
        assert p.logprobs is not None and p.top_logprobs is not None
        assert p.logprobs[0] == pytest.approx(ref[token], abs=1e-4)
        best = np.argsort(-ref, kind="stable")[:3]
        assert [i for i, _ in p.top_logprobs[0]] == [int(i) for i in best]
        assert [v for _, v in p.top_logprobs[0]] == pytest.approx([ref[i] for i in best], abs=1e-4)
        if not sampling:  # greedy: the sampled id is the best one
            assert p.top_logprobs[0][0] == (token, p.logprobs[0])
        seq.append(token)


def test_logprobs_zero_gives_the_sampled_logprob_only(model: OnnxModel) -> None:
    pieces: list[Piece] = (
        model.generate(prompt_of(model), max_new_tokens=4, logprobs=0).pipe(ops.to_list()).run()
    )
    assert pieces and all(p.top_logprobs == ((),) and p.logprobs is not None for p in pieces)


def test_pieces_go_through_detokenize_and_stop_with_their_numbers(model: OnnxModel) -> None:
    prompt = prompt_of(model)
    ids: list[int] = model.generate(prompt, max_new_tokens=30, ignore_eos=True).pipe(ops.to_list()).run()
    text = model.tokenizer.decode(ids)
    cut = text[len(text) // 2 : len(text) // 2 + 3]
    assert cut and "\ufffd" not in cut
    rec = FinishRecorder()
    source = model.generate(prompt, max_new_tokens=30, ignore_eos=True, logprobs=2, on_finish=rec)
    out: list[Piece] = source.pipe(
        detokenize(model.tokenizer, prompt_ids=prompt, aligned=True), stop(cut, on_finish=rec), ops.to_list()
    ).run()
    assert "".join(p.text for p in out) == text[: text.index(cut)]
    every: list[Piece] = (
        model.generate(prompt, max_new_tokens=30, ignore_eos=True, logprobs=2).pipe(ops.to_list()).run()
    )
    kept = [i for p in out for i in p.ids]
    assert kept == ids[: len(kept)]
    assert [x for p in out for x in (p.logprobs or ())] == [p.logprobs[0] for p in every[: len(kept)]]
    assert [x for p in out for x in (p.top_logprobs or ())] == [p.top_logprobs[0] for p in every[: len(kept)]]
    assert rec.finish is not None and rec.finish.reason is FinishReason.STOP


def test_batch_with_logprobs_matches_single_runs(model: OnnxModel) -> None:
    base = prompt_of(model)
    prompts = [base, base[:5]]
    out = (
        model.generate_batch(prompts, max_new_tokens=5, ignore_eos=True, logprobs=2).pipe(ops.to_list()).run()
    )
    for row, prompt in enumerate(prompts):
        got = [p for r, p in out if r == row]
        single = (
            model.generate(prompt, max_new_tokens=5, ignore_eos=True, logprobs=2).pipe(ops.to_list()).run()
        )
        assert [p.ids for p in got] == [p.ids for p in single]
        for a, b in zip(got, single, strict=True):
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
            assert [i for i, _ in a.top_logprobs[0]] == [i for i, _ in b.top_logprobs[0]]


def test_disposal_still_stops_a_run_with_logprobs(model: OnnxModel) -> None:
    got: list[Piece] = []
    done = threading.Event()
    holder: dict[str, Any] = {}

    def on_next(p: Piece) -> None:
        got.append(p)
        if len(got) == 3:
            holder["sub"].dispose()
            done.set()

    holder["sub"] = model.generate(
        prompt_of(model), max_new_tokens=200, ignore_eos=True, logprobs=1
    ).subscribe(on_next)
    assert done.wait(10)
    rx.timer(0.3).run()
    assert len(got) == 3 and model.active_generations == 0


@pytest.mark.parametrize("bad", [-1, 21, True, 1.0, "3"])
def test_bad_logprobs_raise_at_once(model: OnnxModel, bad: Any) -> None:
    with pytest.raises((TypeError, ValueError), match="logprobs"):
        model.generate([1, 2], logprobs=bad)
    with pytest.raises((TypeError, ValueError), match="logprobs"):
        model.generate_batch([[1, 2]], logprobs=bad)


def test_supports_logprobs(model: OnnxModel) -> None:
    assert isinstance(model, GenerativeModel) and supports_logprobs(model)

    class IdsOnly:
        def generate(self, prompt_ids: list[int], params: Any = None, *, on_finish: Any = None) -> Any:
            return rx.empty()

    class Forwards:
        def generate(self, prompt_ids: list[int], **kw: Any) -> Any:
            return rx.empty()

    assert (
        not supports_logprobs(IdsOnly()) and supports_logprobs(Forwards()) and not supports_logprobs(object())
    )
