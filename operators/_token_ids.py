"""Validation of token-id items (an ``int``, or a sequence of ints from speculative decoding)."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import SupportsIndex, cast, overload

from rxstream._piece import Piece
from rxstream.detok import as_token_ids

from ._sink import describe

__all__ = ["TokenItem", "as_id_tuple", "head", "normalize_ids"]

TokenItem = int | Sequence[int]
"""One item of a token-id stream: one id, or several ids at once."""


def as_id_tuple(owner: str, item: object) -> tuple[int, ...] | None:
    """``None`` for a single integer id, else the item's ids; TypeError for anything else.

    Integer ids may be ``int`` or integer scalars such as ``numpy.int64`` (numpy-based backends);
    a sequence item may be a list, tuple or 1-d integer array, or a :class:`~rxstream.Piece` (its
    ids: a backend's item with log-probabilities). ``bool`` is not an id.
    """
    if type(item) is int:
        return None
    if isinstance(item, Piece):
        return as_token_ids(item.ids, owner)
    if not isinstance(item, bool):
        try:
            operator.index(cast(SupportsIndex, item))  # numpy integer scalars too
            return None
        except TypeError:
            pass
    return as_token_ids(item, owner)


def normalize_ids(ids: int | Iterable[int], owner: str) -> frozenset[int]:
    """Check stop token ids given at construction."""
    items = [ids] if isinstance(ids, int) else list(ids)
    for i in items:
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"{owner}: token ids must be int, got {describe(i)}")
        if i < 0:
            raise ValueError(f"{owner}: token ids must be >= 0, got {i}")
    return frozenset(items)


@overload
def head(item: Piece, ids: tuple[int, ...], n: int) -> Piece: ...
@overload
def head(item: TokenItem, ids: tuple[int, ...], n: int) -> TokenItem: ...
def head(item: TokenItem | Piece, ids: tuple[int, ...], n: int) -> TokenItem | Piece:
    """The first ``n`` ids of a sequence item, in the item's own kind: a list stays a list, a
    :class:`~rxstream.Piece` keeps the per-token data of those ids (and its text only when whole)."""
    if isinstance(item, Piece):
        if n >= item.size:
            return item
        return item.tokens_slice(0, n)
    if isinstance(item, list):
        return list(ids[:n])
    return ids[:n]
