"""Which directory :meth:`~._model.OnnxModel.from_pretrained` loads: a path, or a known model
pulled (and converted) into the cache on first use."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ._loader import resolve_name

__all__ = ["pretrained_path"]


def pretrained_path(
    name_or_path: str | Path,
    quantization: Literal["fp32", "int4"],
    cache_dir: str | Path | None,
    progress: bool,
) -> Path:
    """The model directory ``name_or_path`` names (see :meth:`OnnxModel.from_pretrained`),
    pulling a known model with ``quantization`` first; ``ValueError`` for a bad quantization,
    or int4 asked of a directory."""
    if quantization not in ("fp32", "int4"):
        raise ValueError(
            f"OnnxModel.from_pretrained: quantization must be 'fp32' or 'int4', got {quantization!r}"
        )

    pulled: list[str] = []

    def pull(name: str) -> Path:
        from ..convert import pull_model

        pulled.append(name)
        return pull_model(name, cache_dir=cache_dir, progress=progress, quantization=quantization)

    def known() -> frozenset[str]:
        from ..convert import KNOWN_MODELS

        return frozenset(KNOWN_MODELS)

    path = resolve_name(name_or_path, pull=pull, known=known)
    if quantization == "int4" and not pulled:
        names = ", ".join(sorted(known()))
        raise ValueError(
            f"OnnxModel.from_pretrained: int4 applies to the known models ({names}); "
            f"{str(path)!r} is a model directory and is loaded as it is"
        )
    return path
