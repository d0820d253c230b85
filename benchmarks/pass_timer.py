"""Time every forward pass of an :class:`~rxstream.backends.OnnxModel` inside ONNX Runtime (each
one goes through ``DecoderSession.run_bound``), for the benchmarks that compare decode steps."""

from __future__ import annotations

import time
from typing import Any

from rxstream.backends import OnnxModel


def time_passes(model: OnnxModel) -> list[float]:
    """A list that from now on collects the seconds of each of ``model``'s forward passes."""
    passes: list[float] = []
    run = model._session.run_bound

    def timed(binding: Any) -> None:
        start = time.perf_counter()
        run(binding)
        passes.append(time.perf_counter() - start)

    model._session.run_bound = timed  # type: ignore[method-assign]
    return passes
