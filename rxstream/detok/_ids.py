"""Token ids as the detokenizer takes them: ints or integer scalars (``numpy.int64``...), one or a
sequence per item, and the errors for anything else."""

from __future__ import annotations

import operator
from typing import Any

from rxstream._describe import describe

__all__ = ["as_token_id", "as_token_ids", "out_of_vocab", "prompt_tuple"]


def as_token_id(value: Any, owner: str = "detokenize") -> int:
    """``value`` as an int token id.

    Accepts ``int`` and integer scalars that implement ``__index__`` (``numpy.int64`` from
    numpy-based backends, a 0-d integer array); rejects ``bool`` (not an id) and everything else
    with a ``TypeError`` naming ``owner`` and the value.
    """
    if type(value) is int:
        return value
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(f"{owner}: token ids must be integers, got {describe(value)}")


def as_token_ids(value: Any, owner: str = "detokenize") -> tuple[int, ...]:
    """The ids of one item: an integer id (see :func:`as_token_id`) or a list, tuple or 1-d array
    of them. ``TypeError`` for anything else (strings, bytes, floats, bools, nested sequences)."""
    if type(value) is int:
        return (value,)
    if not isinstance(value, bool):
        try:
            return (operator.index(value),)
        except TypeError:
            pass
    if isinstance(value, list | tuple) or (hasattr(value, "__len__") and hasattr(value, "tolist")):
        items = value.tolist() if hasattr(value, "tolist") else value
        if isinstance(items, list | tuple):
            return tuple(i if type(i) is int else as_token_id(i, owner) for i in items)
    raise TypeError(f"{owner}: expected an int token id or a sequence of ids, got {describe(value)}")


def prompt_tuple(prompt_ids: Any, owner: str) -> tuple[int, ...]:
    """``prompt_ids`` (None, a sequence or an array of integer ids) as a tuple of ints."""
    if prompt_ids is None:
        return ()
    try:
        items = list(prompt_ids.tolist() if hasattr(prompt_ids, "tolist") else prompt_ids)
    except TypeError:
        raise TypeError(
            f"{owner}: prompt_ids must be a sequence of ints, got {describe(prompt_ids)}"
        ) from None
    try:
        return tuple(i if type(i) is int else as_token_id(i, owner) for i in items)
    except TypeError as exc:
        raise TypeError(f"{owner}: prompt_ids must be ints ({exc})") from None


def out_of_vocab(token_id: Any, size: int) -> ValueError:
    """The error for an id outside the vocabulary."""
    return ValueError(f"detokenize: token id {token_id!r} is outside the vocabulary (size {size})")
