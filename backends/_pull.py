"""Kept for ``rxstream models list``, which reads :data:`KNOWN_MODELS` from here; the pull itself
lives in :mod:`rxstream.backends.convert` (import from there)."""

from .convert import KNOWN_MODELS

__all__ = ["KNOWN_MODELS"]
