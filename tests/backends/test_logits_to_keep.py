"""The converter's graphs take ``logits_to_keep``: a prompt pass computes only its last position's
logits (the head skipped for the rest), and every generation path asks for just that."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from reactivex import operators as ops

from rxstream.backends import OnnxModel, build_tiny_model
from rxstream.backends.onnx import BatchConfig, _session


@pytest.fixture(scope="module", params=["plain", "gqa"])
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("keep") / request.param, seed=3, attention=request.param)


def test_one_kept_position_is_the_last_row_of_all(tiny: Path) -> None:
    model = OnnxModel.load(tiny, provider="cpu", batching=False)
    graph = model._session
    assert graph.keeps_logits
    prompt = model.encode_chat([{"role": "user", "content": "What is the capital of France?"}])
    ids = np.asarray([prompt], np.int64)
    feeds: dict[str, Any] = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    if graph.has_position_ids:
        feeds["position_ids"] = np.arange(len(prompt), dtype=np.int64)[None, :]
    for name in graph.past_names:
        feeds[name] = np.zeros((1, graph.kv_heads, 0, graph.head_dim), np.float32)
    run = graph.session.run
    every = run(["logits"], {**feeds, "logits_to_keep": np.asarray(0, np.int64)})[0]
    last = run(["logits"], {**feeds, "logits_to_keep": np.asarray(1, np.int64)})[0]
    two = run(["logits"], {**feeds, "logits_to_keep": np.asarray(2, np.int64)})[0]
    assert every.shape == (1, len(prompt), model.vocab_size)
    assert last.shape == (1, 1, model.vocab_size) and two.shape == (1, 2, model.vocab_size)
    # the same products on fewer rows: equal up to the kernels' rounding for another row count
    np.testing.assert_allclose(last[0, -1], every[0, -1], atol=1e-5, rtol=0)
    np.testing.assert_allclose(two[0], every[0, -2:], atol=1e-5, rtol=0)
    # forward() keeps every position
    assert model.forward([prompt])[0].shape == (1, len(prompt), model.vocab_size)


@pytest.mark.parametrize("batching", [False, True])
def test_generation_reads_prompts_with_one_kept_position(
    tiny: Path, batching: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every pass a generation runs (the prompt and each step), alone or in the batch, asks for
    one position's logits; the greedy ids are the argmax of forward()'s full logits."""
    # (prompt lookup off: a draft pass keeps one position per id it reads, tests/backends/test_lookup.py)
    model = OnnxModel.load(tiny, provider="cpu", batching=BatchConfig(draft_tokens=0) if batching else False)
    events: list[Any] = []
    run_bound = _session.DecoderSession.run_bound
    bind = ort.IOBinding.bind_cpu_input

    def counting_run(self: Any, binding: Any) -> None:
        events.append("run")
        run_bound(self, binding)

    def recording_bind(self: Any, name: str, array: Any) -> None:
        if name == "logits_to_keep":
            events.append(int(array))
        bind(self, name, array)

    monkeypatch.setattr(_session.DecoderSession, "run_bound", counting_run)
    monkeypatch.setattr(ort.IOBinding, "bind_cpu_input", recording_bind)
    prompt = model.encode_chat([{"role": "user", "content": "Tell me a story."}])
    ids: list[int] = model.generate(prompt, max_new_tokens=6, ignore_eos=True).pipe(ops.to_list()).run()
    runs = [i for i, e in enumerate(events) if e == "run"]
    assert len(runs) == 6  # the prompt and five steps
    for before, at in zip([-1, *runs], runs, strict=False):
        assert events[before + 1 : at] == [1], events  # one position asked for, every pass
    seq = list(prompt)
    for token in ids:
        assert token == int(np.argmax(model.forward([seq])[0][0, -1]))
        seq.append(token)
