"""Bad arguments to the ONNX backend fail at the call, naming the argument; name resolution of
``OnnxModel.from_pretrained`` (known names versus directories)."""

from __future__ import annotations

import math
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from reactivex import operators as ops
from reactivex.scheduler import ImmediateScheduler

from rxstream.backends import OnnxModel
from rxstream.backends.convert import KNOWN_MODELS
from rxstream.backends.convert._pull import _COMPLETE, _FORMAT
from rxstream.backends.onnx._config import DecoderConfig
from rxstream.backends.onnx._sampling import Sampler


class RecordingScheduler(ImmediateScheduler):
    """Counts what is scheduled on it: a call that fails at once must schedule nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.scheduled = 0

    def schedule(self, action: Any, state: Any = None) -> Any:
        self.scheduled += 1
        return super().schedule(action, state)


NAN, INF = math.nan, math.inf

# (argument, bad value, exception): each must raise at the generate(...) call, naming the argument
BAD_SAMPLING: list[tuple[str, Any, type[Exception]]] = [
    ("seed", -5, ValueError),
    ("seed", np.int64(-1), ValueError),
    ("seed", True, TypeError),
    ("seed", 1.0, TypeError),
    ("seed", "42", TypeError),
    ("max_new_tokens", -1, ValueError),
    ("max_new_tokens", True, TypeError),
    ("max_new_tokens", 2.5, TypeError),
    ("max_new_tokens", np.float64(3), TypeError),
    ("max_new_tokens", None, TypeError),
    ("temperature", -0.1, ValueError),
    ("temperature", NAN, ValueError),
    ("temperature", INF, ValueError),
    ("temperature", 10**400, ValueError),
    ("temperature", True, TypeError),
    ("temperature", "0.7", TypeError),
    ("temperature", None, TypeError),
    ("top_k", -1, ValueError),
    ("top_k", False, TypeError),
    ("top_k", 2.0, TypeError),
    ("top_p", 0.0, ValueError),
    ("top_p", 1.5, ValueError),
    ("top_p", NAN, ValueError),
    ("top_p", INF, ValueError),
    ("top_p", True, TypeError),
    ("top_p", np.bool_(True), TypeError),
    ("repetition_penalty", 0.0, ValueError),
    ("repetition_penalty", -1.0, ValueError),
    ("repetition_penalty", NAN, ValueError),
    ("repetition_penalty", INF, ValueError),
    ("repetition_penalty", True, TypeError),
    ("repetition_penalty", "1.1", TypeError),
    ("stop_token_ids", "ab", TypeError),
    ("stop_token_ids", 5, TypeError),
    ("stop_token_ids", [2.5], TypeError),
    ("stop_token_ids", [True], TypeError),
    ("stop_token_ids", ["5"], TypeError),
    ("stop_token_ids", [-1], ValueError),
    ("stop_token_ids", [10**6], ValueError),
    ("ignore_eos", "no", TypeError),
    ("ignore_eos", 1, TypeError),
    ("on_finish", 5, TypeError),
    ("scheduler", object(), TypeError),
]


def _calls(model: OnnxModel) -> dict[str, Callable[..., Any]]:
    prompt = model.encode("hello world")
    return {
        "generate": lambda **kw: model.generate(prompt, **kw),
        "generate_batch": lambda **kw: model.generate_batch([prompt, prompt[:2]], **kw),
    }


@pytest.mark.parametrize("method", ["generate", "generate_batch"])
@pytest.mark.parametrize(("arg", "value", "error"), BAD_SAMPLING, ids=lambda v: repr(v)[:20])
def test_bad_argument_raises_at_the_call_naming_it(
    model: OnnxModel, method: str, arg: str, value: Any, error: type[Exception]
) -> None:
    scheduler = RecordingScheduler()
    kwargs: dict[str, Any] = {arg: value}
    if arg != "scheduler":
        kwargs["scheduler"] = scheduler
    with pytest.raises(error, match=rf"^{method}: {arg}\b"):
        _calls(model)[method](**kwargs)
    assert scheduler.scheduled == 0
    assert model.active_generations == 0


def test_negative_seed_fails_at_generate_not_at_subscribe(model: OnnxModel) -> None:
    with pytest.raises(ValueError, match=r"^generate: seed must be >= 0, got -5$"):
        model.generate(model.encode("hi"), temperature=0.8, seed=-5)


@pytest.mark.parametrize(
    ("prompt", "error", "where"),
    [
        ([1, 2.5], TypeError, r"prompt_ids\[1\] must be an int"),
        ([True, 2], TypeError, r"prompt_ids\[0\] must be an int"),
        ([1, "2"], TypeError, r"prompt_ids\[1\] must be an int"),
        ([1, np.float32(2)], TypeError, r"prompt_ids\[1\] must be an int"),
        (5, TypeError, "prompt_ids must be a sequence"),
        ([1, -3], ValueError, "prompt_ids has token id"),
    ],
)
def test_bad_prompt_ids_name_the_element(
    model: OnnxModel, prompt: Any, error: type[Exception], where: str
) -> None:
    with pytest.raises(error, match=rf"^generate: {where}"):
        model.generate(prompt)


def test_generate_batch_names_the_bad_prompt(model: OnnxModel) -> None:
    with pytest.raises(TypeError, match=r"^generate_batch: prompts\[0\] must be a sequence of ints"):
        model.generate_batch([1, 2, 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"^generate_batch: prompts must be a sequence"):
        model.generate_batch("hello")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^generate_batch: prompts\[1\] is empty"):
        model.generate_batch([[1, 2], []])


def run(model: OnnxModel, prompt: list[int], **kw: Any) -> list[int]:
    ids: list[int] = model.generate(prompt, **kw).pipe(ops.to_list()).run()
    return ids


def test_numpy_numbers_are_accepted_and_mean_the_same(model: OnnxModel) -> None:
    prompt = model.encode("What is the capital of France?")
    plain = run(
        model, prompt, max_new_tokens=6, temperature=0.9, top_k=20, top_p=0.9, seed=7, ignore_eos=True
    )
    numpy_args = run(
        model,
        list(np.asarray(prompt, dtype=np.int64)),
        max_new_tokens=np.int64(6),
        temperature=np.float32(0.9),
        top_k=np.int32(20),
        top_p=np.float64(0.9),
        seed=np.uint64(7),
        ignore_eos=np.bool_(True),
        stop_token_ids=np.asarray([], dtype=np.int64),
    )
    assert len(plain) == 6
    # float32(0.9) is not 0.9 exactly; the draw is the same unless a probability sits on the edge
    assert numpy_args == plain


def test_huge_seed_is_accepted_and_reproducible(model: OnnxModel) -> None:
    prompt = model.encode("hello")
    kw: dict[str, Any] = {"max_new_tokens": 5, "temperature": 1.0, "ignore_eos": True}
    assert run(model, prompt, seed=2**200, **kw) == run(model, prompt, seed=2**200, **kw)
    rows: list[tuple[int, int]] = (
        model.generate_batch([prompt, prompt], seed=np.uint64(2**64 - 1), **kw).pipe(ops.to_list()).run()
    )
    assert len(rows) == 10


@given(
    logits=st.lists(st.floats(-30, 30, allow_nan=False), min_size=2, max_size=40),
    temperature=st.floats(min_value=5e-324, max_value=1e-300),
    penalty=st.sampled_from([1.0, 1.3]),
    seed=st.integers(0, 2**70),
)
def test_a_tiny_temperature_samples_the_best_token(
    logits: list[float], temperature: float, penalty: float, seed: int
) -> None:
    """Dividing by a tiny temperature must not overflow into NaN: it is the argmax, whatever the seed."""
    x = np.asarray(logits, dtype=np.float32)
    if np.count_nonzero(x == x.max()) > 1:
        return  # a tie: any of the best is right
    sampler = Sampler(len(logits), temperature=temperature, repetition_penalty=penalty, seed=seed)
    assert sampler(x) == int(np.argmax(x))


@given(
    logits=st.lists(st.floats(0.5, 30), min_size=2, max_size=40),
    penalty=st.floats(min_value=5e-324, max_value=1e-300),
    seed=st.integers(0, 2**32),
)
def test_a_tiny_repetition_penalty_makes_seen_tokens_win(
    logits: list[float], penalty: float, seed: int
) -> None:
    """Positive logits of seen ids divided by a tiny penalty overflow; the draw stays among them."""
    x = np.asarray(logits, dtype=np.float32)
    seen = [0]
    sampler = Sampler(len(logits), temperature=0.7, repetition_penalty=penalty, seed=seed, seen=seen)
    assert sampler(x) in seen


# ---------------------------------------------------------------------------- from_pretrained names
@pytest.fixture
def cache_with_smollm2(tmp_path: Path, tiny_dir: Path) -> Path:
    """A cache holding a complete 'smollm2' (the tiny model under that name): pulling it reuses it."""
    cache = tmp_path / "cache"
    target = cache / "models" / f"{KNOWN_MODELS['smollm2'].dirname}-fp32"
    shutil.copytree(tiny_dir, target)
    (target / _COMPLETE).write_text(f"{_FORMAT}\n", encoding="utf-8")
    return cache


@pytest.fixture
def local_smollm2_dir(tmp_path: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory named 'smollm2' in the current directory."""
    work = tmp_path / "work"
    shutil.copytree(tiny_dir, work / "smollm2")
    monkeypatch.chdir(work)
    return work / "smollm2"


def test_known_name_wins_over_a_same_named_directory_and_warns(
    cache_with_smollm2: Path, local_smollm2_dir: Path
) -> None:
    with pytest.warns(UserWarning, match=r"'smollm2' is a known model and also a directory.*'\./smollm2'"):
        m = OnnxModel.from_pretrained("smollm2", cache_dir=cache_with_smollm2, provider="cpu", progress=False)
    assert m.directory.parent == cache_with_smollm2 / "models"


@pytest.mark.parametrize("spelling", ["./smollm2", "path", "absolute"])
def test_a_path_spelling_loads_the_directory(
    cache_with_smollm2: Path, local_smollm2_dir: Path, spelling: str
) -> None:
    arg: str | Path = {
        "./smollm2": "./smollm2",
        "path": Path("smollm2"),
        "absolute": str(local_smollm2_dir),
    }[spelling]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = OnnxModel.from_pretrained(arg, cache_dir=cache_with_smollm2, provider="cpu", progress=False)
    assert m.directory.resolve() == local_smollm2_dir.resolve()


def test_known_name_without_a_local_directory_does_not_warn(
    cache_with_smollm2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = OnnxModel.from_pretrained("smollm2", cache_dir=cache_with_smollm2, provider="cpu", progress=False)
    assert m.directory.parent == cache_with_smollm2 / "models"


def test_other_names(tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copytree(tiny_dir, tmp_path / "my-model")
    assert OnnxModel.from_pretrained("my-model", provider="cpu").directory == Path("my-model")
    with pytest.raises(ValueError, match="neither a model directory nor a known model"):
        OnnxModel.from_pretrained("no-such-model")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        OnnxModel.from_pretrained("./smollm2")  # a path: never the known model
    with pytest.raises(ValueError, match="empty"):
        OnnxModel.from_pretrained("")
    with pytest.raises(TypeError, match="name_or_path"):
        OnnxModel.from_pretrained(42)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- loading options, config
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"threads": -1}, ValueError, "threads must be >= 0"),
        ({"threads": True}, TypeError, "threads must be an int"),
        ({"threads": 1.5}, TypeError, "threads must be an int"),
        ({"spinning": "no"}, TypeError, "spinning must be True, False or 'step'"),
        ({"provider": "tpu"}, ValueError, "provider must be"),
    ],
)
def test_bad_load_options_raise_before_loading(
    tiny_dir: Path, tmp_path: Path, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=rf"^OnnxModel.load: {match}"):
        OnnxModel.load(tiny_dir, **kwargs)
    # from_pretrained checks them before pulling: an unusable cache is not even looked at
    (tmp_path / "file").write_text("x")
    with pytest.raises(error, match=rf"^OnnxModel.from_pretrained: {match}"):
        OnnxModel.from_pretrained("smollm2", cache_dir=tmp_path / "file" / "cache", progress=False, **kwargs)


def test_from_pretrained_checks_quantization_before_pulling(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="quantization must be one of 'fp32', 'int4', 'int4-a8', got 'int8'"):
        OnnxModel.from_pretrained(
            "smollm2",
            cache_dir=tmp_path / "file" / "cache",
            quantization="int8",  # type: ignore[arg-type]
            progress=False,
        )


def test_load_threads_zero_means_the_runtime_default(tiny_dir: Path) -> None:
    assert OnnxModel.load(tiny_dir, provider="cpu", threads=np.int64(0)).generate([1, 2], max_new_tokens=2)


GOOD_CONFIG: dict[str, Any] = {
    "vocab_size": 384,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "eos_token_id": 2,
}


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("vocab_size", None, "missing required field 'vocab_size'"),
        ("vocab_size", True, "vocab_size must be an integer"),
        ("vocab_size", 384.5, "vocab_size must be an integer"),
        ("hidden_size", "64", "hidden_size must be an integer"),
        ("num_hidden_layers", math.inf, "num_hidden_layers must be an integer"),
        ("num_attention_heads", math.nan, "num_attention_heads must be an integer"),
        ("rope_theta", "abc", "rope_theta must be a number"),
        ("rope_theta", -1.0, "rope_theta must be > 0"),
        ("rms_norm_eps", math.nan, "rms_norm_eps must be a finite number"),
        ("eos_token_id", [2, None], "eos_token_id must be an integer"),
        ("tie_word_embeddings", "yes", "tie_word_embeddings must be true or false"),
        ("max_position_embeddings", 0, "max_position_embeddings must be a positive int"),
    ],
)
def test_a_malformed_config_field_is_named(field: str, value: Any, match: str) -> None:
    with pytest.raises(ValueError, match=rf"^config\.json: {match}"):
        DecoderConfig.from_hf_dict({**GOOD_CONFIG, field: value})


def test_config_defaults_and_none_ids() -> None:
    cfg = DecoderConfig.from_hf_dict({**GOOD_CONFIG, "pad_token_id": -1, "num_key_value_heads": None})
    assert cfg.pad_token_id is None and cfg.num_kv_heads == 4 and cfg.eos_token_id == (2,)
    assert DecoderConfig.from_hf_dict({**GOOD_CONFIG, "vocab_size": 384.0}).vocab_size == 384


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("vocab_size", True),
        ("rope_theta", math.nan),
        ("rms_norm_eps", math.inf),
        ("eos_token_id", (True,)),
        ("eos_token_id", (-1,)),
        ("bos_token_id", 1.0),
        ("tie_word_embeddings", "no"),
    ],
)
def test_decoder_config_rejects_bad_fields(field: str, value: Any) -> None:
    base: dict[str, Any] = {
        "vocab_size": 384,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_layers": 2,
        "num_heads": 4,
        "num_kv_heads": 2,
    }
    with pytest.raises(ValueError, match=rf"^DecoderConfig: {field} must"):
        DecoderConfig(**{**base, field: value})


def test_the_sampler_takes_a_sampling_params() -> None:
    """``Sampler(n, params)`` samples as the keyword form does; keywords update ``params``."""
    from rxstream import SamplingParams, SamplingParamsError

    x = np.random.default_rng(0).normal(size=64).astype(np.float32)
    params = SamplingParams(temperature=1.2, top_k=10, top_p=0.9, repetition_penalty=1.3, seed=7)
    a = Sampler(64, params, seen=[1, 2])
    b = Sampler(64, temperature=1.2, top_k=10, top_p=0.9, repetition_penalty=1.3, seed=7, seen=[1, 2])
    assert [a(x) for _ in range(20)] == [b(x) for _ in range(20)]
    c = Sampler(64, params, seed=8)
    assert (c.temperature, c.top_k) == (1.2, 10)
    with pytest.raises(SamplingParamsError, match=r"^Sampler: top_p"):
        Sampler(64, params, top_p=0)
