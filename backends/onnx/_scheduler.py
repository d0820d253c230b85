"""Continuous batching: :class:`BatchScheduler` runs every active generation of a model in one
decode step per iteration.

One worker thread per model (started when a generation arrives, gone :data:`LINGER_SECONDS` after
the last one left, so a client's next request finds it running and the KV buffers allocated; not
a daemon: like the thread pool a generation ran on before, the interpreter waits for it at exit,
so it is never inside ONNX Runtime while the process tears down; a lingering worker is woken at
exit and ends at once) loops:

1. **admit** waiting rows, first come first served, while the batch has room (``max_batch``
   rows) and the KV cache stays within ``max_kv_tokens`` positions;
2. **prefill** prompts in chunks of ``prefill_chunk`` tokens, at least one chunk and about
   ``prefill_chunk`` tokens per iteration, so a long prompt delays the others' next token by one
   chunk at a time instead of by its whole prompt; a row whose prompt is done samples its first
   token and joins the decode batch. When every row in the batch has just sampled its first
   token, the worker waits :data:`FIRST_TOKEN_YIELD_SECONDS` (or until a new row arrives)
   before the next step, so the consumers (a server's text lanes and event loop) deliver the
   first token while the cores are free instead of competing with the step's threads;
3. **decode** one step for every decoding row at once, then each row samples with its own
   sampler, stop ids, EOS ids, budget and seed, and emits its id (on this thread).

A row that ends (EOS, stop id, budget, context, failure) or is disposed leaves at once and its
KV cache is freed; the rest go on. Rows whose prompts are equal token for token and arrive together
(``n > 1``: :meth:`~rxstream.backends.OnnxModel.generate_n`) are prefilled once: the others start
from a copy of that KV cache and of its last logits. A row whose prompt begins with tokens another
row holds in the cache (``share_prefix``: a chat template's system prompt) copies the longest
such prefix (at least ``MIN_SHARED_PREFIX`` tokens) when its prefill starts and reads
only the rest; the source may itself still be reading its prompt (what it has read counts), or
have ended: in the slot layout a row that ends leaves its positions (prompt and fed-back answer)
in a :class:`~._prefix_store.PrefixStore` of ``prefix_cache_bytes``, so a chat's next turn, which
repeats the conversation so far, reads only its new message. A row can be paused by its
consumer (``ready`` returns False while it is behind): it skips decode steps without holding
the others.

Exactness: each row's sampler sees its own logits row; a row's prefill is chunked the same way
alone or in company, except that a shared prefix is not read again (its positions then come
from another pass over the same tokens). Measured |batched - alone| logit differences
(tests/backends/test_scheduler.py, test_scheduler_real.py, prefix sharing on): 0 for SmolLM2's
float32 GroupQueryAttention graph (batched products round each row as a one-row product does),
2.5e-6 for the tiny GroupQueryAttention graph and 4.8e-6 for the tiny plain-attention graph (left
padding changes the softmax's reduction width), 6.8e-5 for SmolLM2's int4 build (its several-row
passes run on its float twin, the same weights as float ``MatMul``; 1.7e-4 before, through the
4-bit kernel's several-row path). Greedy ids are equal
on every test prompt; a near tie could still flip where logits differ.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from rxstream import Finish, FinishReason
from rxstream.structured import fill_masks

from ._batch_config import (
    DEFAULT_KV_TOKENS,
    DEFAULT_PREFIX_CACHE_BYTES,
    FIRST_TOKEN_YIELD_SECONDS,
    LINGER_SECONDS,
    MIN_SHARED_PREFIX,
    SNAPSHOT_SECONDS,
    BatchConfig,
)
from ._batch_kv import BatchKV
from ._batch_row import BatchRow
from ._draft import Drafts
from ._session import DecoderSession

__all__ = [
    "DEFAULT_KV_TOKENS",
    "DEFAULT_PREFIX_CACHE_BYTES",
    "MIN_SHARED_PREFIX",
    "BatchConfig",
    "BatchRow",
    "BatchScheduler",
]

log = logging.getLogger("rxstream.backends")

_SCHEDULERS: weakref.WeakSet[BatchScheduler] = weakref.WeakSet()
_EXITING = threading.Event()


def _end_lingering() -> None:
    """At interpreter exit (before it joins the workers): idle workers end now."""
    _EXITING.set()
    for scheduler in list(_SCHEDULERS):
        with scheduler._cond:
            scheduler._cond.notify_all()


_register_atexit = getattr(threading, "_register_atexit", None)  # what concurrent.futures uses
if _register_atexit is not None:
    _register_atexit(_end_lingering)


class BatchScheduler:
    """Continuous batching over one model session (see the module documentation)."""

    def __init__(
        self,
        graph: DecoderSession,
        config: BatchConfig,
        max_length: int,
        twin: Callable[[], DecoderSession | None] | None = None,
    ) -> None:
        self._kv = BatchKV(graph, config, max_length, twin)
        """The rows' KV positions, either layout, and the prefix store (kept while idle too)."""
        self.graph = graph
        self.config = config
        self.max_length = max_length
        self.kv_budget = config.kv_budget(max_length)
        self.layout = self._kv.layout
        self._cond = threading.Condition()
        self._waiting: deque[BatchRow] = deque()
        self._rows: list[BatchRow] = []
        """Admitted rows (worker thread only); slot layout: ``_rows[i].slot == i``."""
        self._thread: threading.Thread | None = None
        self._steps = 0
        self._prefill_tokens = 0
        self._shared_tokens = 0
        self._drafts = Drafts(config.draft_tokens_for(graph))
        self._peak_rows = 0
        self._peak_kv = 0
        self._snapshot: dict[str, Any] = {}
        self._snapshot_at = 0.0
        self._idle_since: float | None = None
        self._update_snapshot()
        _SCHEDULERS.add(self)

    # ------------------------------------------------------------------ any thread
    def submit(self, row: BatchRow) -> None:
        """Queue a row; the worker admits it at its next iteration."""
        row.call.track(1)
        with self._cond:
            self._waiting.append(row)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="rxstream-batch", daemon=False)
                self._thread.start()
            self._cond.notify()

    def cancel(self, row: BatchRow) -> None:
        """Cancel a row (its subscription was disposed): it leaves before the next step."""
        row.cancelled = True
        try:
            row.finish(Finish(FinishReason.CANCELLED))
        except Exception:  # the subscriber is gone; nothing to route it to
            log.exception("generate: on_finish raised on cancellation")
        with self._cond:
            if row.state == "waiting" and row in self._waiting:
                self._waiting.remove(row)
                row.state = "done"
                row.done = True
                row.call.track(-1)
            self._cond.notify()

    def prepare(self) -> None:
        """Open the float twin now (see :meth:`BatchKV.twin <._batch_kv.BatchKV.twin>`)."""
        self._kv.twin()
        self._update_snapshot()

    def stats(self) -> dict[str, Any]:
        """Occupancy and KV memory, as of the worker's last iteration (JSON-ready)."""
        with self._cond:
            return {**self._snapshot, "waiting": len(self._waiting)}

    @property
    def running(self) -> bool:
        """Whether the worker thread is alive."""
        with self._cond:
            return self._thread is not None

    # ------------------------------------------------------------------ worker thread
    def _work(self) -> None:
        try:
            while self._iterate():
                pass
        except BaseException as exc:  # a bug in the loop itself: end every row with it
            log.exception("batch scheduler failed")
            error = exc if isinstance(exc, Exception) else RuntimeError(str(exc))
            rows, self._rows = self._rows, []
            self._kv.release()
            with self._cond:
                waiting = list(self._waiting)
                self._waiting.clear()
            for row in [*rows, *waiting]:
                if row.state != "done":
                    row.fail(error)
                if not row.done:
                    row.done = True
                    row.call.track(-1)
            self._update_snapshot()
            with self._cond:
                self._thread = None
                if self._waiting:  # submitted meanwhile: a fresh worker takes them
                    self._thread = threading.Thread(target=self._work, name="rxstream-batch", daemon=False)
                    self._thread.start()

    def _iterate(self) -> bool:
        """One iteration; False when nothing is left (the thread then ends)."""
        changed = self._reap()
        with self._cond:
            admitted, ended = self._admit()
            if not self._rows and not admitted and not self._waiting and not ended:
                now = time.monotonic()
                if self._idle_since is None:
                    self._idle_since = now
                left = self._idle_since + LINGER_SECONDS - now
                if left > 0 and not _EXITING.is_set():
                    self._cond.wait(left)
                    return True
                self._idle_since = None
                self._kv.release()
                self._thread = None
                self._update_snapshot()
                return False
            self._idle_since = None
        for row, error in ended:
            if error is None:
                row.end(Finish(FinishReason.LENGTH))
            else:
                row.fail(error)
            row.done = True
            row.call.track(-1)
        for row in admitted:
            self._place(row)
        if changed or admitted or ended or time.monotonic() - self._snapshot_at >= SNAPSHOT_SECONDS:
            self._update_snapshot()
        prefilling = [r for r in self._rows if r.state == "prefill" and not r.cancelled]
        decoding = [r for r in self._rows if r.state == "decode" and not r.cancelled and r.consumer_ready()]
        if not prefilling and not decoding:
            with self._cond:  # every row is paused (or cancelled): wait for a change
                self._cond.wait(0.005)
            return True
        if prefilling:
            self._prefill(prefilling)
            started = sum(1 for r in prefilling if r.prefilled == len(r.prompt))  # first tokens out
            if started and started == len(self._rows):  # no one else waits for the next step
                with self._cond:  # the consumers take the first tokens while the cores are free
                    self._cond.wait(FIRST_TOKEN_YIELD_SECONDS)
        decoding = [r for r in decoding if not r.cancelled and r.state == "decode"]
        if decoding:
            self._decode(decoding)
        if self._reap() or prefilling:
            self._update_snapshot()
        return True

    # ------------------------------------------------------------------ admission
    def _admit(self) -> tuple[list[BatchRow], list[tuple[BatchRow, Exception | None]]]:
        """Rows taken from the queue now (under the lock), first come first served; and rows that
        end without running (no budget: None; cannot fit: the error), to report outside the lock."""
        admitted: list[BatchRow] = []
        ended: list[tuple[BatchRow, Exception | None]] = []
        # rows whose prompt a newcomer can share: one being prefilled (the newcomer waits for it),
        # or one that holds its whole prompt in the cache (the newcomer copies it)
        leaders: dict[tuple[int, ...], BatchRow] = {}
        for r in self._rows:
            shareable = r.state == "prefill" or (r.state == "decode" and r.prompt_logits is not None)
            if shareable and not r.cancelled:
                leaders.setdefault(r.key, r)
        while self._waiting:
            row = self._waiting[0]
            if row.call.params.max_new_tokens == 0:
                self._waiting.popleft()
                ended.append((row, None))
                continue
            count = len(self._rows) + len(admitted)
            if count >= self.config.max_batch:
                break
            need = self._kv.footprint([*self._rows, *admitted, row])
            if need > self.kv_budget:
                if count == 0:  # it cannot fit even alone
                    self._waiting.popleft()
                    error = ValueError(
                        f"generate: prompt plus max_new_tokens needs {need} KV positions, more than "
                        f"the batch's max_kv_tokens ({self.kv_budget})"
                    )
                    ended.append((row, error))
                    continue
                break
            self._waiting.popleft()
            key = row.key
            leader = leaders.get(key)
            if leader is not None and leader.state == "decode":
                row.leader = leader
                row.state = "copy"
            elif leader is not None:
                row.leader = leader
                leader.followers.append(row)
                row.state = "follow"
            else:
                leaders[key] = row
                row.state = "prefill"
            admitted.append(row)
        return admitted, ended

    def _place(self, row: BatchRow) -> None:
        """Give an admitted row its place in the cache."""
        self._rows.append(row)
        self._peak_rows = max(self._peak_rows, len(self._rows))
        if self._kv.slots is not None:
            row.slot = len(self._rows) - 1
            self._kv.fit_slots(self._rows, len(self._rows) - 1)
        if row.state == "copy":
            self._copy_prompt(row)

    def _copy_prompt(self, row: BatchRow) -> None:
        """Start ``row`` from the cached prompt of its leader (a decoding row with an equal prompt)."""
        source = row.leader
        assert source is not None and source.prompt_logits is not None
        length = len(row.prompt)
        try:
            self._kv.copy_prompt(source, row, length)
        except Exception as exc:
            row.fail(exc)
            return
        row.leader = None
        row.prefilled = row.length = length
        row.prompt_logits = source.prompt_logits
        row.state = "decode"
        row.emit(source.prompt_logits)

    # ------------------------------------------------------------------ leaving
    def _reap(self) -> bool:
        """Remove rows that ended or were cancelled; free their cache (compacting the slots).
        Whether any left."""
        gone = [r for r in self._rows if r.cancelled or r.state == "done"]
        if not gone:
            return False
        for row in gone:
            row.hand_on_followers()
        gone = [r for r in self._rows if r.cancelled or r.state == "done"]
        self._rows = self._kv.compact(self._rows, gone)
        for row in gone:
            row.past = None
            row.state = "done"
            if not row.done:
                row.done = True
                row.call.track(-1)
        return True

    # ------------------------------------------------------------------ prefill
    def _prefill(self, rows: list[BatchRow]) -> None:
        """About ``prefill_chunk`` prompt tokens, whole chunks, oldest rows first."""
        budget = self.config.prefill_chunk
        for row in rows:
            if budget <= 0:
                break
            chunk = self.config.prefill_chunk
            if row.prefilled == 0 and self.config.share_prefix:
                self._shared_tokens += self._kv.share_prefix(row, self._rows)
            while budget > 0 and row.prefilled < len(row.prompt) and not row.cancelled:
                end = min(row.prefilled + chunk, len(row.prompt))
                ids = np.asarray([row.prompt[row.prefilled : end]], dtype=np.int64)
                try:
                    logits = self._prefill_pass(row, ids)
                except Exception as exc:
                    row.fail_group(exc)
                    break
                budget -= end - row.prefilled
                self._prefill_tokens += end - row.prefilled
                row.prefilled = end
                if end == len(row.prompt):
                    self._start_decoding(row, logits[0, -1])

    def _prefill_pass(self, row: BatchRow, ids: np.ndarray) -> npt.NDArray[np.float32]:
        return self._kv.prefill_pass(row, ids)

    def _start_decoding(self, row: BatchRow, last: npt.NDArray[np.float32]) -> None:
        """The prompt is in the cache: copy it to the followers, sample every first token."""
        followers = [f for f in row.followers if not f.cancelled and f.state == "follow"]
        row.followers = []
        group = [row, *followers]
        length = len(row.prompt)
        self._kv.join_prompt(row, group, length)
        prompt_logits = np.array(last, dtype=np.float32, copy=True)
        for member in group:
            member.prompt_logits = prompt_logits
            member.leader = None
            member.prefilled = length
            member.length = length
            member.state = "decode"
        for member in group:
            member.emit(last)

    # ------------------------------------------------------------------ decode
    def _decode(self, rows: list[BatchRow]) -> None:
        """One decode step for ``rows`` (the others skip it); a row alone in the batch may read a
        draft with its next id (:class:`~._draft.Drafts`)."""
        alone = len(rows) == 1 and len(self._rows) == 1
        if alone and self._kv.slots is not None and self._drafts.step(rows[0], self._kv):
            self._steps += 1
            return
        start = time.perf_counter()
        try:
            logits = self._kv.decode_pass(rows, self._rows)
        except Exception as exc:
            for row in rows:
                row.fail(exc)
            return
        if alone:
            self._drafts.timed_step(time.perf_counter() - start)
        self._steps += 1
        constrained = [r.constraint for r in rows if r.constraint is not None and not r.cancelled]
        if len(constrained) > 1:  # the rows' masks at once, in parallel
            fill_masks(constrained)
        for row, row_logits in zip(rows, logits, strict=True):
            row.length += 1
            if not row.cancelled:
                row.emit(row_logits)

    # ------------------------------------------------------------------ stats
    def _update_snapshot(self) -> None:
        """Rebuild what :meth:`stats` reports: on every change of the batch (admission, a row
        leaving, a prompt pass) and otherwise every :data:`SNAPSHOT_SECONDS` (not each step)."""
        self._snapshot_at = time.monotonic()
        rows = self._rows
        kv = self._kv.stats()
        self._peak_kv = max(self._peak_kv, kv["kv_allocated_tokens"])
        snapshot = {
            "layout": self.layout,
            "rows": len(rows),
            "decoding": sum(1 for r in rows if r.state == "decode"),
            "prefilling": sum(1 for r in rows if r.state in ("prefill", "follow", "copy")),
            "max_batch": self.config.max_batch,
            "peak_rows": self._peak_rows,
            **kv,
            "peak_kv_allocated_tokens": self._peak_kv,
            "kv_used_tokens": sum(r.length if r.state == "decode" else r.prefilled for r in rows),
            "max_kv_tokens": self.kv_budget,
            "prefill_chunk": self.config.prefill_chunk,
            "decode_steps": self._steps,
            "prefill_tokens": self._prefill_tokens,
            "shared_prefix_tokens": self._shared_tokens,
            "draft_tokens": self._drafts.max_draft,
            "drafted_tokens": self._drafts.drafted,
            "kept_draft_tokens": self._drafts.kept,
        }
        with self._cond:
            self._snapshot = snapshot
