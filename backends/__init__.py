"""rxstream backends: sources of token ids (``Observable[int]``) from a language model."""

from ._model import OnnxModel, default_scheduler
from ._pull import default_cache_dir, pull_model
from ._tiny import build_tiny_model
from .openai import OpenAIBackend, OpenAIBackendError

__all__: list[str] = [
    "OnnxModel",
    "OpenAIBackend",
    "OpenAIBackendError",
    "build_tiny_model",
    "default_cache_dir",
    "default_scheduler",
    "pull_model",
]
