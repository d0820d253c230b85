"""OnnxModel on tiny random-weight models built in-process: KV cache, batches, sampling, disposal, errors."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from reactivex import operators as ops
from reactivex.scheduler import NewThreadScheduler

from rxstream import Finish, FinishReason, FinishRecorder
from rxstream.backends import OnnxModel, build_tiny_model


@pytest.fixture(scope="module")
def gqa_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "gqa", seed=0, attention="gqa")


@pytest.fixture(scope="module")
def gqa_model(gqa_dir: Path) -> OnnxModel:
    return OnnxModel.load(gqa_dir, provider="cpu")


def prompt_of(model: OnnxModel, text: str = "What is the capital of France?") -> list[int]:
    return model.encode_chat([{"role": "user", "content": text}])


def collect(model: OnnxModel, prompt: list[int], **kw: Any) -> list[int]:
    result: list[int] = model.generate(prompt, **kw).pipe(ops.to_list()).run()
    return result


def test_tiny_model_builds_in_milliseconds_with_optimum_files(tmp_path: Path) -> None:
    start = time.perf_counter()
    out = build_tiny_model(tmp_path / "m")
    assert time.perf_counter() - start < 2.0
    for name in (
        "model.onnx",
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ):
        assert (out / name).is_file(), name
    names = [i.name for i in onnx.load(str(out / "model.onnx")).graph.input]
    assert names[:3] == ["input_ids", "attention_mask", "position_ids"]
    assert "past_key_values.1.value" in names


def test_same_seed_same_weights(tmp_path: Path) -> None:
    a = OnnxModel.load(build_tiny_model(tmp_path / "a", seed=5))
    b = OnnxModel.load(build_tiny_model(tmp_path / "b", seed=5))
    c = OnnxModel.load(build_tiny_model(tmp_path / "c", seed=6))
    ids = [[5, 9, 77, 120]]
    la, lb, lc = a.forward(ids)[0], b.forward(ids)[0], c.forward(ids)[0]
    np.testing.assert_array_equal(la, lb)
    assert not np.allclose(la, lc)


@pytest.mark.parametrize("which", ["model", "gqa_model"])
def test_kv_cache_decoding_equals_full_recomputation(which: str, request: pytest.FixtureRequest) -> None:
    m: OnnxModel = request.getfixturevalue(which)
    seq = [*prompt_of(m)[:10], 40, 41, 300, 7, 99, 150]
    full, _ = m.forward([seq])
    logits, past = m.forward([seq[:10]])
    steps = [logits[0]]
    for token in seq[10:]:
        logits, past = m.forward([[token]], past=past)
        steps.append(logits[0])
    incremental = np.concatenate(steps, axis=0)
    assert incremental.shape == full[0].shape
    np.testing.assert_allclose(incremental, full[0], atol=1e-5, rtol=0)


def test_fused_attention_graph_matches_plain_graph(model: OnnxModel, gqa_model: OnnxModel) -> None:
    seq = prompt_of(model)
    np.testing.assert_allclose(gqa_model.forward([seq])[0], model.forward([seq])[0], atol=1e-4, rtol=0)
    assert collect(gqa_model, seq, max_new_tokens=12) == collect(model, seq, max_new_tokens=12)


def test_greedy_generation_is_argmax_of_recomputed_logits(model: OnnxModel) -> None:
    prompt = prompt_of(model)
    ids = collect(model, prompt, max_new_tokens=8, ignore_eos=True)
    seq = list(prompt)
    for token in ids:
        logits, _ = model.forward([seq])
        assert token == int(np.argmax(logits[0, -1]))
        seq.append(token)


@pytest.mark.parametrize("which", ["model", "gqa_model"])
def test_left_padded_batch_equals_single_runs(which: str, request: pytest.FixtureRequest) -> None:
    m: OnnxModel = request.getfixturevalue(which)
    base = prompt_of(m)
    prompts = [base, base[:5], base[4:13], [7]]
    out = m.generate_batch(prompts, max_new_tokens=10, ignore_eos=True).pipe(ops.to_list()).run()
    for row, prompt in enumerate(prompts):
        batch_ids = [t for r, t in out if r == row]
        assert batch_ids == collect(m, prompt, max_new_tokens=10, ignore_eos=True), row
    # logits of the padded first step equal the unpadded ones
    width = max(len(p) for p in prompts)
    ids = np.zeros((len(prompts), width), np.int64)
    mask = np.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = p
        mask[i, width - len(p) :] = 1
    pos = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
    padded = model_forward_plain(m, ids, mask, pos)
    for i, p in enumerate(prompts):
        single, _ = m.forward([p])
        np.testing.assert_allclose(padded[i, -1], single[0, -1], atol=1e-4, rtol=0)


def model_forward_plain(m: OnnxModel, ids: np.ndarray, mask: np.ndarray, pos: np.ndarray) -> np.ndarray:
    logits, _ = m.forward(ids, attention_mask=mask, position_ids=pos)
    return logits


def test_sampling_is_reproducible_with_a_seed(model: OnnxModel) -> None:
    prompt = prompt_of(model)
    kw: dict[str, Any] = {"max_new_tokens": 20, "temperature": 1.3, "ignore_eos": True}
    a = collect(model, prompt, seed=11, **kw)
    assert a == collect(model, prompt, seed=11, **kw)
    others = [collect(model, prompt, seed=s, **kw) for s in (12, 13, 14)]
    assert any(o != a for o in others)
    greedy = collect(model, prompt, max_new_tokens=20, ignore_eos=True)
    assert collect(model, prompt, seed=3, top_k=1, **kw) == greedy
    assert collect(model, prompt, seed=3, top_p=1e-6, **kw) == greedy


def test_top_k_restricts_to_best_ids(model: OnnxModel) -> None:
    prompt = prompt_of(model)
    logits, _ = model.forward([prompt])
    best3 = set(np.argsort(-logits[0, -1])[:3].tolist())
    firsts = {
        collect(model, prompt, max_new_tokens=1, temperature=5.0, top_k=3, seed=s)[0] for s in range(25)
    }
    assert firsts <= best3
    assert len(firsts) > 1


def test_repetition_penalty_changes_greedy_output(model: OnnxModel) -> None:
    prompt = prompt_of(model)
    plain = collect(model, prompt, max_new_tokens=20, ignore_eos=True)
    penalised = collect(model, prompt, max_new_tokens=20, ignore_eos=True, repetition_penalty=5.0)
    assert plain != penalised
    assert len(set(penalised)) > len(set(plain))


def test_length_finish_and_budget(model: OnnxModel) -> None:
    rec = FinishRecorder()
    ids = collect(model, prompt_of(model), max_new_tokens=7, ignore_eos=True, on_finish=rec)
    assert len(ids) == 7
    assert rec.finish == Finish(FinishReason.LENGTH)
    rec0 = FinishRecorder()
    assert collect(model, prompt_of(model), max_new_tokens=0, on_finish=rec0) == []
    assert rec0.finish == Finish(FinishReason.LENGTH)


def test_stop_token_id_ends_without_emitting_it(model: OnnxModel) -> None:
    prompt = prompt_of(model)
    greedy = collect(model, prompt, max_new_tokens=10, ignore_eos=True)
    target = greedy[3]
    first = greedy.index(target)
    rec = FinishRecorder()
    ids = collect(model, prompt, max_new_tokens=10, ignore_eos=True, stop_token_ids=[target], on_finish=rec)
    assert ids == greedy[:first]
    assert rec.finish == Finish(FinishReason.STOP, stop=target)


def test_eos_from_generation_config(tiny_dir: Path, tmp_path: Path) -> None:
    m = OnnxModel.load(tiny_dir)
    prompt = prompt_of(m)
    greedy = collect(m, prompt, max_new_tokens=10, ignore_eos=True)
    copy = Path(shutil.copytree(tiny_dir, tmp_path / "eos"))
    (copy / "generation_config.json").write_text(json.dumps({"eos_token_id": [greedy[4]]}))
    m2 = OnnxModel.load(copy)
    assert greedy[4] in m2.eos_token_ids
    rec = FinishRecorder()
    ids = collect(m2, prompt, max_new_tokens=10, on_finish=rec)
    assert ids == greedy[: greedy.index(greedy[4])]
    assert rec.finish == Finish(FinishReason.EOS)


def _count_steps(m: OnnxModel, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = m._session.run_bound

    def counting(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        return original(*args, **kw)

    monkeypatch.setattr(m._session, "run_bound", counting)
    return calls


def test_dispose_in_on_next_stops_before_the_next_forward_pass(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = OnnxModel.load(tiny_dir)
    calls = _count_steps(m, monkeypatch)
    before = set(threading.enumerate())
    rec = FinishRecorder()
    got: list[int] = []
    done = threading.Event()
    holder: dict[str, Any] = {}

    def on_next(token: int) -> None:
        got.append(token)
        if len(got) == 3:
            holder["sub"].dispose()
            done.set()

    holder["sub"] = m.generate(
        prompt_of(m), max_new_tokens=1000, ignore_eos=True, on_finish=rec, scheduler=NewThreadScheduler()
    ).subscribe(on_next, on_completed=done.set)
    assert done.wait(10)
    deadline = time.monotonic() + 5
    while (m.active_generations or set(threading.enumerate()) - before) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(got) == 3
    assert len(calls) == 3  # no forward pass after the deciding token
    assert rec.reports == [Finish(FinishReason.CANCELLED)]
    assert m.active_generations == 0
    assert set(threading.enumerate()) - before == set()


def test_dispose_from_another_thread_stops_within_one_token(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = OnnxModel.load(tiny_dir)
    calls = _count_steps(m, monkeypatch)
    got: list[int] = []
    started = threading.Event()
    completed = threading.Event()

    def on_next(token: int) -> None:
        got.append(token)
        if len(got) >= 5:
            started.set()

    rec = FinishRecorder()
    sub = m.generate(prompt_of(m), max_new_tokens=100_000, ignore_eos=True, on_finish=rec).subscribe(
        on_next, on_completed=completed.set, on_error=lambda e: completed.set()
    )
    assert started.wait(10)
    sub.dispose()
    at_dispose = len(calls)
    deadline = time.monotonic() + 5
    while m.active_generations and time.monotonic() < deadline:
        time.sleep(0.005)
    assert m.active_generations == 0
    assert len(calls) <= at_dispose + 1
    assert not completed.is_set()
    assert rec.finish == Finish(FinishReason.CANCELLED)


def test_failure_goes_to_on_error_with_error_finish(tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = OnnxModel.load(tiny_dir)

    def broken(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(m._session, "run_bound", broken)
    rec = FinishRecorder()
    errors: list[BaseException] = []
    done = threading.Event()
    m.generate([5, 6], on_finish=rec).subscribe(on_error=lambda e: (errors.append(e), done.set()))
    assert done.wait(5)
    assert isinstance(errors[0], RuntimeError)
    assert rec.finish is not None and rec.finish.reason is FinishReason.ERROR
    assert m.active_generations == 0


@pytest.mark.parametrize("reason", [FinishReason.LENGTH, FinishReason.EOS, FinishReason.STOP])
def test_on_finish_raising_at_the_end_still_ends_the_stream(model: OnnxModel, reason: FinishReason) -> None:
    """An ``on_finish`` that raises while a run reports its normal end: the stream ends with that
    error (on_error, once) instead of never terminating."""
    prompt = prompt_of(model)
    first = collect(model, prompt, max_new_tokens=1, ignore_eos=True)[0]
    kwargs: dict[str, Any] = {
        FinishReason.LENGTH: {"max_new_tokens": 3, "ignore_eos": True},
        FinishReason.EOS: {"max_new_tokens": 3},
        FinishReason.STOP: {"max_new_tokens": 3, "stop_token_ids": [first]},
    }[reason]
    if reason is FinishReason.EOS:
        eos_model = OnnxModel.load(model.directory, provider="cpu")
        eos_model._eos = frozenset({first})
        model = eos_model
    seen: list[Finish] = []

    def raising(finish: Finish) -> None:
        seen.append(finish)
        raise RuntimeError("on_finish failed")

    errors: list[BaseException] = []
    completed = threading.Event()
    ended = threading.Event()
    model.generate(prompt, on_finish=raising, **kwargs).subscribe(
        on_error=lambda e: (errors.append(e), ended.set()),
        on_completed=lambda: (completed.set(), ended.set()),
    )
    assert ended.wait(10), "the stream never ended"
    time.sleep(0.05)
    assert [f.reason for f in seen] == [reason]
    assert not completed.is_set()
    assert len(errors) == 1 and str(errors[0]) == "on_finish failed"
    assert model.active_generations == 0


def test_batch_on_finish_raising_still_ends_the_stream(model: OnnxModel) -> None:
    """``on_finish`` raising for every row of a batch at its end: each row is reported once and
    the stream ends with that error (before, the second row's report escaped the loop and the
    stream never ended)."""
    prompt = prompt_of(model)
    reports: list[tuple[int, FinishReason]] = []

    def raising(row: int, finish: Finish) -> None:
        reports.append((row, finish.reason))
        raise RuntimeError(f"on_finish failed for row {row}")

    errors: list[BaseException] = []
    ended = threading.Event()
    model.generate_batch([prompt, prompt], max_new_tokens=2, ignore_eos=True, on_finish=raising).subscribe(
        on_error=lambda e: (errors.append(e), ended.set()), on_completed=ended.set
    )
    assert ended.wait(10), "the stream never ended"
    assert sorted(reports) == [(0, FinishReason.LENGTH), (1, FinishReason.LENGTH)]
    assert [str(e) for e in errors] == ["on_finish failed for row 0"]
    assert model.active_generations == 0


def test_batch_dispose_reports_every_row_even_when_on_finish_raises(model: OnnxModel) -> None:
    """Disposing a batch whose ``on_finish`` raises: no exception out of dispose, every row
    reported CANCELLED once, and the loop stops."""
    prompt = prompt_of(model)
    reports: list[tuple[int, FinishReason]] = []
    started = threading.Event()

    def raising(row: int, finish: Finish) -> None:
        reports.append((row, finish.reason))
        raise RuntimeError("on_finish failed")

    sub = model.generate_batch(
        [prompt, prompt, prompt], max_new_tokens=10_000, ignore_eos=True, on_finish=raising
    ).subscribe(lambda _item: started.set())
    assert started.wait(10)
    sub.dispose()
    assert sorted(reports) == [(row, FinishReason.CANCELLED) for row in range(3)]
    deadline = time.monotonic() + 5
    while model.active_generations and time.monotonic() < deadline:
        time.sleep(0.005)
    assert model.active_generations == 0


def test_concurrent_subscriptions_are_independent(model: OnnxModel) -> None:
    prompt = prompt_of(model)
    expected = collect(model, prompt, max_new_tokens=15, ignore_eos=True)
    source = model.generate(prompt, max_new_tokens=15, ignore_eos=True)
    results: list[list[int]] = [[], [], []]
    done = [threading.Event() for _ in results]
    for r, d in zip(results, done, strict=True):
        source.subscribe(r.append, on_completed=d.set)
    for d in done:
        assert d.wait(10)
    assert results == [expected] * 3


def test_bad_arguments_raise_at_once(model: OnnxModel) -> None:
    with pytest.raises(ValueError, match="temperature"):
        model.generate([1, 2], temperature=-1)
    with pytest.raises(ValueError, match="top_p"):
        model.generate([1, 2], top_p=0)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model.generate([1, 10**6])
    with pytest.raises(ValueError, match="empty"):
        model.generate([])
    with pytest.raises(TypeError, match="max_new_tokens"):
        model.generate([1], max_new_tokens=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="provider"):
        OnnxModel.load(model.directory, provider="tpu")  # type: ignore[arg-type]


def test_missing_directory_and_files_give_clear_errors(tiny_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        OnnxModel.load(tmp_path / "nope")
    no_tok = Path(shutil.copytree(tiny_dir, tmp_path / "no_tok"))
    (no_tok / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"tokenizer\.json"):
        OnnxModel.load(no_tok)
    no_model = Path(shutil.copytree(tiny_dir, tmp_path / "no_model"))
    (no_model / "model.onnx").unlink()
    with pytest.raises(FileNotFoundError, match=r"model\.onnx"):
        OnnxModel.load(no_model)
    corrupt = Path(shutil.copytree(tiny_dir, tmp_path / "corrupt"))
    (corrupt / "model.onnx").write_bytes(b"not an onnx file")
    with pytest.raises(ValueError, match="cannot load"):
        OnnxModel.load(corrupt)
    bad_cfg = Path(shutil.copytree(tiny_dir, tmp_path / "bad_cfg"))
    cfg = json.loads((bad_cfg / "config.json").read_text())
    cfg["num_hidden_layers"] = 5
    (bad_cfg / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="num_hidden_layers=5"):
        OnnxModel.load(bad_cfg)


def test_wrong_input_names_give_a_clear_error(tiny_dir: Path, tmp_path: Path) -> None:
    wrong = Path(shutil.copytree(tiny_dir, tmp_path / "wrong"))
    node = helper.make_node("Cast", ["tokens"], ["logits"], to=TensorProto.FLOAT)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("tokens", TensorProto.INT64, ["b", "s"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["b", "s"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    (wrong / "model.onnx").write_bytes(model.SerializeToString())
    with pytest.raises(ValueError, match=r"missing input 'input_ids'.*unexpected input\(s\) \['tokens'\]"):
        OnnxModel.load(wrong)


def test_chat_template_and_encode(model: OnnxModel) -> None:
    text = model.render_chat([{"role": "user", "content": "Hi"}])
    assert text == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    ids = model.encode_chat([{"role": "user", "content": "Hi"}])
    assert ids[0] == model.tokenizer.token_to_id("<|im_start|>")
    assert model.tokenizer.decode(ids, skip_special_tokens=False) == text
    with pytest.raises(ValueError, match="role"):
        model.encode_chat([{"content": "x"}])


def test_cpu_provider_is_reported(model: OnnxModel, tiny_dir: Path) -> None:
    assert model.provider == "cpu"
    assert OnnxModel.load(tiny_dir, provider="auto").provider in ("cpu", "cuda")


HAS_CUDA = "CUDAExecutionProvider" in ort.get_available_providers() and Path("/dev/nvidiactl").exists()


@pytest.mark.skipif(HAS_CUDA, reason="checks the error raised where CUDA cannot start")
def test_cuda_request_without_gpu_raises(tiny_dir: Path) -> None:
    with pytest.raises(RuntimeError, match="CUDA"):
        OnnxModel.load(tiny_dir, provider="cuda")


@pytest.mark.skipif(
    not HAS_CUDA, reason="needs an NVIDIA GPU with the CUDA libraries onnxruntime-gpu expects"
)
def test_cuda_generation_matches_cpu(tiny_dir: Path, gqa_dir: Path) -> None:
    for d in (tiny_dir, gqa_dir):
        cuda = OnnxModel.load(d, provider="cuda")
        cpu = OnnxModel.load(d, provider="cpu")
        assert cuda.provider == "cuda"
        prompt = prompt_of(cpu)
        assert collect(cuda, prompt, max_new_tokens=12, ignore_eos=True) == collect(
            cpu, prompt, max_new_tokens=12, ignore_eos=True
        )


def test_int4_tiny_model_tracks_fp32(tmp_path: Path) -> None:
    fp32 = OnnxModel.load(build_tiny_model(tmp_path / "f", seed=1))
    int4 = OnnxModel.load(build_tiny_model(tmp_path / "q", seed=1, quantization="int4"))
    seq = [prompt_of(fp32)]
    a, b = fp32.forward(seq)[0].ravel(), int4.forward(seq)[0].ravel()
    assert not np.array_equal(a, b)
    assert np.corrcoef(a, b)[0, 1] > 0.9


def test_stop_disposes_the_generator_at_the_deciding_token(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Marble-style timeline: ids -a-b-c-d-(stop decides)..., the backend runs no forward pass after it."""
    from rxstream.operators import detokenize, stop

    m = OnnxModel.load(tiny_dir)
    prompt = prompt_of(m)
    greedy = collect(m, prompt, max_new_tokens=40, ignore_eos=True)
    tok = m.tokenizer
    texts = [tok.decode(greedy[: i + 1]) for i in range(len(greedy))]
    # the deciding token k: its text is new, at least 2 chars, and absent from everything before it
    k = next(
        i
        for i in range(3, len(greedy))
        if len(texts[i]) - len(texts[i - 1]) >= 2
        and texts[i][len(texts[i - 1]) :] not in texts[i - 1]
        and texts[i].startswith(texts[i - 1])
    )
    stop_string = texts[k][len(texts[k - 1]) :]
    calls = _count_steps(m, monkeypatch)
    timeline: list[tuple[str, object]] = []
    rec = FinishRecorder()
    done = threading.Event()
    m.generate(prompt, max_new_tokens=40, ignore_eos=True, on_finish=rec).pipe(
        ops.do_action(lambda t: timeline.append(("id", t))),
        detokenize(tok, prompt_ids=prompt),
        stop([stop_string], on_finish=rec),
    ).subscribe(
        lambda s: timeline.append(("text", s)),
        on_completed=lambda: (timeline.append(("|", None)), done.set()),
    )
    assert done.wait(10)
    deadline = time.monotonic() + 5
    while m.active_generations and time.monotonic() < deadline:
        time.sleep(0.005)
    ids_seen = [v for kind, v in timeline if kind == "id"]
    assert ids_seen == greedy[: k + 1]  # nothing sampled after the deciding token
    assert len(calls) == k + 1  # and no forward pass either
    assert timeline[-1] == ("|", None)
    assert "".join(str(v) for kind, v in timeline if kind == "text") == texts[k - 1]
    assert rec.reports[0] == Finish(FinishReason.STOP, stop=stop_string)
    assert rec.reports[1:] == [Finish(FinishReason.CANCELLED)]
    assert m.active_generations == 0


def test_shared_kv_buffer_grows_past_its_first_capacity(model: OnnxModel, gqa_model: OnnxModel) -> None:
    assert gqa_model._session.shares_buffer and not model._session.shares_buffer
    prompt = prompt_of(model)
    n = 300  # the shared buffer starts at 256 positions and must grow (copying what it holds)
    shared = collect(gqa_model, prompt, max_new_tokens=n, ignore_eos=True)
    concat = collect(model, prompt, max_new_tokens=n, ignore_eos=True)
    assert len(shared) == n
    assert shared == concat


def test_loads_the_onnxruntime_genai_layout(gqa_dir: Path, tmp_path: Path) -> None:
    """A directory as the onnxruntime-genai builder writes it: genai_config.json, no config.json."""
    og_dir = Path(shutil.copytree(gqa_dir, tmp_path / "og"))
    cfg = json.loads((og_dir / "config.json").read_text())
    (og_dir / "config.json").unlink()
    (og_dir / "generation_config.json").unlink()
    (og_dir / "model_plain.onnx").unlink()
    genai = {
        "model": {
            "type": "llama",
            "vocab_size": cfg["vocab_size"],
            "context_length": cfg["max_position_embeddings"],
            "eos_token_id": [2],
            "bos_token_id": 1,
            "pad_token_id": 0,
            "decoder": {
                "head_size": cfg["head_dim"],
                "hidden_size": cfg["hidden_size"],
                "num_attention_heads": cfg["num_attention_heads"],
                "num_key_value_heads": cfg["num_key_value_heads"],
                "num_hidden_layers": cfg["num_hidden_layers"],
            },
        }
    }
    (og_dir / "genai_config.json").write_text(json.dumps(genai))
    m = OnnxModel.load(og_dir)
    ref = OnnxModel.load(gqa_dir)
    assert m.eos_token_ids == frozenset({2})
    prompt = prompt_of(ref)
    assert collect(m, prompt, max_new_tokens=10, ignore_eos=True) == collect(
        ref, prompt, max_new_tokens=10, ignore_eos=True
    )
    with pytest.raises(ValueError, match="left-padded"):
        m.generate_batch([prompt, prompt[:3]])


@pytest.mark.parametrize("spinning", [True, False, "step"])
def test_spinning_option_sets_the_session_and_keeps_the_ids(
    spinning: bool | Literal["step"], gqa_dir: Path, gqa_model: OnnxModel
) -> None:
    m = OnnxModel.load(gqa_dir, provider="cpu", threads=2, spinning=spinning)
    options = m._session.session.get_session_options()
    entry = options.get_session_config_entry("session.intra_op.allow_spinning")
    assert entry == ("1" if spinning else "0")
    # "step": the workers stop spinning when a pass returns (ONNX Runtime's force_spinning_stop)
    if spinning == "step":
        assert options.get_session_config_entry("session.force_spinning_stop") == "1"
    else:
        with pytest.raises(RuntimeError, match="does not have configuration"):
            options.get_session_config_entry("session.force_spinning_stop")
    prompt = prompt_of(m)
    assert collect(m, prompt, max_new_tokens=12, ignore_eos=True) == collect(
        gqa_model, prompt, max_new_tokens=12, ignore_eos=True
    )


@pytest.mark.parametrize("which", ["model", "gqa_model"])
def test_generation_stops_at_the_context_length(which: str, request: pytest.FixtureRequest) -> None:
    m: OnnxModel = request.getfixturevalue(which)
    prompt = (prompt_of(m) * 40)[: m.max_length - 5]
    rec = FinishRecorder()
    ids = collect(m, prompt, max_new_tokens=50, ignore_eos=True, on_finish=rec)
    assert len(ids) == 5
    assert rec.finish is not None and rec.finish.reason is FinishReason.LENGTH
    # the same ids as a generation whose budget ends there
    assert ids == collect(m, prompt, max_new_tokens=5, ignore_eos=True)


def test_cuda_uses_the_plain_graph_for_float32_fused_attention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ORT's CUDA GroupQueryAttention is float16/bfloat16 only: a float32 GQA model must switch to
    the plain-attention graph on CUDA (checked here by pretending the CPU session is a CUDA one)."""
    from rxstream.backends.onnx import _loader, _session

    assert _session.fused_attention_off_device("cuda", frozenset({"GroupQueryAttention"}), np.float32)
    assert not _session.fused_attention_off_device("cuda", frozenset({"GroupQueryAttention"}), np.float16)
    assert not _session.fused_attention_off_device("cpu", frozenset({"GroupQueryAttention"}), np.float32)
    assert not _session.fused_attention_off_device("cuda", frozenset({"MatMul"}), np.float32)

    directory = build_tiny_model(tmp_path / "gqa", seed=0, attention="gqa")
    monkeypatch.setattr(
        _loader,
        "fused_attention_off_device",
        lambda device, graph_ops, dtype: "GroupQueryAttention" in graph_ops,
    )
    model = OnnxModel.load(directory, provider="cpu")
    assert "GroupQueryAttention" not in model._session.ops
    assert model._session.path.name == "model_plain.onnx"
    # the plain graph gives the same greedy answer as the fused one
    monkeypatch.undo()
    reference = OnnxModel.load(directory, provider="cpu")
    assert "GroupQueryAttention" in reference._session.ops
    prompt = reference.tokenizer.encode("hello there").ids
    a = model.generate(prompt, max_new_tokens=8).pipe(ops.to_list()).run()
    b = reference.generate(prompt, max_new_tokens=8).pipe(ops.to_list()).run()
    assert a == b
