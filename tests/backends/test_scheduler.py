"""Continuous batching (backends/onnx/_scheduler.py) on the tiny models, both KV layouts.

``slots``: the GroupQueryAttention graph (right padding, one buffer per KV tensor, rows in slots);
``padded``: the plain-attention graph (left padding, concat cache). Every batched row is compared
with the same generation run alone (a model loaded with ``batching=False``): the same ids, logits
within float rounding, the same seeded samples.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reactivex import operators as ops

from rxstream import Finish, FinishReason, FinishRecorder
from rxstream.backends import OnnxModel, build_tiny_model
from rxstream.backends.onnx import BatchConfig, Sampler, _batch_row, _generation, _kvcache, _scheduler

LOGIT_TOLERANCE = 1e-4
"""Largest |batched - alone| logit difference allowed on the tiny models (measured: 2.5e-6 in the
slot layout, where rows sharing a prefix read their prompts in other chunks than alone, 4.8e-6 in
the padded layout, whose attention runs over the padded width)."""


@pytest.fixture(scope="module")
def gqa_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "gqa", seed=0, attention="gqa")


@pytest.fixture(params=["slots", "padded"])
def layout_dir(request: pytest.FixtureRequest, tiny_dir: Path) -> Path:
    """A tiny model directory whose main graph batches with the given layout."""
    if request.param == "padded":
        return tiny_dir
    directory: Path = request.getfixturevalue("gqa_dir")
    return directory


def load(directory: Path, **batching: Any) -> OnnxModel:
    return OnnxModel.load(directory, provider="cpu", batching=BatchConfig(**batching) if batching else True)


@pytest.fixture
def alone(layout_dir: Path) -> OnnxModel:
    return OnnxModel.load(layout_dir, provider="cpu", batching=False)


def prompt_of(model: OnnxModel, text: str = "What is the capital of France?") -> list[int]:
    return model.encode_chat([{"role": "user", "content": text}])


def single(model: OnnxModel, prompt: list[int], **kw: Any) -> tuple[list[int], Finish]:
    rec = FinishRecorder()
    ids: list[int] = model.generate(prompt, on_finish=rec, **kw).pipe(ops.to_list()).run()
    assert rec.finish is not None
    return ids, rec.finish


@dataclass
class Run:
    """One subscription's ids, end and errors."""

    ids: list[int] = field(default_factory=list)
    recorder: FinishRecorder = field(default_factory=FinishRecorder)
    errors: list[BaseException] = field(default_factory=list)
    ended: threading.Event = field(default_factory=threading.Event)
    subscription: Any = None

    @property
    def finish(self) -> Finish | None:
        return self.recorder.finish


def start(model: OnnxModel, prompt: list[int], ready: Callable[[], bool] | None = None, **kw: Any) -> Run:
    run = Run()

    def error(exc: BaseException) -> None:
        run.errors.append(exc)
        run.ended.set()

    obs = model.generate(prompt, on_finish=run.recorder, ready=ready, **kw)
    run.subscription = obs.subscribe(run.ids.append, error, run.ended.set)
    return run


def wait_idle(model: OnnxModel, timeout: float = 10.0) -> None:
    """Every row gone, its KV memory freed, the worker thread ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stats = model.batch_stats() or {}
        if (
            model.active_generations == 0
            and stats.get("rows", 0) == 0
            and stats.get("kv_bytes", 0) == 0
            and not batch_threads()
        ):
            return
        time.sleep(0.01)
    raise AssertionError(
        f"not idle: {model.active_generations} active, {model.batch_stats()}, {batch_threads()}"
    )


def batch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "rxstream-batch"]


class LogitLog:
    """Records the logits every sampler of a kind of run sees, by prompt (patched ``make_sampler``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: Any) -> None:
        self.logits: dict[tuple[int, ...], list[np.ndarray]] = {}
        original = module.make_sampler

        def make(call: Any, prompt: Any, seed: int | None) -> Callable[[np.ndarray], int]:
            sampler = original(call, prompt, seed)
            seen = self.logits.setdefault(tuple(prompt), [])

            def sample(logits: np.ndarray) -> int:
                seen.append(np.array(logits, dtype=np.float32, copy=True))
                return int(sampler(logits))

            return sample

        monkeypatch.setattr(module, "make_sampler", make)


def prompts_for(model: OnnxModel) -> list[list[int]]:
    base = prompt_of(model)
    other = prompt_of(model, "Tell me a story about a lighthouse keeper and the sea.")
    return [base, base[:5], base[4:13], [7], other, (base + other)[:40]]


# ------------------------------------------------------------------------------------------------
def test_batched_rows_equal_single_runs(
    layout_dir: Path, alone: OnnxModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six prompts of different lengths and budgets decoded together give each the ids it gives
    alone; their logits agree within float rounding."""
    batched_log = LogitLog(monkeypatch, _batch_row)
    alone_log = LogitLog(monkeypatch, _generation)
    model = load(layout_dir)
    prompts = prompts_for(model)
    budgets = [30, 12, 25, 20, 30, 18]
    gate = threading.Event()
    runs = [
        start(model, p, gate.is_set, max_new_tokens=n, ignore_eos=True)
        for p, n in zip(prompts, budgets, strict=True)
    ]
    gate.set()
    assert all(r.ended.wait(30) for r in runs)
    stats = model.batch_stats()
    assert stats is not None and stats["peak_rows"] == len(prompts)
    assert stats["decode_steps"] < sum(budgets) // 2  # really batched
    worst = 0.0
    for prompt, n, run in zip(prompts, budgets, runs, strict=True):
        ids, finish = single(alone, prompt, max_new_tokens=n, ignore_eos=True)
        assert run.ids == ids
        assert run.finish == finish == Finish(FinishReason.LENGTH)
        got, want = batched_log.logits[tuple(prompt)], alone_log.logits[tuple(prompt)]
        assert len(got) == len(want) == n
        worst = max(worst, max(float(np.abs(a - b).max()) for a, b in zip(got, want, strict=True)))
    print(f"largest |batched - alone| logit difference: {worst:.2e}")
    assert worst <= LOGIT_TOLERANCE
    wait_idle(model)


def test_seeded_sampling_in_a_batch_equals_alone(
    layout_dir: Path, alone: OnnxModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each row has its own sampler: seeded rows draw what they draw alone, and a fresh sampler
    with the same seed fed the logits a row saw picks the same ids."""
    batched_log = LogitLog(monkeypatch, _batch_row)
    model = load(layout_dir)
    prompts = prompts_for(model)
    kw: dict[str, Any] = {
        "temperature": 1.0,
        "top_k": 50,
        "top_p": 0.9,
        "ignore_eos": True,
        "max_new_tokens": 20,
    }
    gate = threading.Event()
    runs = [start(model, p, gate.is_set, seed=100 + i, **kw) for i, p in enumerate(prompts)]
    gate.set()
    assert all(r.ended.wait(30) for r in runs)
    for i, (prompt, run) in enumerate(zip(prompts, runs, strict=True)):
        assert run.ids == single(alone, prompt, seed=100 + i, **kw)[0]
        replay = Sampler(model.vocab_size, temperature=1.0, top_k=50, top_p=0.9, seed=100 + i)
        assert [replay(x) for x in batched_log.logits[tuple(prompt)]] == run.ids
    wait_idle(model)


def test_a_row_joins_at_the_next_step_and_leaves_at_once(layout_dir: Path, alone: OnnxModel) -> None:
    """Rows start while others are decoding (each from the previous one's 3rd token) and end at
    different times; every one still gives its single-run ids."""
    model = load(layout_dir)
    prompts = prompts_for(model)
    runs: list[Run] = []
    budgets = [40, 8, 30, 5, 25, 12]

    def chain(i: int) -> None:
        def on_token(_: int) -> None:
            if len(runs[i].ids) == 3 and i + 1 < len(prompts) and len(runs) == i + 1:
                runs.append(Run())
                launch(i + 1)

        runs[i].ids_hook = on_token  # type: ignore[attr-defined]

    def launch(i: int) -> None:
        run = runs[i]
        chain(i)

        def on_next(token: int) -> None:
            run.ids.append(token)
            run.ids_hook(token)  # type: ignore[attr-defined]

        obs = model.generate(prompts[i], on_finish=run.recorder, max_new_tokens=budgets[i], ignore_eos=True)
        run.subscription = obs.subscribe(on_next, run.errors.append, run.ended.set)

    runs.append(Run())
    launch(0)
    deadline = time.monotonic() + 30
    while (
        len(runs) < len(prompts) or not all(r.ended.is_set() for r in runs)
    ) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(runs) == len(prompts)
    for prompt, n, run in zip(prompts, budgets, runs, strict=True):
        assert run.ended.is_set() and not run.errors
        assert run.ids == single(alone, prompt, max_new_tokens=n, ignore_eos=True)[0]
    stats = model.batch_stats()
    assert stats is not None and stats["peak_rows"] >= 3
    wait_idle(model)


def test_cancel_one_row_mid_batch_others_go_on_unchanged(layout_dir: Path, alone: OnnxModel) -> None:
    model = load(layout_dir)
    prompts = prompts_for(model)[:4]
    gate = threading.Event()
    disposed = threading.Event()
    seen: list[Run] = []

    def victim_ready() -> bool:  # the victim pauses at 6 ids until it is disposed (a slow consumer)
        return gate.is_set() and (not seen or len(seen[0].ids) < 6 or disposed.is_set())

    runs = [
        start(model, p, victim_ready if i == 1 else gate.is_set, max_new_tokens=30, ignore_eos=True)
        for i, p in enumerate(prompts)
    ]
    victim = runs[1]
    seen.append(victim)
    stopped_at: list[int] = []

    def watch() -> None:  # dispose from another thread once the victim has 6 ids
        while len(victim.ids) < 6:
            time.sleep(0.0005)
        victim.subscription.dispose()
        stopped_at.append(len(victim.ids))
        disposed.set()

    watcher = threading.Thread(target=watch)
    watcher.start()
    gate.set()
    watcher.join(30)
    for i, run in enumerate(runs):
        if i != 1:
            assert run.ended.wait(30)
            assert run.ids == single(alone, prompts[i], max_new_tokens=30, ignore_eos=True)[0]
    assert victim.finish == Finish(FinishReason.CANCELLED)
    assert not victim.ended.is_set()  # no completion after the disposal
    assert len(victim.ids) <= stopped_at[0] + 1  # at most the step already running
    assert victim.ids == single(alone, prompts[1], max_new_tokens=30, ignore_eos=True)[0][: len(victim.ids)]
    wait_idle(model)


def test_dispose_in_on_next_stops_that_row_before_its_next_step(layout_dir: Path) -> None:
    model = load(layout_dir)
    prompts = prompts_for(model)[:3]
    runs = [Run() for _ in prompts]
    holder: dict[str, Any] = {}

    def on_next(token: int) -> None:
        runs[0].ids.append(token)
        if len(runs[0].ids) == 4:
            holder["sub"].dispose()

    holder["sub"] = model.generate(
        prompts[0], on_finish=runs[0].recorder, max_new_tokens=50, ignore_eos=True
    ).subscribe(on_next)
    for run, prompt in zip(runs[1:], prompts[1:], strict=True):
        run.subscription = model.generate(
            prompt, on_finish=run.recorder, max_new_tokens=20, ignore_eos=True
        ).subscribe(run.ids.append, run.errors.append, run.ended.set)
    assert all(r.ended.wait(30) for r in runs[1:])
    wait_idle(model)
    assert len(runs[0].ids) == 4
    assert runs[0].recorder.reports == [Finish(FinishReason.CANCELLED)]


def test_32_streams_with_random_disposals_leave_nothing_behind(layout_dir: Path) -> None:
    model = load(layout_dir, max_batch=8)
    base = prompts_for(model)
    rng = random.Random(7)
    runs: list[Run] = []
    for i in range(32):
        prompt = base[i % len(base)] + [rng.randrange(3, 300) for _ in range(rng.randrange(0, 5))]
        runs.append(start(model, prompt, max_new_tokens=rng.randrange(1, 60), ignore_eos=bool(i % 3)))
    for run in rng.sample(runs, 16):
        time.sleep(rng.random() * 0.01)
        run.subscription.dispose()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(r.ended.is_set() or r.finish is not None for r in runs):
        time.sleep(0.01)
    wait_idle(model)
    for run in runs:
        assert run.finish is not None and not run.errors
    stats = model.batch_stats()
    assert stats is not None and stats["peak_rows"] <= 8


def test_generate_without_batching_is_the_old_loop(layout_dir: Path) -> None:
    model = OnnxModel.load(layout_dir, provider="cpu", batching=False)
    assert model.batching is None and model.batch_stats() is None
    prompt = prompts_for(model)[0]
    assert len(single(model, prompt, max_new_tokens=5, ignore_eos=True)[0]) == 5
    assert not batch_threads()


def test_chunked_prefill_equals_one_pass_and_interleaves_with_decoding(
    layout_dir: Path, alone: OnnxModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 300-token prompt prefilled 16 tokens at a time: the same ids as one prefill pass, and the
    rows already decoding keep getting tokens while it is read."""
    model = load(layout_dir, prefill_chunk=16, share_prefix=False)  # the long prompt starts with base[0]
    base = prompts_for(model)
    long_prompt = (base[0] + base[4]) * 8
    long_prompt = long_prompt[:300]
    events: list[str] = []
    original = _scheduler.BatchScheduler._prefill_pass

    def prefill_pass(self: Any, row: Any, ids: np.ndarray) -> Any:
        events.append(f"prefill{len(row.prompt)}")
        return original(self, row, ids)

    monkeypatch.setattr(_scheduler.BatchScheduler, "_prefill_pass", prefill_pass)
    first = Run()
    started = threading.Event()

    def on_next(token: int) -> None:
        first.ids.append(token)
        events.append("token")
        if len(first.ids) == 2:
            started.set()

    model.generate(base[0], on_finish=first.recorder, max_new_tokens=300, ignore_eos=True).subscribe(
        on_next, first.errors.append, first.ended.set
    )
    assert started.wait(10)
    second = start(model, long_prompt, max_new_tokens=10, ignore_eos=True)
    assert first.ended.wait(30) and second.ended.wait(30)
    chunks = [i for i, e in enumerate(events) if e == "prefill300"]
    assert len(chunks) == 300 // 16 + 1
    between = events[chunks[0] : chunks[-1]]
    assert between.count("token") >= len(chunks) - 2  # a decode step after (nearly) every chunk
    assert second.ids == single(alone, long_prompt, max_new_tokens=10, ignore_eos=True)[0]
    assert first.ids == single(alone, base[0], max_new_tokens=300, ignore_eos=True)[0]
    wait_idle(model)


def test_kv_budget_makes_rows_wait_and_a_row_too_big_fails(layout_dir: Path, alone: OnnxModel) -> None:
    """With room for about two rows, six still all finish exactly (the rest wait their turn); a row
    whose prompt plus budget cannot fit at all fails with a clear error."""
    model = load(layout_dir, max_kv_tokens=160)
    prompts = prompts_for(model)
    gate = threading.Event()  # every row queued before any decodes
    runs = [start(model, p, gate.is_set, max_new_tokens=20, ignore_eos=True) for p in prompts]
    gate.set()
    assert all(r.ended.wait(30) for r in runs)
    stats = model.batch_stats()
    assert stats is not None and 2 <= stats["peak_rows"] < len(prompts)
    assert stats["peak_kv_allocated_tokens"] <= 160
    for prompt, run in zip(prompts, runs, strict=True):
        assert run.ids == single(alone, prompt, max_new_tokens=20, ignore_eos=True)[0]
    too_big = start(model, prompts[0], max_new_tokens=300, ignore_eos=True)
    assert too_big.ended.wait(10)
    assert isinstance(too_big.errors[0], ValueError) and "max_kv_tokens" in str(too_big.errors[0])
    assert too_big.finish is not None and too_big.finish.reason is FinishReason.ERROR
    wait_idle(model)


def test_capacity_grows_while_rows_decode(layout_dir: Path, alone: OnnxModel) -> None:
    """Short rows first, then a long one: the cache grows under the running rows (copying what they
    hold) and every row still gives its single-run ids."""
    model = load(layout_dir)
    prompts = prompts_for(model)
    gate = threading.Event()
    short = [start(model, p, gate.is_set, max_new_tokens=10, ignore_eos=True) for p in prompts[:3]]
    time.sleep(0.05)
    long_run = start(model, prompts[3], max_new_tokens=200, ignore_eos=True)
    gate.set()
    assert all(r.ended.wait(30) for r in [*short, long_run])
    for p, r in zip(prompts[:3], short, strict=True):
        assert r.ids == single(alone, p, max_new_tokens=10, ignore_eos=True)[0]
    assert long_run.ids == single(alone, prompts[3], max_new_tokens=200, ignore_eos=True)[0]
    wait_idle(model)


def test_generate_n_prefills_once(layout_dir: Path, alone: OnnxModel) -> None:
    model = load(layout_dir)
    prompt = prompts_for(model)[4]
    finishes: list[tuple[int, Finish]] = []
    gate = threading.Event()  # all four subscribed before any decodes (else the first may end first)
    greedy = model.generate_n(
        prompt,
        4,
        max_new_tokens=12,
        ignore_eos=True,
        on_finish=lambda i, f: finishes.append((i, f)),
        ready=gate.is_set,
    )
    runs: list[list[int]] = [[] for _ in greedy]
    done = [threading.Event() for _ in greedy]
    for obs, ids, event in zip(greedy, runs, done, strict=True):
        obs.subscribe(ids.append, on_completed=event.set)
    gate.set()
    assert all(e.wait(30) for e in done)
    expected = single(alone, prompt, max_new_tokens=12, ignore_eos=True)[0]
    assert runs == [expected] * 4
    stats = model.batch_stats()
    assert stats is not None and stats["prefill_tokens"] == len(prompt)  # one prefill for four rows
    assert sorted(i for i, _ in finishes) == [0, 1, 2, 3]
    sampled = model.generate_n(prompt, 3, max_new_tokens=12, ignore_eos=True, temperature=1.0, seed=5)
    results = [[] for _ in sampled]  # type: list[list[int]]
    events = [threading.Event() for _ in sampled]
    for obs, ids, event in zip(sampled, results, events, strict=True):
        obs.subscribe(ids.append, on_completed=event.set)
    assert all(e.wait(30) for e in events)
    for i, ids in enumerate(results):
        assert (
            ids == single(alone, prompt, max_new_tokens=12, ignore_eos=True, temperature=1.0, seed=5 + i)[0]
        )
    wait_idle(model)


def test_cancelled_leader_hands_the_prefill_to_a_follower(layout_dir: Path, alone: OnnxModel) -> None:
    model = load(layout_dir, prefill_chunk=8)
    prompt = (prompts_for(model)[4] * 3)[:60]
    streams = model.generate_n(prompt, 3, max_new_tokens=8, ignore_eos=True)
    runs = [Run() for _ in streams]
    for obs, run in zip(streams, runs, strict=True):
        run.subscription = obs.subscribe(run.ids.append, run.errors.append, run.ended.set)
    runs[0].subscription.dispose()  # the leader, most likely still prefilling
    assert runs[1].ended.wait(30) and runs[2].ended.wait(30)
    expected = single(alone, prompt, max_new_tokens=8, ignore_eos=True)[0]
    assert runs[1].ids == runs[2].ids == expected
    wait_idle(model)


def test_a_paused_row_does_not_hold_the_others(layout_dir: Path, alone: OnnxModel) -> None:
    model = load(layout_dir)
    prompts = prompts_for(model)[:2]
    go = threading.Event()
    slow = start(model, prompts[0], go.is_set, max_new_tokens=20, ignore_eos=True)
    fast = start(model, prompts[1], max_new_tokens=20, ignore_eos=True)
    assert fast.ended.wait(30)
    assert len(slow.ids) == 1 and not slow.ended.is_set()  # its first id, then it waits
    go.set()
    assert slow.ended.wait(30)
    assert slow.ids == single(alone, prompts[0], max_new_tokens=20, ignore_eos=True)[0]
    assert fast.ids == single(alone, prompts[1], max_new_tokens=20, ignore_eos=True)[0]
    wait_idle(model)


def test_a_failing_subscriber_fails_its_row_only(layout_dir: Path, alone: OnnxModel) -> None:
    model = load(layout_dir)
    prompts = prompts_for(model)[:3]
    gate = threading.Event()
    runs = [start(model, p, gate.is_set, max_new_tokens=15, ignore_eos=True) for p in prompts]
    bad = Run()

    def explode(token: int) -> None:
        bad.ids.append(token)
        if len(bad.ids) == 3:
            raise RuntimeError("subscriber bug")

    model.generate(
        prompts[0], on_finish=bad.recorder, max_new_tokens=15, ignore_eos=True, ready=gate.is_set
    ).subscribe(explode, lambda e: (bad.errors.append(e), bad.ended.set()))
    gate.set()
    assert bad.ended.wait(30) and all(r.ended.wait(30) for r in runs)
    assert isinstance(bad.errors[0], RuntimeError) and len(bad.ids) == 3
    assert bad.finish is not None and bad.finish.reason is FinishReason.ERROR
    for p, r in zip(prompts, runs, strict=True):
        assert r.ids == single(alone, p, max_new_tokens=15, ignore_eos=True)[0]
    wait_idle(model)


def test_a_failing_forward_pass_fails_the_rows_in_it_and_the_model_recovers(
    layout_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = load(layout_dir)
    prompts = prompts_for(model)[:3]
    calls = {"n": 0}
    original = model._session.run_bound

    def flaky(binding: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 6:
            raise RuntimeError("device lost")
        original(binding)

    monkeypatch.setattr(model._session, "run_bound", flaky)
    gate = threading.Event()
    runs = [start(model, p, gate.is_set, max_new_tokens=10, ignore_eos=True) for p in prompts]
    gate.set()
    assert all(r.ended.wait(30) for r in runs)
    assert any(r.errors for r in runs)
    for r in runs:
        assert r.finish is not None
        if r.errors:
            assert r.finish.reason is FinishReason.ERROR
    wait_idle(model)
    again = start(model, prompts[0], max_new_tokens=5, ignore_eos=True)
    assert again.ended.wait(10) and len(again.ids) == 5
    wait_idle(model)


def test_max_new_tokens_zero_and_stop_and_eos_end_rows(layout_dir: Path) -> None:
    model = load(layout_dir)
    prompt = prompts_for(model)[0]
    ids, _ = single(model, prompt, max_new_tokens=5, ignore_eos=True)
    assert single(model, prompt, max_new_tokens=0) == ([], Finish(FinishReason.LENGTH))
    assert single(model, prompt, max_new_tokens=5, stop_token_ids=[ids[2]])[1] == Finish(
        FinishReason.STOP, stop=ids[2]
    )
    wait_idle(model)


def test_batch_config_checks_its_fields() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        BatchConfig(max_batch=0)
    with pytest.raises(TypeError, match="prefill_chunk"):
        BatchConfig(prefill_chunk=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="share_prefix"):
        BatchConfig(share_prefix=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prefix_cache_bytes"):
        BatchConfig(prefix_cache_bytes=-1)
    with pytest.raises(TypeError, match="batching"):
        OnnxModel.load("nope", batching="yes")  # type: ignore[arg-type]


def test_layout_is_read_from_the_graph(tiny_dir: Path, gqa_dir: Path) -> None:
    assert _kvcache.batch_layout(OnnxModel.load(gqa_dir)._session) == "slots"
    assert _kvcache.batch_layout(OnnxModel.load(tiny_dir)._session) == "padded"


@pytest.fixture
def no_threads_left() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert set(threading.enumerate()) - before == set()


def test_the_worker_thread_ends_when_idle(layout_dir: Path, no_threads_left: None) -> None:
    model = load(layout_dir)
    for _ in range(3):
        single(model, prompts_for(model)[0], max_new_tokens=3, ignore_eos=True)
        wait_idle(model)


def test_logprobs_through_the_batch_equal_alone(layout_dir: Path, alone: OnnxModel) -> None:
    """``logprobs=k`` rows in a batch emit the pieces they emit alone (ids equal, numbers within
    float rounding), beside rows that emit plain ids."""
    model = load(layout_dir)
    prompts = prompts_for(model)[:4]
    gate = threading.Event()
    runs = [
        start(model, p, gate.is_set, max_new_tokens=12, ignore_eos=True, logprobs=3 if i % 2 == 0 else None)
        for i, p in enumerate(prompts)
    ]
    gate.set()
    assert all(r.ended.wait(30) for r in runs)
    for i, (prompt, run) in enumerate(zip(prompts, runs, strict=True)):
        k = 3 if i % 2 == 0 else None
        expected: list[Any] = (
            alone.generate(prompt, max_new_tokens=12, ignore_eos=True, logprobs=k).pipe(ops.to_list()).run()
        )
        if k is None:
            assert run.ids == expected
            continue
        assert [p.ids for p in run.ids] == [p.ids for p in expected]
        for got, want in zip(run.ids, expected, strict=True):
            assert got.logprobs == pytest.approx(want.logprobs, abs=LOGIT_TOLERANCE)
            assert [i for i, _ in got.top_logprobs[0]] == [i for i, _ in want.top_logprobs[0]]
    wait_idle(model)


def test_a_later_row_with_the_same_prompt_copies_it_from_a_running_row(
    layout_dir: Path, alone: OnnxModel
) -> None:
    """A row arriving while another with an equal prompt is decoding starts from a copy of that
    prompt's cache and logits (no prefill of its own) and still gives its single-run ids."""
    model = load(layout_dir)
    prompt = prompts_for(model)[4]
    first = Run()
    second: list[Run] = []

    def on_next(token: int) -> None:
        first.ids.append(token)
        if len(first.ids) == 5:
            second.append(start(model, prompt, max_new_tokens=15, ignore_eos=True, temperature=1.0, seed=9))

    model.generate(prompt, on_finish=first.recorder, max_new_tokens=30, ignore_eos=True).subscribe(
        on_next, first.errors.append, first.ended.set
    )
    assert first.ended.wait(30) and second[0].ended.wait(30)
    assert first.ids == single(alone, prompt, max_new_tokens=30, ignore_eos=True)[0]
    expected = single(alone, prompt, max_new_tokens=15, ignore_eos=True, temperature=1.0, seed=9)[0]
    assert second[0].ids == expected
    stats = model.batch_stats()
    assert stats is not None and stats["prefill_tokens"] == len(prompt)
    wait_idle(model)


def test_default_kv_budget_holds_one_request_of_the_whole_context(tmp_path: Path) -> None:
    small = OnnxModel.load(build_tiny_model(tmp_path / "small", seed=0, attention="gqa"))
    assert (small.batch_stats() or {})["max_kv_tokens"] == 65536
    wide = OnnxModel.load(
        build_tiny_model(tmp_path / "wide", seed=0, attention="gqa", max_position_embeddings=70000)
    )
    assert (wide.batch_stats() or {})["max_kv_tokens"] == 70000
    explicit = OnnxModel.load(tmp_path / "wide", batching=BatchConfig(max_kv_tokens=1000))
    assert (explicit.batch_stats() or {})["max_kv_tokens"] == 1000


_EXIT_RIGHT_AFTER_DISPOSE = """
import sys, time
from rxstream.backends import OnnxModel
m = OnnxModel.load(sys.argv[1], provider="cpu")
got = []
sub = m.generate(m.encode("hello there"), max_new_tokens=400, ignore_eos=True).subscribe(got.append)
while len(got) < 3:
    time.sleep(0.001)
sub.dispose()
sys.exit(0)
"""


def test_the_process_exits_cleanly_right_after_a_disposal(layout_dir: Path) -> None:
    """The interpreter waits for the worker (as it waited for the pool a generation ran on): a
    process that disposes a generation and exits at once never tears down under a forward pass
    (a daemon worker made it abort, exit 134, every time)."""
    import subprocess
    import sys

    for _ in range(3):
        result = subprocess.run(
            [sys.executable, "-c", _EXIT_RIGHT_AFTER_DISPOSE, str(layout_dir)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr[-2000:]


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_a_prompt_sharing_a_decoding_rows_prefix_prefills_only_the_rest(
    layout_dir: Path, alone: OnnxModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two chats with the same template prefix: the second row copies the first one's cached
    prefix and reads only its own tokens, and still gives its single-run ids (logits within
    float rounding: its prompt is read in other chunks than alone)."""
    batched_log = LogitLog(monkeypatch, _batch_row)
    alone_log = LogitLog(monkeypatch, _generation)
    model = load(layout_dir)
    first_prompt = prompt_of(model)
    second_prompt = prompt_of(model, "Tell me a story about a lighthouse keeper and the sea.")
    shared = common_prefix(first_prompt, second_prompt)
    assert shared >= _scheduler.MIN_SHARED_PREFIX
    first = Run()
    second: list[Run] = []

    def on_next(token: int) -> None:
        first.ids.append(token)
        if len(first.ids) == 3:
            second.append(start(model, second_prompt, max_new_tokens=12, ignore_eos=True))

    model.generate(first_prompt, on_finish=first.recorder, max_new_tokens=25, ignore_eos=True).subscribe(
        on_next, first.errors.append, first.ended.set
    )
    assert first.ended.wait(30) and second[0].ended.wait(30)
    assert not first.errors and not second[0].errors
    assert first.ids == single(alone, first_prompt, max_new_tokens=25, ignore_eos=True)[0]
    assert second[0].ids == single(alone, second_prompt, max_new_tokens=12, ignore_eos=True)[0]
    stats = model.batch_stats()
    assert stats is not None
    assert stats["shared_prefix_tokens"] == shared
    assert stats["prefill_tokens"] == len(first_prompt) + len(second_prompt) - shared
    got, want = batched_log.logits[tuple(second_prompt)], alone_log.logits[tuple(second_prompt)]
    worst = max(float(np.abs(a - b).max()) for a, b in zip(got, want, strict=True))
    print(f"largest |shared prefix - alone| logit difference: {worst:.2e}")
    assert worst <= LOGIT_TOLERANCE
    wait_idle(model)


def test_rows_arriving_together_share_a_prefix_read_in_the_same_iteration(
    layout_dir: Path, alone: OnnxModel
) -> None:
    """Four chats queued at once: the first is read in full, the others copy the template prefix
    from it (a row still prefilling is a source too) and read only their own tokens; with
    ``share_prefix=False`` every prompt is read in full. The ids are the single runs' either way."""
    questions = ["Why is the sky blue?", "Name three rivers.", "What is 2 + 2?", "Say hello."]
    for share in (True, False):
        model = load(layout_dir, share_prefix=share)
        prompts = [prompt_of(model, q) for q in questions]
        gate = threading.Event()
        runs = [start(model, p, gate.is_set, max_new_tokens=8, ignore_eos=True) for p in prompts]
        gate.set()
        assert all(r.ended.wait(30) for r in runs)
        for prompt, run in zip(prompts, runs, strict=True):
            assert run.ids == single(alone, prompt, max_new_tokens=8, ignore_eos=True)[0]
        stats = model.batch_stats()
        assert stats is not None
        total = sum(len(p) for p in prompts)
        if share:
            saved = sum(max(common_prefix(p, q) for q in prompts[:i]) for i, p in enumerate(prompts) if i)
            assert saved >= 3 * _scheduler.MIN_SHARED_PREFIX
            assert stats["shared_prefix_tokens"] == saved
            assert stats["prefill_tokens"] == total - saved
        else:
            assert stats["shared_prefix_tokens"] == 0
            assert stats["prefill_tokens"] == total
        wait_idle(model)


def test_a_short_common_prefix_is_not_copied(layout_dir: Path) -> None:
    """Prompts sharing fewer than MIN_SHARED_PREFIX tokens are read in full."""
    model = load(layout_dir)
    base = prompt_of(model)
    other = base[: _scheduler.MIN_SHARED_PREFIX - 1] + [
        (t + 1) % model.vocab_size for t in base[_scheduler.MIN_SHARED_PREFIX - 1 :]
    ]
    gate = threading.Event()
    runs = [start(model, p, gate.is_set, max_new_tokens=4, ignore_eos=True) for p in (base, other)]
    gate.set()
    assert all(r.ended.wait(30) for r in runs)
    stats = model.batch_stats()
    assert stats is not None and stats["shared_prefix_tokens"] == 0
    assert stats["prefill_tokens"] == 2 * len(base)
    wait_idle(model)


def test_a_next_turn_reads_only_what_follows_an_ended_rows_tokens(
    gqa_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row that ended leaves its prompt and fed-back answer in the prefix store; the next turn of
    the conversation (that prompt, that answer, a new message) copies them and reads only the new
    tokens, and gives the ids it gives alone."""
    batched_log = LogitLog(monkeypatch, _batch_row)
    alone_log = LogitLog(monkeypatch, _generation)
    model = load(gqa_dir)
    alone = OnnxModel.load(gqa_dir, provider="cpu", batching=False)
    first_prompt = prompt_of(model)
    first, _ = single(model, first_prompt, max_new_tokens=12, ignore_eos=True)
    wait_idle(model)  # the row is gone, its positions are kept
    stats = model.batch_stats()
    assert stats is not None
    held = len(first_prompt) + len(first) - 1  # the last id was never fed back
    assert stats["prefix_cache_entries"] == 1 and stats["prefix_cache_tokens"] == held
    assert 0 < stats["prefix_cache_bytes"] <= stats["max_prefix_cache_bytes"]
    second_prompt = first_prompt + first + prompt_of(model, "And of Italy?")[3:]
    second, _ = single(model, second_prompt, max_new_tokens=10, ignore_eos=True)
    assert second == single(alone, second_prompt, max_new_tokens=10, ignore_eos=True)[0]
    after = model.batch_stats()
    assert after is not None
    assert after["shared_prefix_tokens"] == held and after["prefix_cache_hits"] == 1
    assert after["prefill_tokens"] - stats["prefill_tokens"] == len(second_prompt) - held
    got, want = batched_log.logits[tuple(second_prompt)], alone_log.logits[tuple(second_prompt)]
    assert max(float(np.abs(a - b).max()) for a, b in zip(got, want, strict=True)) <= LOGIT_TOLERANCE
    wait_idle(model)
    # the second turn extends the first: one entry serves both
    final = model.batch_stats()
    assert final is not None and final["prefix_cache_entries"] == 1
    assert final["prefix_cache_tokens"] == len(second_prompt) + len(second) - 1


def test_the_prefix_store_keeps_within_its_bytes_least_recently_used_out(gqa_dir: Path) -> None:
    model = load(gqa_dir)
    prompts = [prompt_of(model, q) for q in ("Why is the sky blue?", "Name three rivers.", "Say hi.")]
    single(model, prompts[0], max_new_tokens=4, ignore_eos=True)
    wait_idle(model)
    stats = model.batch_stats()
    assert stats is not None
    per_position = stats["prefix_cache_bytes"] // stats["prefix_cache_tokens"]
    # room for about one conversation: each new one pushes the older out
    small = load(gqa_dir, prefix_cache_bytes=per_position * (max(len(p) for p in prompts) + 8))
    for prompt in prompts:
        single(small, prompt, max_new_tokens=4, ignore_eos=True)
        wait_idle(small)
        stats = small.batch_stats()
        assert stats is not None
        assert stats["prefix_cache_entries"] == 1
        assert stats["prefix_cache_tokens"] == len(prompt) + 3
        assert stats["prefix_cache_bytes"] <= stats["max_prefix_cache_bytes"]
    for config in ({"prefix_cache_bytes": 0}, {"share_prefix": False}):
        off = load(gqa_dir, **config)
        single(off, prompts[0], max_new_tokens=4, ignore_eos=True)
        wait_idle(off)
        stats = off.batch_stats()
        assert stats is not None and stats["prefix_cache_entries"] == 0 and stats["prefix_cache_bytes"] == 0


def test_the_padded_layout_keeps_no_ended_rows(tiny_dir: Path) -> None:
    model = load(tiny_dir)
    single(model, prompt_of(model), max_new_tokens=4, ignore_eos=True)
    wait_idle(model)
    stats = model.batch_stats()
    assert stats is not None and stats["layout"] == "padded"
    assert stats["prefix_cache_entries"] == 0 and stats["max_prefix_cache_bytes"] == 0


def test_an_idle_worker_lingers_for_the_next_generation_then_ends(
    gqa_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a client's next request finds the worker and its KV buffers; once idle for LINGER_SECONDS
    # the thread ends and the buffers are freed
    monkeypatch.setattr(_scheduler, "LINGER_SECONDS", 1.0)
    model = load(gqa_dir)
    prompt = prompt_of(model)
    first = model.generate(prompt, max_new_tokens=3).pipe(ops.to_list()).run()
    threads = batch_threads()
    assert len(threads) == 1 and (model.batch_stats() or {})["kv_bytes"] > 0
    again = model.generate(prompt, max_new_tokens=3).pipe(ops.to_list()).run()
    assert again == first and batch_threads() == threads  # the same thread ran it
    wait_idle(model, timeout=10)


def test_a_lingering_worker_does_not_hold_the_process_at_exit(gqa_dir: Path) -> None:
    # the worker is not a daemon (never inside ONNX Runtime at teardown), yet an idle one ends at
    # once when the interpreter exits, not after its linger
    import subprocess
    import sys

    code = f"""
import time
from reactivex import operators as ops
import rxstream.backends.onnx._scheduler as s
s.LINGER_SECONDS = 60.0
from rxstream.backends import OnnxModel
model = OnnxModel.load({str(gqa_dir)!r}, provider="cpu", batching=True)
prompt = model.encode_chat([{{"role": "user", "content": "hi"}}])
model.generate(prompt, max_new_tokens=2).pipe(ops.to_list()).run()
print(time.monotonic(), flush=True)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - float(done.stdout.split()[-1]) < 20


def test_the_worker_yields_after_a_lone_batch_s_first_tokens_only(
    gqa_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a batch whose every row just sampled its first token leaves the cores to the consumers
    # before the next step; rows already decoding are never held up for a newcomer
    monkeypatch.setattr(_scheduler, "FIRST_TOKEN_YIELD_SECONDS", 0.3)
    model = load(gqa_dir)
    prompt = prompt_of(model)

    def stamped(max_new_tokens: int) -> tuple[list[float], threading.Event, Any]:
        times: list[float] = []
        done = threading.Event()
        obs = model.generate(prompt, max_new_tokens=max_new_tokens, ignore_eos=True)
        sub = obs.subscribe(lambda _id: times.append(time.monotonic()), lambda e: done.set(), done.set)
        return times, done, sub

    alone, done, _ = stamped(3)
    assert done.wait(10)
    assert alone[1] - alone[0] >= 0.25  # the yield, once
    assert alone[2] - alone[1] < 0.25

    long, _, long_sub = stamped(100000)
    deadline = time.monotonic() + 10
    while len(long) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    newcomer, done, _ = stamped(3)
    assert done.wait(10)
    steps = len(long)
    assert newcomer[1] - newcomer[0] < 0.25  # another row was decoding: no yield
    long_sub.dispose()
    assert steps > 5
    wait_idle(model)
