"""The batch scheduler's draft passes: :class:`Drafts`, prompt lookup for a row decoding alone.

When one row is left in the batch (one stream: ``rxstream chat``, a server with one client), its
:class:`~._lookup.PromptLookup` may propose ids that followed an earlier occurrence of its last
ids. The row's next id and that draft are read in one pass (:meth:`BatchKV.draft_pass
<._batch_kv.BatchKV.draft_pass>`), and the row emits from each position's logits in turn, with
its own sampler, while the sampler picks the draft's next id. Every id emitted is sampled from the
logits of exactly the ids before it, in the order plain decoding samples them, so the row emits
what one step at a time would (the same ids, logprobs, seeded samples, stops and budget); the KV
positions of draft ids not kept lie past the row's length, unused, and are overwritten later.

A draft pass is wider than a plain step, and the extra width costs more on some builds than on
others (measured on SmolLM2, 2 threads: fp32 about 1.2x a plain step for 5 ids, the exact int4
build 2x, its 4-bit kernel dequantizing for several rows). :class:`Drafts` times both kinds of
pass and skips a draft whose expected kept ids (:attr:`PromptLookup.expected
<._lookup.PromptLookup.expected>`) would not pay for it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ._lookup import PromptLookup

if TYPE_CHECKING:
    from ._batch_kv import BatchKV
    from ._batch_row import BatchRow

__all__ = ["Drafts"]

_WEIGHT = 0.2
"""The weight of the newest pass in the moving averages of pass times."""


class Drafts:
    """One scheduler's drafting: its bound, pass timings and counts (worker thread only)."""

    __slots__ = ("_draft_s", "_step_s", "drafted", "kept", "max_draft")

    def __init__(self, max_draft: int) -> None:
        self.max_draft = max_draft
        """Draft ids per pass at most (0: never draft)."""
        self.drafted = 0
        """Draft ids read so far."""
        self.kept = 0
        """Draft ids emitted so far."""
        self._step_s = 0.0
        """A lone row's plain decode pass, seconds (moving average; 0: not measured yet)."""
        self._draft_s = 0.0
        """A draft pass, seconds (moving average; 0: not measured yet)."""

    def timed_step(self, seconds: float) -> None:
        """A lone row's plain decode pass took ``seconds``."""
        self._step_s = _average(self._step_s, seconds)

    def step(self, row: BatchRow, kv: BatchKV) -> bool:
        """Run a draft pass for ``row`` (decoding alone, slot layout) and emit what it keeps;
        False when there is no draft worth reading (then the plain step runs)."""
        if self.max_draft == 0 or row.constraint is not None:
            return False
        # room: the KV slot (the row's reservation) and the ids its budget still allows
        room = min(row.reserved - row.length - 1, row.call.params.max_new_tokens - row.produced - 1)
        if room < 1:
            return False
        lookup = row.lookup
        if lookup is None:
            lookup = row.lookup = PromptLookup(row.prompt, self.max_draft)
            lookup.extend(row.generated)
        draft = lookup.draft(room)
        if not draft:
            return False
        # a draft pays when the ids it is expected to add outweigh what its wider pass costs
        # more than a plain step
        cost = self._draft_s / self._step_s if self._step_s and self._draft_s else 1.0
        if 1.0 + lookup.expected < cost:
            lookup.skip()
            return False
        start = time.perf_counter()
        try:
            logits = kv.draft_pass(row, [row.next_token, *draft])
        except Exception as exc:
            row.fail(exc)
            return True
        self._draft_s = _average(self._draft_s, time.perf_counter() - start)
        self.drafted += len(draft)
        kept = 0
        for i, row_logits in enumerate(logits):
            row.length += 1
            if row.cancelled:
                break
            row.emit(row_logits)
            if row.state != "decode" or row.cancelled or i == len(draft) or row.next_token != draft[i]:
                break
            kept += 1
        lookup.kept(kept)
        self.kept += kept
        return True


def _average(mean: float, sample: float) -> float:
    """A moving average of pass times (the first sample starts it)."""
    return sample if mean == 0.0 else mean + _WEIGHT * (sample - mean)
