"""rxstream backends: sources of token ids (``Observable[int]``) from a language model.

* :mod:`rxstream.backends.onnx`: :class:`OnnxModel`, a decoder run by ONNX Runtime.
* :mod:`rxstream.backends.convert`: GGUF to ONNX conversion and :func:`pull_model`, the model cache.
* :mod:`rxstream.backends.openai`: :class:`OpenAIBackend`, an OpenAI-compatible server as a source.
* :mod:`rxstream.backends.gateway`: :class:`GatewayModel`, remote engines (vLLM, ``rxstream serve``)
  as a :class:`~rxstream.GenerativeModel` that exchanges token ids with them.

``convert`` builds on ``onnx`` (config, directory layout); ``onnx`` reaches ``convert`` only lazily
(pulling a known model in :meth:`OnnxModel.from_pretrained`); ``openai`` stands alone;
``gateway`` reads the engines' streams with ``openai``'s client. All of them
import only the core (:mod:`rxstream`), never the operators or the CLI/server.

Each subpackage is imported on first use of one of its names and needs its pip extra: ``onnx`` and
``convert`` the ``onnx`` one (``pip install 'rxstream[onnx]'``), ``openai`` the ``openai`` one,
``gateway`` the ``gateway`` one;
without it the import raises :class:`~rxstream._extras.MissingExtraError` (an ``ImportError``
whose one-line message names the pip command).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .convert import ModelCacheError, build_tiny_model, default_cache_dir, pull_model
    from .gateway import GatewayError, GatewayModel
    from .onnx import BatchConfig, OnnxModel, default_scheduler
    from .openai import OpenAIBackend, OpenAIBackendError

_HOMES: dict[str, str] = {
    "BatchConfig": "onnx",
    "OnnxModel": "onnx",
    "default_scheduler": "onnx",
    "ModelCacheError": "convert",
    "build_tiny_model": "convert",
    "default_cache_dir": "convert",
    "pull_model": "convert",
    "OpenAIBackend": "openai",
    "OpenAIBackendError": "openai",
    "GatewayError": "gateway",
    "GatewayModel": "gateway",
}
"""Each name of :data:`__all__` -> the subpackage it comes from (imported on first use)."""

__all__: list[str] = [
    "BatchConfig",
    "GatewayError",
    "GatewayModel",
    "ModelCacheError",
    "OnnxModel",
    "OpenAIBackend",
    "OpenAIBackendError",
    "build_tiny_model",
    "default_cache_dir",
    "default_scheduler",
    "pull_model",
]


def __getattr__(name: str) -> object:
    """Import a subpackage, or the subpackage a name of :data:`__all__` lives in, on first use
    (so that each needs only its own extra)."""
    if name in ("onnx", "convert", "openai", "gateway"):
        return importlib.import_module(f"{__name__}.{name}")
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
