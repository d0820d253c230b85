"""rxstream backends: sources of token ids (``Observable[int]``) from a language model."""

from ._model import OnnxModel, default_scheduler
from ._pull import default_cache_dir, pull_model
from ._tiny import build_tiny_model

__all__: list[str] = ["OnnxModel", "build_tiny_model", "default_cache_dir", "default_scheduler", "pull_model"]
