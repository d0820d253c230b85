"""Where a batch's rows keep their KV positions: :class:`BatchKV`, the scheduler's cache in either
layout (slots of one buffer per KV tensor, or a left-padded batch) and the prefix store.

The scheduler decides (who is admitted, who prefills, who decodes, who leaves); this class moves
the positions those decisions need: sizing the buffers, copying a prompt or a shared prefix,
compacting when rows leave, and the prefill and decode passes over the cache.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ._batch_config import MIN_SHARED_PREFIX, BatchConfig
from ._kvcache import KVOps, PaddedCache, SlotCache, batch_layout, position_bytes
from ._prefix_store import PrefixStore, common_prefix
from ._session import DecoderSession

if TYPE_CHECKING:
    from ._scheduler import BatchRow

__all__ = ["CAPACITY_STEP", "BatchKV", "slot_count"]

log = logging.getLogger("rxstream.backends")

CAPACITY_STEP = 64
"""Slot capacity grows in multiples of this many positions."""


def slot_count(rows: int, max_batch: int) -> int:
    """Slots allocated for ``rows``: the next power of two, at most ``max_batch``."""
    return min(1 << max(rows - 1, 0).bit_length(), max(max_batch, rows))


class BatchKV:
    """The KV cache of one batch, in the layout its graph allows (see the module documentation).

    Raises:
        ValueError: the graph cannot batch rows of different lengths.
    """

    def __init__(
        self,
        graph: DecoderSession,
        config: BatchConfig,
        max_length: int,
        twin: Callable[[], DecoderSession | None] | None = None,
    ) -> None:
        layout = batch_layout(graph)
        if layout is None:
            raise ValueError("BatchScheduler: this graph cannot batch rows of different lengths")
        self.layout = layout
        self.config = config
        self.max_length = max_length
        ops = KVOps(graph)
        self.slots = SlotCache(graph, ops) if layout == "slots" else None
        self.padded = PaddedCache(graph, ops) if layout == "padded" else None
        keep = config.prefix_cache_bytes if config.share_prefix and self.slots is not None else 0
        self.store = PrefixStore(keep, position_bytes(graph), MIN_SHARED_PREFIX)
        """Ended rows' KV positions for later prompts (kept while the worker is idle too)."""
        self._open_twin = twin if self.slots is not None else None
        self._twin: DecoderSession | None = None
        self._twin_lock = threading.Lock()

    def twin(self, open_it: bool = True) -> DecoderSession | None:
        """The float twin of the graph (an exact int4 build's float weights, for passes of several
        rows; see :data:`~._config.FLOAT_MODEL_FILE`): opened on first use when ``open_it``; None
        where there is none (or it failed to open: the graph itself then runs every pass)."""
        if self._twin is None and self._open_twin is not None and open_it:
            with self._twin_lock:
                opener, self._open_twin = self._open_twin, None
                if opener is not None:
                    try:
                        self._twin = opener()
                    except Exception:  # the quantized graph still runs every pass
                        log.exception("batch scheduler: opening the float graph failed")
        return self._twin

    # ------------------------------------------------------------------ sizing
    def footprint(self, rows: Sequence[BatchRow]) -> int:
        """KV positions allocated for ``rows`` (slots x capacity, or rows x width when padded)."""
        if not rows:
            return 0
        if self.slots is not None:
            return slot_count(len(rows), self.config.max_batch) * self.capacity_for(rows)
        # padded: every row spans the batch's width, which grows by one column per step until the
        # longest-running row ends (holes of paused rows are not foreseen)
        width = max(self.padded.width if self.padded else 0, *(len(r.prompt) for r in rows))
        remaining = max(r.reserved - max(r.length, len(r.prompt)) for r in rows)
        return len(rows) * (width + remaining)

    def capacity_for(self, rows: Sequence[BatchRow]) -> int:
        need = max(r.reserved for r in rows)
        return min(-(-need // CAPACITY_STEP) * CAPACITY_STEP, max(self.max_length, need))

    def fit_slots(self, rows: Sequence[BatchRow], live: int) -> None:
        """Size the slot buffers for the admitted ``rows``, keeping slots ``0 .. live-1``.

        They grow to exactly what the rows need (so the allocation stays within
        ``max_kv_tokens``, checked at admission) and shrink once they hold four times the slots or
        twice the capacity the rows need; when no row is left they stay for the next one (the
        worker frees them when it ends, see :meth:`release`).
        """
        cache = self.slots
        assert cache is not None
        if not rows:
            return
        slots = slot_count(len(rows), self.config.max_batch)
        capacity = self.capacity_for(rows)
        grow = slots > cache.slots or capacity > cache.capacity
        shrink = cache.slots >= 4 * slots or cache.capacity >= 2 * capacity + CAPACITY_STEP
        if grow or shrink:
            cache.reserve(slots, capacity, live)

    def stats(self) -> dict[str, Any]:
        """The cache's part of the scheduler's stats: its buffers (slots or rows, capacity or
        width, allocated positions, bytes), the prefix store, and whether the float twin is open."""
        if self.slots is not None:
            nbytes, slots, capacity = self.slots.nbytes, self.slots.slots, self.slots.capacity
        else:
            assert self.padded is not None
            nbytes, slots, capacity = self.padded.nbytes, self.padded.rows, self.padded.width
        store = self.store
        return {
            "slots": slots,
            "kv_capacity": capacity,
            "kv_allocated_tokens": slots * capacity,
            "kv_bytes": nbytes,
            "prefix_cache_entries": len(store),
            "prefix_cache_tokens": store.tokens,
            "prefix_cache_bytes": store.nbytes,
            "max_prefix_cache_bytes": store.budget,
            "prefix_cache_hits": store.hits,
            "float_graph": self.twin(open_it=False) is not None,
        }

    def release(self) -> None:
        if self.slots is not None:
            self.slots.release()
        if self.padded is not None:
            self.padded.release()

    # ------------------------------------------------------------------ copies
    def copy_prompt(self, source: BatchRow, row: BatchRow, length: int) -> None:
        """Give ``row`` the first ``length`` cached positions of ``source`` (a decoding row)."""
        if self.slots is not None:
            self.slots.copy_slot(source.slot, row.slot, length)
        else:
            assert self.padded is not None
            start = int(np.argmax(self.padded.mask[source.slot] > 0))
            past = self.padded.ops.gather(self.padded.values, [source.slot], start, start + length)
            row.slot = self.padded.rows
            self.padded.join(past, length, 1)

    def join_prompt(self, row: BatchRow, group: Sequence[BatchRow], length: int) -> None:
        """``row`` read its prompt: give every member of ``group`` (``row`` first) its positions."""
        if self.slots is not None:
            for f in group[1:]:
                self.slots.copy_slot(row.slot, f.slot, length)
        else:
            assert self.padded is not None and row.past is not None
            first = self.padded.rows
            self.padded.join(row.past, length, len(group))
            row.past = None
            for i, member in enumerate(group):
                member.slot = first + i

    def share_prefix(self, row: BatchRow, rows: Sequence[BatchRow]) -> int:
        """Start ``row`` from the longest prefix of its prompt that another of ``rows`` holds in
        the cache (a decoding row: its prompt; a prefilling one: what it has read so far) or that
        the prefix store holds; how many positions it got (0: none, it reads its whole prompt)."""
        best: BatchRow | None = None
        best_length = MIN_SHARED_PREFIX - 1
        limit = len(row.prompt) - 1  # the last prompt token is computed: its logits are needed
        for other in rows:
            if other is row or other.cancelled:
                continue
            if other.state == "decode":
                cached = len(other.prompt)
            elif other.state == "prefill":
                cached = other.prefilled
            else:
                continue
            length = common_prefix(row.prompt, other.prompt, min(limit, cached))
            if length > best_length:
                best, best_length = other, length
        stored, stored_length = self.store.best(row.prompt, limit) if len(self.store) else (None, 0)
        if stored is not None and stored_length > best_length:
            assert self.slots is not None
            try:
                self.slots.load(self.store.take(stored, stored_length), len(stored), stored_length, row.slot)
            except Exception:  # read the whole prompt instead
                log.exception("batch scheduler: copying a stored prompt prefix failed")
                return 0
            row.prefilled = stored_length
            return stored_length
        if best is None:
            return 0
        try:
            if self.slots is not None:
                self.slots.copy_slot(best.slot, row.slot, best_length)
            else:
                assert self.padded is not None
                if best.state == "decode":
                    start = int(np.argmax(self.padded.mask[best.slot] > 0))
                    values, taken = self.padded.values, [best.slot]
                else:
                    assert best.past is not None
                    start, values, taken = 0, best.past, [0]
                row.past = self.padded.ops.gather(values, taken, start, start + best_length)
        except Exception:  # the copy failed: read the whole prompt instead
            log.exception("batch scheduler: copying a shared prompt prefix failed")
            row.past = None
            return 0
        row.prefilled = best_length
        return best_length

    # ------------------------------------------------------------------ leaving
    def compact(self, rows: list[BatchRow], gone: Sequence[BatchRow]) -> list[BatchRow]:
        """The rows left once ``gone`` leave ``rows``: slots keep the ended rows' positions in the
        prefix store, then move the last rows into the holes (``rows[i].slot == i`` again) and
        refit; a padded batch drops their rows."""
        if self.slots is not None:
            for row in gone:
                self.keep_prefix(row)
            for row in sorted(gone, key=lambda r: -r.slot):
                last = rows[-1]
                if last is not row:
                    if last.state in ("decode", "prefill"):
                        held = last.length if last.state == "decode" else last.prefilled
                        self.slots.copy_slot(last.slot, row.slot, held)
                    last.slot = row.slot
                    rows[row.slot] = last
                rows.pop()
            self.fit_slots(rows, len(rows))
            return rows
        kept = [r for r in rows if r not in gone]
        if self.padded is not None:
            in_batch = sorted((r for r in rows if r.slot >= 0), key=lambda r: r.slot)
            keep = [r.slot for r in in_batch if r not in gone]
            self.padded.keep(keep)
            for index, r in enumerate(r for r in in_batch if r not in gone):
                r.slot = index
        return kept

    def keep_prefix(self, row: BatchRow) -> None:
        """Copy what an ended row holds in its slot into the prefix store."""
        if self.store.budget == 0 or row.failed or row.slot < 0:
            return
        held = row.length if row.length else row.prefilled
        if held < MIN_SHARED_PREFIX:
            return
        tokens = tuple(row.prompt[:held]) + tuple(row.generated[: max(held - len(row.prompt), 0)])
        if len(tokens) != held:  # pragma: no cover - bookkeeping guard
            return
        slots = self.slots
        assert slots is not None
        try:
            self.store.add(tokens, lambda: slots.extract(row.slot, held))
        except Exception:  # keeping it is an optimization: the row still leaves
            log.exception("batch scheduler: keeping an ended row's prefix failed")

    # ------------------------------------------------------------------ passes
    def prefill_pass(self, row: BatchRow, ids: np.ndarray) -> npt.NDArray[np.float32]:
        """Read prompt ``ids`` for ``row`` after its ``prefilled`` positions; their logits."""
        done, seq = row.prefilled, ids.shape[1]
        if self.slots is not None:
            mask = np.ones((1, done + seq), np.int64)
            positions = np.arange(done, done + seq, dtype=np.int64)[None, :]
            return self.slots.run(row.slot, ids, mask, positions, graph=self.twin(open_it=False))
        assert self.padded is not None
        logits, row.past = self.padded.prefill(row.past, ids, done)
        return np.asarray(logits, dtype=np.float32)

    def draft_pass(self, row: BatchRow, tokens: Sequence[int]) -> npt.NDArray[np.float32]:
        """Read ``tokens`` (the row's next id, then a draft) after the row's ``length`` positions in
        one pass (slot layout); the logits after each of them, ``[len(tokens), vocab]``. Positions
        of draft ids that are not kept stay past the row's length, unused, overwritten later."""
        assert self.slots is not None
        seq, done = len(tokens), row.length
        ids = np.asarray([tokens], dtype=np.int64)
        mask = np.ones((1, done + seq), np.int64)
        positions = np.arange(done, done + seq, dtype=np.int64)[None, :]
        return self.slots.run(row.slot, ids, mask, positions, keep=seq)[0, -seq:]

    def decode_pass(
        self, rows: Sequence[BatchRow], batch: Sequence[BatchRow]
    ) -> list[npt.NDArray[np.float32]]:
        """One decode step of ``rows`` (the others of ``batch``, the admitted rows, skip it)."""
        if self.slots is not None:
            count = max(r.slot for r in rows) + 1
            if count == 1:  # a lone row: the plain loop's arrays
                row = rows[0]
                ids = np.array([[row.next_token]], np.int64)
                mask = np.ones((1, row.length + 1), np.int64)
                out = self.slots.run(0, ids, mask, np.array([[row.length]], np.int64))
                return [out[0, 0]]
            members = batch[:count]
            taking = {id(r) for r in rows}
            # a row that skips this step writes one unused position past its length (overwritten
            # when it goes on); its logits are dropped
            lengths = np.asarray(
                [r.length if r.state == "decode" else r.prefilled for r in members], np.int64
            )
            ids = np.asarray([[r.next_token if id(r) in taking else 0] for r in members], np.int64)
            width = int(lengths.max()) + 1
            mask = (np.arange(width)[None, :] <= lengths[:, None]).astype(np.int64)
            twin = self.twin()  # several rows: float weights where the graph has them
            out = self.slots.run(0, ids, mask, lengths[:, None], graph=twin)
            return [out[r.slot, 0] for r in rows]
        assert self.padded is not None
        taking = {id(r) for r in rows}
        members = sorted((r for r in batch if r.slot >= 0), key=lambda r: r.slot)
        ids = np.asarray([[r.next_token if id(r) in taking else 0] for r in members], np.int64)
        take = np.asarray([1 if id(r) in taking else 0 for r in members], np.int64)
        positions = np.asarray([[r.length] for r in members], np.int64)
        out = self.padded.step(ids, take, positions)
        return [np.asarray(out[r.slot, -1], dtype=np.float32) for r in rows]
