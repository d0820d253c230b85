"""Which directory :meth:`~._model.OnnxModel.from_pretrained` loads: a path, or a known model
pulled (and converted) into the cache on first use."""

from __future__ import annotations

from pathlib import Path

from ._config import Quantization, check_quantization
from ._loader import resolve_name

__all__ = ["pretrained_path"]


def pretrained_path(
    name_or_path: str | Path,
    quantization: Quantization,
    cache_dir: str | Path | None,
    progress: bool,
) -> Path:
    """The model directory ``name_or_path`` names (see :meth:`OnnxModel.from_pretrained`),
    pulling a known model with ``quantization`` first; ``ValueError`` for a bad quantization,
    or int4 asked of a directory."""
    check_quantization(quantization, "OnnxModel.from_pretrained")

    pulled: list[str] = []

    def pull(name: str) -> Path:
        from ..convert import pull_model

        pulled.append(name)
        return pull_model(name, cache_dir=cache_dir, progress=progress, quantization=quantization)

    def known() -> frozenset[str]:
        from ..convert import KNOWN_MODELS

        return frozenset(KNOWN_MODELS)

    path = resolve_name(name_or_path, pull=pull, known=known)
    if quantization != "fp32" and not pulled:
        names = ", ".join(sorted(known()))
        raise ValueError(
            f"OnnxModel.from_pretrained: {quantization} applies to the known models ({names}); "
            f"{str(path)!r} is a model directory and is loaded as it is"
        )
    return path
