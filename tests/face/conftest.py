"""Fixtures for the face tests: the default model's real tokenizer (pulled once, cached)."""

from __future__ import annotations

import os

import pytest
from tokenizers import Tokenizer


@pytest.fixture(scope="session")
def smollm2_tokenizer() -> Tokenizer:
    """SmolLM2's tokenizer (the project's default model), from the model cache (pulled if needed)."""
    from rxstream.backends import pull_model
    from rxstream.backends.convert._download import DownloadError

    try:
        path = pull_model("smollm2", progress=False, quantization="fp32")
    except DownloadError as exc:
        if not os.environ.get("CI"):
            pytest.skip(f"offline: cannot download the default model: {exc}")
        raise
    return Tokenizer.from_file(str(path / "tokenizer.json"))
