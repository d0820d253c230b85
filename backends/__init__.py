"""rxstream backends: sources of token ids (``Observable[int]``) from a language model.

* :mod:`rxstream.backends.onnx`: :class:`OnnxModel`, a decoder run by ONNX Runtime.
* :mod:`rxstream.backends.convert`: GGUF to ONNX conversion and :func:`pull_model`, the model cache.
* :mod:`rxstream.backends.openai`: :class:`OpenAIBackend`, an OpenAI-compatible server as a source.

``convert`` builds on ``onnx`` (config, directory layout); ``onnx`` reaches ``convert`` only lazily
(pulling a known model in :meth:`OnnxModel.from_pretrained`); ``openai`` stands alone. All of them
import only the core (:mod:`rxstream`), never the operators or the CLI/server.
"""

from .convert import ModelCacheError, build_tiny_model, default_cache_dir, pull_model
from .onnx import BatchConfig, OnnxModel, default_scheduler
from .openai import OpenAIBackend, OpenAIBackendError

__all__: list[str] = [
    "BatchConfig",
    "ModelCacheError",
    "OnnxModel",
    "OpenAIBackend",
    "OpenAIBackendError",
    "build_tiny_model",
    "default_cache_dir",
    "default_scheduler",
    "pull_model",
]
