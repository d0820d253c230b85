"""The checks of :class:`~._model.OnnxModel`'s arguments that the sampling parameters cannot make:
prompts against the vocabulary and the context, stop ids, callbacks, the ``batching`` choice."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from reactivex import abc

from rxstream import FinishCallback

from ._batch import RowFinishCallback
from ._batch_config import BatchConfig
from ._sampling import check_int

__all__ = ["batch_config", "check_call_args", "check_prompt", "check_prompts", "row_finish"]


def check_prompt(
    prompt_ids: Sequence[int], who: str, vocab_size: int, max_length: int, name: str = "prompt_ids"
) -> list[int]:
    """``prompt_ids`` as a list of ids of the vocabulary that fits the context, else an error."""
    if isinstance(prompt_ids, (str, bytes)) or not isinstance(prompt_ids, Iterable):
        raise TypeError(f"{who}: {name} must be a sequence of ints, got a {type(prompt_ids).__name__}")
    prompt = [check_int(who, f"{name}[{n}]", i) for n, i in enumerate(prompt_ids)]
    if not prompt:
        raise ValueError(f"{who}: {name} is empty")
    bad = [i for i in prompt if not 0 <= i < vocab_size]
    if bad:
        raise ValueError(
            f"{who}: {name} has token id(s) {bad[:5]} outside the vocabulary (size {vocab_size})"
        )
    if len(prompt) >= max_length:
        raise ValueError(f"{who}: {name} of {len(prompt)} tokens does not fit the context ({max_length})")
    return prompt


def check_prompts(
    prompts: Sequence[Sequence[int]], who: str, vocab_size: int, max_length: int
) -> list[list[int]]:
    """Each of ``prompts`` checked by :func:`check_prompt` (``prompts[i]``); at least one."""
    if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Iterable):
        raise TypeError(
            f"{who}: prompts must be a sequence of token-id sequences, got {type(prompts).__name__}"
        )
    rows = [check_prompt(p, who, vocab_size, max_length, f"prompts[{i}]") for i, p in enumerate(prompts)]
    if not rows:
        raise ValueError(f"{who}: no prompts")
    return rows


def check_call_args(
    who: str,
    stops: tuple[int, ...],
    on_finish: Callable[..., None] | None,
    scheduler: abc.SchedulerBase | None,
    vocab_size: int,
) -> frozenset[int]:
    """Check what the sampling parameters cannot know (stop ids against this vocabulary) and
    the callbacks of a generate call; return the stop ids."""
    bad = [s for s in stops if not 0 <= s < vocab_size]
    if bad:
        raise ValueError(f"{who}: stop_token_ids {bad[:5]} outside the vocabulary (size {vocab_size})")
    if on_finish is not None and not callable(on_finish):
        raise TypeError(f"{who}: on_finish must be callable or None, got {on_finish!r}")
    if scheduler is not None and not callable(getattr(scheduler, "schedule", None)):
        raise TypeError(f"{who}: scheduler must be a reactivex scheduler or None, got {scheduler!r}")
    return frozenset(stops)


def row_finish(on_finish: RowFinishCallback, row: int) -> FinishCallback:
    """``on_finish(row, Finish)`` as one row's ``on_finish(Finish)``."""
    return lambda finish: on_finish(row, finish)


def batch_config(who: str, batching: Any) -> BatchConfig | None:
    """``batching`` as a :class:`BatchConfig` (None: off), else ``TypeError``."""
    if isinstance(batching, BatchConfig):
        return batching
    if isinstance(batching, (bool, np.bool_)):
        return BatchConfig() if batching else None
    raise TypeError(f"{who}: batching must be a bool or a BatchConfig, got {batching!r}")
