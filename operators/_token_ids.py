"""Validation of token-id items (an ``int``, or a sequence of ints from speculative decoding)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ._sink import describe

__all__ = ["TokenItem", "as_id_tuple", "normalize_ids"]

TokenItem = int | Sequence[int]
"""One item of a token-id stream: one id, or several ids at once."""


def as_id_tuple(owner: str, item: Any) -> tuple[int, ...] | None:
    """``None`` for a single int id, else the item's ids; TypeError for anything else."""
    if type(item) is int:
        return None
    if isinstance(item, tuple | list) or (hasattr(item, "__len__") and hasattr(item, "tolist")):
        ids = tuple(item.tolist() if hasattr(item, "tolist") else item)
        for i in ids:
            if type(i) is not int:
                raise TypeError(f"{owner}: token ids must be int, got {describe(i)} in {describe(item)}")
        return ids
    if isinstance(item, int) and not isinstance(item, bool):
        return None
    raise TypeError(f"{owner}: expected an int token id or a sequence of ids, got {describe(item)}")


def normalize_ids(ids: int | Iterable[int], owner: str) -> frozenset[int]:
    """Check stop token ids given at construction."""
    items = [ids] if isinstance(ids, int) else list(ids)
    for i in items:
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"{owner}: token ids must be int, got {describe(i)}")
        if i < 0:
            raise ValueError(f"{owner}: token ids must be >= 0, got {i}")
    return frozenset(items)
