"""SamplingParams: every field checked once, where the value is built, naming the field."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rxstream import SamplingParams, SamplingParamsError


@given(
    max_new_tokens=st.integers(0, 10**6),
    temperature=st.floats(0, 100),
    top_k=st.integers(0, 10**6),
    top_p=st.floats(0, 1, exclude_min=True),
    repetition_penalty=st.floats(0, 100, exclude_min=True),
    seed=st.none() | st.integers(0, 2**70),
    stops=st.lists(st.integers(0, 10**6), max_size=5),
    ignore_eos=st.booleans(),
)
def test_valid_values_are_kept(
    max_new_tokens: int,
    temperature: float,
    top_k: int,
    top_p: float,
    repetition_penalty: float,
    seed: int | None,
    stops: list[int],
    ignore_eos: bool,
) -> None:
    p = SamplingParams(
        max_new_tokens, temperature, top_k, top_p, repetition_penalty, seed, tuple(stops), ignore_eos
    )
    assert (p.max_new_tokens, p.temperature, p.top_k, p.top_p) == (max_new_tokens, temperature, top_k, top_p)
    assert (p.repetition_penalty, p.seed, p.stop_token_ids, p.ignore_eos) == (
        repetition_penalty,
        seed,
        tuple(stops),
        ignore_eos,
    )
    assert p.greedy == (temperature == 0)
    assert p.replace() == p and hash(p) == hash(p.replace())


BAD: list[tuple[str, Any]] = [
    ("max_new_tokens", -1),
    ("max_new_tokens", 2.0),
    ("max_new_tokens", True),
    ("max_new_tokens", "5"),
    ("temperature", -0.1),
    ("temperature", math.nan),
    ("temperature", math.inf),
    ("temperature", 10**400),
    ("temperature", np.bool_(True)),
    ("temperature", "hot"),
    ("temperature", False),
    ("top_k", -1),
    ("top_k", 1.5),
    ("top_p", 0),
    ("top_p", 1.01),
    ("top_p", math.nan),
    ("repetition_penalty", 0),
    ("repetition_penalty", -1),
    ("repetition_penalty", math.inf),
    ("seed", -5),
    ("seed", 1.0),
    ("seed", True),
    ("stop_token_ids", [1, -2]),
    ("stop_token_ids", "12"),
    ("stop_token_ids", 7),
    ("stop_token_ids", [1.0]),
    ("ignore_eos", 1),
]


@pytest.mark.parametrize(("field", "value"), BAD)
def test_bad_values_name_their_field(field: str, value: Any) -> None:
    with pytest.raises(SamplingParamsError) as info:
        SamplingParams(**{field: value})
    assert info.value.field == field
    assert str(info.value).startswith(field)
    assert isinstance(info.value, ValueError)
    with pytest.raises(SamplingParamsError):  # replace() checks too
        SamplingParams().replace(**{field: value})


def test_numpy_numbers_become_python_numbers() -> None:
    p = SamplingParams(
        max_new_tokens=np.int64(5),
        temperature=np.float32(0.5),
        seed=np.uint32(7),
        stop_token_ids=np.array([3, 4]),  # type: ignore[arg-type]
    )
    assert type(p.max_new_tokens) is int and type(p.temperature) is float and type(p.seed) is int
    assert p.stop_token_ids == (3, 4) and all(type(i) is int for i in p.stop_token_ids)


def test_keyword_form() -> None:
    base = SamplingParams(temperature=0.7)
    assert SamplingParams.from_kwargs(base, {"seed": 3}, "generate") == SamplingParams(
        temperature=0.7, seed=3
    )
    assert SamplingParams.from_kwargs(None, {}, "generate") == SamplingParams()
    with pytest.raises(TypeError, match=r"generate: unexpected keyword argument.*temprature"):
        SamplingParams.from_kwargs(None, {"temprature": 1}, "generate")
    with pytest.raises(SamplingParamsError, match=r"^generate: seed must be >= 0") as info:
        SamplingParams.from_kwargs(None, {"seed": -5}, "generate")
    assert info.value.field == "seed" and not isinstance(info.value, TypeError)
    with pytest.raises(TypeError, match=r"^generate: seed must be an int") as typed:
        SamplingParams.from_kwargs(None, {"seed": 1.0}, "generate")
    assert isinstance(typed.value, SamplingParamsError)
    default = SamplingParams(temperature=0.5)
    assert SamplingParams.from_kwargs(None, {"seed": 1}, "generate", default) == default.replace(seed=1)


def test_frozen() -> None:
    with pytest.raises(AttributeError):
        SamplingParams().temperature = 1.0  # type: ignore[misc]
