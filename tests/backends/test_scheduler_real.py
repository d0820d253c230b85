"""Continuous batching on the real default model (SmolLM2-135M-Instruct, fp32 and int4): rows decoded
together give the greedy ids they give alone, with logits within float rounding."""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np
import pytest
from reactivex import operators as ops

from rxstream import FinishReason, FinishRecorder
from rxstream.backends import OnnxModel
from rxstream.backends.onnx import _batch_row, _generation
from tests.backends.test_model_real import _pull
from tests.backends.test_scheduler import LogitLog, common_prefix, start, wait_idle

pytestmark = [pytest.mark.slow, pytest.mark.network]

QUESTIONS = [
    "What is the capital of France?",
    "Explain how a rainbow forms.",
    "Write a haiku about the sea.",
    "List three prime numbers.",
    "Why is the sky blue?",
    "How do bees make honey?",
]

LOGIT_TOLERANCE = {"fp32": 1e-4, "int4": 5e-4}
"""Largest |batched - alone| logit difference allowed (measured on these prompts, whose rows also
share the template's prefix: 0 for fp32, 6.8e-5 for int4, whose several-row passes run on its float
twin, the same weights as float products)."""


@pytest.mark.parametrize("quantization", ["fp32", "int4"])
def test_real_model_batched_greedy_equals_alone(quantization: str, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = _pull(quantization)
    batched_log = LogitLog(monkeypatch, _batch_row)
    alone_log = LogitLog(monkeypatch, _generation)
    model = OnnxModel.load(directory, provider="cpu")
    alone = OnnxModel.load(directory, provider="cpu", batching=False)
    assert model.batch_stats() is not None and model.batch_stats()["layout"] == "slots"  # type: ignore[index]
    prompts = [model.encode_chat([{"role": "user", "content": q}]) for q in QUESTIONS]
    gate = threading.Event()
    runs = [start(model, p, gate.is_set, max_new_tokens=24) for p in prompts]
    gate.set()
    assert all(r.ended.wait(120) for r in runs)
    worst = 0.0
    for prompt, run in zip(prompts, runs, strict=True):
        expected: list[Any] = alone.generate(prompt, max_new_tokens=24).pipe(ops.to_list()).run()
        assert run.ids == expected, model.tokenizer.decode(run.ids)
        got, want = batched_log.logits[tuple(prompt)], alone_log.logits[tuple(prompt)]
        worst = max(worst, max(float(np.abs(a - b).max()) for a, b in zip(got, want, strict=True)))
    print(f"{quantization}: largest |batched - alone| logit difference {worst:.2e}")
    assert worst <= LOGIT_TOLERANCE[quantization]
    stats = model.batch_stats()
    assert stats is not None and stats["peak_rows"] == len(prompts)
    assert stats["float_graph"] == (quantization == "int4")  # int4's several-row steps: float weights
    # the chat template's system prompt is read once; the other rows copy it
    shared = sum(common_prefix(p, prompts[0]) for p in prompts[1:])
    assert shared > 20 * (len(prompts) - 1)
    assert stats["shared_prefix_tokens"] == shared
    assert stats["prefill_tokens"] == sum(len(p) for p in prompts) - shared
    wait_idle(model)


@pytest.mark.parametrize("quantization", ["fp32"])
def test_real_model_next_turn_reads_only_the_new_message(quantization: str) -> None:
    """A two-turn chat on SmolLM2: the second turn's prompt repeats the first prompt and the
    answer (re-encoded from its text by the chat template); the batch copies what the first row
    held and reads only the rest, and the greedy answer is the one a fresh model gives."""
    directory = _pull(quantization)
    model = OnnxModel.load(directory, provider="cpu")
    alone = OnnxModel.load(directory, provider="cpu", batching=False)
    history = [{"role": "user", "content": "What is the capital of France?"}]
    first_prompt = model.encode_chat(history)
    answer_ids: list[Any] = model.generate(first_prompt, max_new_tokens=40).pipe(ops.to_list()).run()
    wait_idle(model)
    before = model.batch_stats()
    assert before is not None and before["prefix_cache_entries"] == 1
    answer = model.tokenizer.decode(answer_ids, skip_special_tokens=True)
    history += [{"role": "assistant", "content": answer}, {"role": "user", "content": "And of Italy?"}]
    second_prompt = model.encode_chat(history)
    second: list[Any] = model.generate(second_prompt, max_new_tokens=24).pipe(ops.to_list()).run()
    assert second == alone.generate(second_prompt, max_new_tokens=24).pipe(ops.to_list()).run()
    after = model.batch_stats()
    assert after is not None
    shared = after["shared_prefix_tokens"] - before["shared_prefix_tokens"]
    read = after["prefill_tokens"] - before["prefill_tokens"]
    print(f"second turn: {len(second_prompt)} prompt tokens, {shared} copied, {read} read")
    assert shared >= len(first_prompt) and shared + read == len(second_prompt)
    wait_idle(model)


STORY = (
    "The lighthouse keeper, Elias Morrow, had tended the light on Gull Rock for thirty years. Every "
    "night he climbed the one hundred and twelve steps, trimmed the wick, polished the great lens and "
    "watched the beam sweep across the black water. One stormy morning in October he found a green "
    "glass bottle wedged between the rocks below the tower."
)
GROUNDED = [
    "Repeat the following text exactly, word for word:\n\n" + STORY,
    "Summarise this story in two sentences, quoting the names:\n\n" + STORY,
    "Write a short story about a lighthouse keeper.",
]


@pytest.mark.parametrize("quantization", ["fp32", "int4"])
def test_real_model_prompt_lookup_emits_plain_decodings_ids_in_fewer_steps(quantization: str) -> None:
    """A lone stream reads drafts from its own context (prompt lookup): on SmolLM2 the greedy ids
    are those of plain decoding, token for token, and a text that quotes its prompt takes far
    fewer forward passes than tokens."""
    directory = _pull(quantization)
    model = OnnxModel.load(directory, provider="cpu")
    alone = OnnxModel.load(directory, provider="cpu", batching=False)
    for i, text in enumerate(GROUNDED):
        prompt = model.encode_chat([{"role": "user", "content": text}])
        before = model.batch_stats()
        assert before is not None
        rec = FinishRecorder()
        got: list[Any] = model.generate(prompt, max_new_tokens=96, on_finish=rec).pipe(ops.to_list()).run()
        expected: list[Any] = alone.generate(prompt, max_new_tokens=96).pipe(ops.to_list()).run()
        assert got == expected, model.tokenizer.decode(got)
        wait_idle(model)
        after = model.batch_stats()
        assert after is not None
        steps = after["decode_steps"] - before["decode_steps"]
        kept = after["kept_draft_tokens"] - before["kept_draft_tokens"]
        print(f"{quantization} #{i}: {len(got)} ids in {steps} decode passes, {kept} draft ids kept")
        # the first id comes from the prompt pass; a pass that samples EOS emits nothing more
        eos = rec.finish is not None and rec.finish.reason is FinishReason.EOS
        assert steps + kept == len(got) - 1 + eos
        if i == 0:  # quoting the prompt: most ids come from drafts
            assert kept > len(got) // 2


def test_real_model_int4_a8_does_not_draft_by_default() -> None:
    model = OnnxModel.load(_pull("int4-a8"), provider="cpu")
    prompt = model.encode_chat([{"role": "user", "content": GROUNDED[0]}])
    model.generate(prompt, max_new_tokens=16).pipe(ops.to_list()).run()
    stats = model.batch_stats()
    assert stats is not None and stats["draft_tokens"] == 0 and stats["drafted_tokens"] == 0
    wait_idle(model)


def _resident_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_real_model_int4_float_graph_costs_about_the_float_weights_in_memory() -> None:
    # folding the weights frees intermediates several times their size; what stays is about the
    # float weights (540 MB) and their packed copies, not the folding's peak (measured: +0.6 GB)
    model = OnnxModel.load(_pull("int4"), provider="cpu")
    before = _resident_bytes()
    model.prepare_batches()
    grown = _resident_bytes() - before
    print(f"int4 float graph: +{grown / 1e9:.2f} GB resident")
    assert model.batch_stats()["float_graph"] is True  # type: ignore[index]
    assert grown < 1.2e9
