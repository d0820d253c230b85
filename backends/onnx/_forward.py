"""A raw forward pass with numpy arrays (:meth:`~._model.OnnxModel.forward`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ._session import DecoderSession

__all__ = ["forward_pass"]


def forward_pass(
    graph: DecoderSession,
    ids: npt.NDArray[np.int64],
    attention_mask: npt.ArrayLike | None,
    position_ids: npt.ArrayLike | None,
    past: Sequence[np.ndarray] | None,
) -> tuple[npt.NDArray[np.float32], list[np.ndarray]]:
    """Run ``graph`` on ``ids`` ``[batch, seq]``: ``(logits [B, S, V], present)``. ``attention_mask``
    defaults to all ones over past + new tokens, ``position_ids`` to the positions after the cache,
    ``past`` (None) to an empty cache."""
    batch, seq = ids.shape
    past_len = 0 if past is None else int(past[0].shape[2])
    mask = (
        np.ones((batch, past_len + seq), np.int64)
        if attention_mask is None
        else np.asarray(attention_mask, dtype=np.int64)
    )
    feeds: dict[str, np.ndarray] = {"input_ids": ids, "attention_mask": mask}
    if graph.has_position_ids:
        feeds["position_ids"] = (
            np.broadcast_to(np.arange(past_len, past_len + seq), (batch, seq)).copy()
            if position_ids is None
            else np.asarray(position_ids, dtype=np.int64)
        )
    if past is None:
        past = [
            np.zeros((batch, graph.kv_heads, 0, graph.head_dim), graph.kv_dtype) for _ in graph.past_names
        ]
    feeds.update(zip(graph.past_names, past, strict=True))
    graph.all_logits(feeds)
    outs = graph.session.run(["logits", *graph.present_names], feeds)
    return np.asarray(outs[0], dtype=np.float32), [np.asarray(o) for o in outs[1:]]
