"""A model's generation_config.json decides how it samples by default (as vLLM reads it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from reactivex import operators as ops

from rxstream import SamplingParams
from rxstream.backends import OnnxModel, build_tiny_model
from rxstream.backends.onnx._config import sampling_defaults


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, SamplingParams()),
        ({"eos_token_id": 2, "do_sample": False}, SamplingParams()),
        ({"do_sample": False, "temperature": 0.6, "top_p": 0.9}, SamplingParams()),
        ({"do_sample": False, "repetition_penalty": 1.2}, SamplingParams(repetition_penalty=1.2)),
        ({"do_sample": True, "temperature": 0.6, "top_p": 0.95}, SamplingParams(temperature=0.6, top_p=0.95)),
        ({"temperature": 0.7, "top_k": 20}, SamplingParams(temperature=0.7, top_k=20)),
        ({"top_p": 0.8}, SamplingParams(temperature=1.0, top_p=0.8)),
        ({"max_new_tokens": 64}, SamplingParams(max_new_tokens=64)),
        ({"temperature": None, "top_p": None}, SamplingParams()),
    ],
)
def test_sampling_defaults(config: dict[str, Any], expected: SamplingParams) -> None:
    assert sampling_defaults(config) == expected


def test_a_bad_field_names_the_file_and_field() -> None:
    with pytest.raises(ValueError, match=r"^g.json: top_p must be in \(0, 1\]"):
        sampling_defaults({"top_p": 5}, "g.json")


def test_generate_samples_as_the_model_says(tmp_path: Path) -> None:
    directory = build_tiny_model(tmp_path / "tiny", seed=3)
    greedy = OnnxModel.load(directory, provider="cpu")
    assert greedy.default_sampling == SamplingParams()
    config_file = directory / "generation_config.json"
    config = json.loads(config_file.read_text())
    config.update({"do_sample": True, "temperature": 1.3, "top_k": 40})
    config_file.write_text(json.dumps(config))
    sampling = OnnxModel.load(directory, provider="cpu")
    assert sampling.default_sampling == SamplingParams(temperature=1.3, top_k=40)
    prompt = greedy.encode("hello there")

    def ids(model: OnnxModel, **kw: Any) -> list[int]:
        result: list[int] = model.generate(prompt, max_new_tokens=24, **kw).pipe(ops.to_list()).run()
        return result

    seeded = ids(sampling, seed=11)
    assert seeded == ids(greedy, temperature=1.3, top_k=40, seed=11)  # the model's defaults were used
    assert seeded != ids(greedy, seed=11)  # greedy differs, so the test can tell
    assert ids(sampling, temperature=0.0) == ids(greedy)  # a keyword overrides the default
    assert ids(sampling, params=SamplingParams(max_new_tokens=24)) == ids(greedy)  # params replace them
