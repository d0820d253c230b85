"""Continuous batching: :class:`BatchScheduler` runs every active generation of a model in one
decode step per iteration.

One worker thread per model (started when a generation arrives, gone when none is left; not a
daemon: like the thread pool a generation ran on before, the interpreter waits for it at exit,
so it is never inside ONNX Runtime while the process tears down) loops:

1. **admit** waiting rows, first come first served, while the batch has room (``max_batch``
   rows) and the KV cache stays within ``max_kv_tokens`` positions;
2. **prefill** prompts in chunks of ``prefill_chunk`` tokens, at least one chunk and about
   ``prefill_chunk`` tokens per iteration, so a long prompt delays the others' next token by one
   chunk at a time instead of by its whole prompt; a row whose prompt is done samples its first
   token and joins the decode batch;
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
padding changes the softmax's reduction width), 1.7e-4 for SmolLM2's int4 build (its 4-bit kernel
takes another path for several rows). Greedy ids are equal
on every test prompt; a near tie could still flip where logits differ.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
import reactivex
from reactivex import Observable, abc
from reactivex.disposable import Disposable

from rxstream import Finish, FinishCallback, FinishOnce, FinishReason

from ._generation import GenerateCall, make_sampler, token_item
from ._kvcache import KVOps, PaddedCache, SlotCache, batch_layout, position_bytes
from ._prefix_store import PrefixStore, common_prefix
from ._sampling import check_int
from ._session import DecoderSession

__all__ = [
    "DEFAULT_KV_TOKENS",
    "DEFAULT_PREFIX_CACHE_BYTES",
    "MIN_SHARED_PREFIX",
    "BatchConfig",
    "BatchRow",
    "BatchScheduler",
    "batched_observable",
]

log = logging.getLogger("rxstream.backends")

_CAPACITY_STEP = 64
"""Slot capacity grows in multiples of this many positions."""

DEFAULT_KV_TOKENS = 65536
"""KV-cache positions a batch holds at most by default (or the model's context, if larger)."""

DEFAULT_PREFIX_CACHE_BYTES = 128 << 20
"""Bytes of ended rows' KV positions a batch keeps by default for later prompts (128 MiB)."""

MIN_SHARED_PREFIX = 4
"""Shorter common prefixes are prefilled anew (the copy would cost about what it saves)."""


@dataclass(frozen=True, slots=True)
class BatchConfig:
    """How a model batches concurrent generations (:meth:`OnnxModel.load`'s ``batching``).

    Attributes:
        max_batch: rows decoded together at most; more wait (first come, first served).
        max_kv_tokens: KV-cache positions at most, all rows together, counted as allocated
            (slots x capacity: rows are padded to the longest reservation, prompt plus
            ``max_new_tokens``); a row that cannot fit even alone fails with a ``ValueError``.
            None (default): 65536, or the model's context length when that is larger (one
            request of the whole context always fits).
        prefill_chunk: prompt tokens per prefill pass. Larger chunks prefill faster (bigger matrix
            products), smaller ones let the decoding rows' next tokens out sooner while a long
            prompt is read (a decode step waits for at most about one chunk of prefill).
        share_prefix: a prompt that begins with tokens another row in the batch already holds
            in its cache (a chat template's system prompt), or that the prefix store kept
            from a row that ended (see ``prefix_cache_bytes``), starts from a copy of those
            positions and prefills only the rest (at least ``MIN_SHARED_PREFIX`` tokens
            shared; the last prompt token is always computed).
        prefix_cache_bytes: with ``share_prefix``, the KV positions of rows that ended (their
            prompt and the answer tokens fed back) are kept up to this many bytes, least
            recently used dropped first, for the prompts that begin with them (a chat's next
            turn repeats the conversation so far). 0 keeps none. Counted apart from
            ``max_kv_tokens``; ``batch_stats()`` reports it. Slot layout (GroupQueryAttention
            graphs) only.
    """

    max_batch: int = 16
    max_kv_tokens: int | None = None
    prefill_chunk: int = 256
    share_prefix: bool = True
    prefix_cache_bytes: int = DEFAULT_PREFIX_CACHE_BYTES

    def __post_init__(self) -> None:
        for name in ("max_batch", "max_kv_tokens", "prefill_chunk"):
            value = getattr(self, name)
            if value is not None or name != "max_kv_tokens":
                check_int("BatchConfig", name, value, minimum=1)
        check_int("BatchConfig", "prefix_cache_bytes", self.prefix_cache_bytes, minimum=0)
        if not isinstance(self.share_prefix, bool):
            raise TypeError(f"BatchConfig: share_prefix must be a bool, got {self.share_prefix!r}")

    def kv_budget(self, context_length: int) -> int:
        """:attr:`max_kv_tokens`, with None resolved for a model of ``context_length`` tokens."""
        if self.max_kv_tokens is not None:
            return self.max_kv_tokens
        return max(DEFAULT_KV_TOKENS, context_length)


class BatchRow:
    """One generation in the scheduler: its prompt, sampler, state and observer."""

    __slots__ = (
        "call",
        "cancelled",
        "done",
        "failed",
        "finish",
        "followers",
        "generated",
        "key",
        "leader",
        "length",
        "next_token",
        "observer",
        "past",
        "prefilled",
        "produced",
        "prompt",
        "prompt_logits",
        "ready",
        "reserved",
        "sampler",
        "slot",
        "state",
    )

    def __init__(
        self,
        call: GenerateCall,
        prompt: list[int],
        observer: abc.ObserverBase[Any],
        on_finish: FinishCallback | None,
        seed: int | None,
        ready: Callable[[], bool] | None,
    ) -> None:
        self.call = call
        self.prompt = prompt
        self.key = tuple(prompt)
        """The prompt as a hashable key (rows with equal keys share a prefill)."""
        self.observer = observer
        self.finish = FinishOnce(on_finish)
        self.sampler = make_sampler(call, prompt, seed)
        self.ready = ready
        self.reserved = min(len(prompt) + call.params.max_new_tokens, call.max_length)
        self.state = "waiting"  # waiting, prefill, follow, decode, done
        self.cancelled = False
        self.done = False
        """Set once the row has left the scheduler (its KV cache freed)."""
        self.prefilled = 0
        self.length = 0
        self.produced = 0
        self.generated: list[int] = []
        """The ids emitted so far (fed back one step later: the cache holds all but the last)."""
        self.failed = False
        self.next_token = 0
        self.slot = -1
        self.past: list[ort.OrtValue] | None = None
        self.leader: BatchRow | None = None
        """The row whose prompt this one shares: prefilling (state ``follow``) or done with its
        prompt (state ``copy``, until placed)."""
        self.followers: list[BatchRow] = []
        self.prompt_logits: npt.NDArray[np.float32] | None = None
        """The logits after the prompt (what the first id is sampled from), kept for rows that
        share the prompt later."""


class BatchScheduler:
    """Continuous batching over one model session (see the module documentation)."""

    def __init__(self, graph: DecoderSession, config: BatchConfig, max_length: int) -> None:
        layout = batch_layout(graph)
        if layout is None:
            raise ValueError("BatchScheduler: this graph cannot batch rows of different lengths")
        self.graph = graph
        self.config = config
        self.max_length = max_length
        self.kv_budget = config.kv_budget(max_length)
        self.layout = layout
        ops = KVOps(graph)
        self._slots = SlotCache(graph, ops) if layout == "slots" else None
        self._padded = PaddedCache(graph, ops) if layout == "padded" else None
        keep = config.prefix_cache_bytes if config.share_prefix and self._slots is not None else 0
        self._store = PrefixStore(keep, position_bytes(graph), MIN_SHARED_PREFIX)
        """Ended rows' KV positions for later prompts (kept while the worker is idle too)."""
        self._cond = threading.Condition()
        self._waiting: deque[BatchRow] = deque()
        self._rows: list[BatchRow] = []
        """Admitted rows (worker thread only); slot layout: ``_rows[i].slot == i``."""
        self._thread: threading.Thread | None = None
        self._steps = 0
        self._prefill_tokens = 0
        self._shared_tokens = 0
        self._peak_rows = 0
        self._peak_kv = 0
        self._snapshot: dict[str, Any] = {}
        self._update_snapshot()

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
            self._release()
            with self._cond:
                waiting = list(self._waiting)
                self._waiting.clear()
            for row in [*rows, *waiting]:
                if row.state != "done":
                    self._fail(row, error)
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
        self._reap()
        with self._cond:
            admitted, ended = self._admit()
            if not self._rows and not admitted and not self._waiting and not ended:
                self._release()
                self._thread = None
                self._update_snapshot()
                return False
        for row, error in ended:
            if error is None:
                self._end(row, Finish(FinishReason.LENGTH))
            else:
                self._fail(row, error)
            row.done = True
            row.call.track(-1)
        for row in admitted:
            self._place(row)
        self._update_snapshot()
        prefilling = [r for r in self._rows if r.state == "prefill" and not r.cancelled]
        decoding = [r for r in self._rows if r.state == "decode" and not r.cancelled and _ready(r)]
        if not prefilling and not decoding:
            with self._cond:  # every row is paused (or cancelled): wait for a change
                self._cond.wait(0.005)
            return True
        if prefilling:
            self._prefill(prefilling)
        decoding = [r for r in decoding if not r.cancelled and r.state == "decode"]
        if decoding:
            self._decode(decoding)
        self._reap()
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
            need = self._footprint([*self._rows, *admitted, row])
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

    def _footprint(self, rows: Sequence[BatchRow]) -> int:
        """KV positions allocated for ``rows`` (slots x capacity, or rows x width when padded)."""
        if not rows:
            return 0
        if self._slots is not None:
            return _slot_count(len(rows), self.config.max_batch) * self._capacity_for(rows)
        # padded: every row spans the batch's width, which grows by one column per step until the
        # longest-running row ends (holes of paused rows are not foreseen)
        width = max(self._padded.width if self._padded else 0, *(len(r.prompt) for r in rows))
        remaining = max(r.reserved - max(r.length, len(r.prompt)) for r in rows)
        return len(rows) * (width + remaining)

    def _capacity_for(self, rows: Sequence[BatchRow]) -> int:
        need = max(r.reserved for r in rows)
        return min(-(-need // _CAPACITY_STEP) * _CAPACITY_STEP, max(self.max_length, need))

    def _place(self, row: BatchRow) -> None:
        """Give an admitted row its place in the cache."""
        self._rows.append(row)
        self._peak_rows = max(self._peak_rows, len(self._rows))
        if self._slots is not None:
            row.slot = len(self._rows) - 1
            self._fit_slots(len(self._rows) - 1)
        if row.state == "copy":
            self._copy_prompt(row)

    def _copy_prompt(self, row: BatchRow) -> None:
        """Start ``row`` from the cached prompt of its leader (a decoding row with an equal prompt)."""
        source = row.leader
        assert source is not None and source.prompt_logits is not None
        length = len(row.prompt)
        try:
            if self._slots is not None:
                self._slots.copy_slot(source.slot, row.slot, length)
            else:
                assert self._padded is not None
                start = int(np.argmax(self._padded.mask[source.slot] > 0))
                past = self._padded.ops.gather(self._padded.values, [source.slot], start, start + length)
                row.slot = self._padded.rows
                self._padded.join(past, length, 1)
        except Exception as exc:
            self._fail(row, exc)
            return
        row.leader = None
        row.prefilled = row.length = length
        row.prompt_logits = source.prompt_logits
        row.state = "decode"
        self._emit(row, source.prompt_logits)

    def _fit_slots(self, live: int) -> None:
        """Size the slot buffers for the admitted rows, keeping slots ``0 .. live-1``.

        They grow to exactly what the rows need (so the allocation stays within
        ``max_kv_tokens``, checked at admission) and shrink once they hold four times the slots or
        twice the capacity the rows need; when no row is left they are freed.
        """
        cache = self._slots
        assert cache is not None
        if not self._rows:
            cache.release()
            return
        slots = _slot_count(len(self._rows), self.config.max_batch)
        capacity = self._capacity_for(self._rows)
        grow = slots > cache.slots or capacity > cache.capacity
        shrink = cache.slots >= 4 * slots or cache.capacity >= 2 * capacity + _CAPACITY_STEP
        if grow or shrink:
            cache.reserve(slots, capacity, live)

    # ------------------------------------------------------------------ leaving
    def _reap(self) -> None:
        """Remove rows that ended or were cancelled; free their cache (compacting the slots)."""
        gone = [r for r in self._rows if r.cancelled or r.state == "done"]
        if not gone:
            return
        for row in gone:
            self._handle_orphans(row)
        gone = [r for r in self._rows if r.cancelled or r.state == "done"]
        if self._slots is not None:
            for row in gone:
                self._keep_prefix(row)
            for row in sorted(gone, key=lambda r: -r.slot):
                last = self._rows[-1]
                if last is not row:
                    if last.state in ("decode", "prefill"):
                        held = last.length if last.state == "decode" else last.prefilled
                        self._slots.copy_slot(last.slot, row.slot, held)
                    last.slot = row.slot
                    self._rows[row.slot] = last
                self._rows.pop()
            self._fit_slots(len(self._rows))
        else:
            kept = [r for r in self._rows if r not in gone]
            if self._padded is not None:
                in_batch = sorted((r for r in self._rows if r.slot >= 0), key=lambda r: r.slot)
                keep = [r.slot for r in in_batch if r not in gone]
                self._padded.keep(keep)
                for index, r in enumerate(r for r in in_batch if r not in gone):
                    r.slot = index
            self._rows = kept
        for row in gone:
            row.past = None
            row.state = "done"
            if not row.done:
                row.done = True
                row.call.track(-1)

    def _keep_prefix(self, row: BatchRow) -> None:
        """Copy what an ended row holds in its slot into the prefix store."""
        if self._store.budget == 0 or row.failed or row.slot < 0:
            return
        held = row.length if row.length else row.prefilled
        if held < MIN_SHARED_PREFIX:
            return
        tokens = tuple(row.prompt[:held]) + tuple(row.generated[: max(held - len(row.prompt), 0)])
        if len(tokens) != held:  # pragma: no cover - bookkeeping guard
            return
        slots = self._slots
        assert slots is not None
        try:
            self._store.add(tokens, lambda: slots.extract(row.slot, held))
        except Exception:  # keeping it is an optimization: the row still leaves
            log.exception("batch scheduler: keeping an ended row's prefix failed")

    def _handle_orphans(self, row: BatchRow) -> None:
        """A prefilling leader left: its first follower prefills instead, the others follow it."""
        if not row.followers:
            return
        heirs = [f for f in row.followers if not f.cancelled and f.state == "follow"]
        row.followers = []
        if not heirs:
            return
        new_leader = heirs[0]
        new_leader.leader = None
        new_leader.state = "prefill"
        new_leader.followers = heirs[1:]
        for f in heirs[1:]:
            f.leader = new_leader

    def _release(self) -> None:
        if self._slots is not None:
            self._slots.release()
        if self._padded is not None:
            self._padded.release()

    # ------------------------------------------------------------------ prefill
    def _prefill(self, rows: list[BatchRow]) -> None:
        """About ``prefill_chunk`` prompt tokens, whole chunks, oldest rows first."""
        budget = self.config.prefill_chunk
        for row in rows:
            if budget <= 0:
                break
            chunk = self.config.prefill_chunk
            if row.prefilled == 0 and self.config.share_prefix:
                self._share_prefix(row)
            while budget > 0 and row.prefilled < len(row.prompt) and not row.cancelled:
                end = min(row.prefilled + chunk, len(row.prompt))
                ids = np.asarray([row.prompt[row.prefilled : end]], dtype=np.int64)
                try:
                    logits = self._prefill_pass(row, ids)
                except Exception as exc:
                    self._fail_group(row, exc)
                    break
                budget -= end - row.prefilled
                self._prefill_tokens += end - row.prefilled
                row.prefilled = end
                if end == len(row.prompt):
                    self._start_decoding(row, logits[0, -1])

    def _share_prefix(self, row: BatchRow) -> None:
        """Start ``row`` from the longest prefix of its prompt that another row holds in the cache
        (a decoding row: its prompt; a prefilling one: what it has read so far) or that the prefix
        store holds."""
        best: BatchRow | None = None
        best_length = MIN_SHARED_PREFIX - 1
        limit = len(row.prompt) - 1  # the last prompt token is computed: its logits are needed
        for other in self._rows:
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
        stored, stored_length = self._store.best(row.prompt, limit) if len(self._store) else (None, 0)
        if stored is not None and stored_length > best_length:
            assert self._slots is not None
            try:
                self._slots.load(
                    self._store.take(stored, stored_length), len(stored), stored_length, row.slot
                )
            except Exception:  # read the whole prompt instead
                log.exception("batch scheduler: copying a stored prompt prefix failed")
                return
            row.prefilled = stored_length
            self._shared_tokens += stored_length
            return
        if best is None:
            return
        try:
            if self._slots is not None:
                self._slots.copy_slot(best.slot, row.slot, best_length)
            else:
                assert self._padded is not None
                if best.state == "decode":
                    start = int(np.argmax(self._padded.mask[best.slot] > 0))
                    values, rows = self._padded.values, [best.slot]
                else:
                    assert best.past is not None
                    start, values, rows = 0, best.past, [0]
                row.past = self._padded.ops.gather(values, rows, start, start + best_length)
        except Exception:  # the copy failed: read the whole prompt instead
            log.exception("batch scheduler: copying a shared prompt prefix failed")
            row.past = None
            return
        row.prefilled = best_length
        self._shared_tokens += best_length

    def _prefill_pass(self, row: BatchRow, ids: np.ndarray) -> npt.NDArray[np.float32]:
        done, seq = row.prefilled, ids.shape[1]
        if self._slots is not None:
            mask = np.ones((1, done + seq), np.int64)
            positions = np.arange(done, done + seq, dtype=np.int64)[None, :]
            return self._slots.run(row.slot, ids, mask, positions)
        assert self._padded is not None
        logits, row.past = self._padded.prefill(row.past, ids, done)
        return np.asarray(logits, dtype=np.float32)

    def _start_decoding(self, row: BatchRow, last: npt.NDArray[np.float32]) -> None:
        """The prompt is in the cache: copy it to the followers, sample every first token."""
        followers = [f for f in row.followers if not f.cancelled and f.state == "follow"]
        row.followers = []
        group = [row, *followers]
        length = len(row.prompt)
        if self._slots is not None:
            for f in followers:
                self._slots.copy_slot(row.slot, f.slot, length)
        else:
            assert self._padded is not None and row.past is not None
            first = self._padded.rows
            self._padded.join(row.past, length, len(group))
            row.past = None
            for i, member in enumerate(group):
                member.slot = first + i
        prompt_logits = np.array(last, dtype=np.float32, copy=True)
        for member in group:
            member.prompt_logits = prompt_logits
            member.leader = None
            member.prefilled = length
            member.length = length
            member.state = "decode"
        for member in group:
            self._emit(member, last)

    # ------------------------------------------------------------------ decode
    def _decode(self, rows: list[BatchRow]) -> None:
        """One decode step for ``rows`` (the others skip it)."""
        try:
            logits = self._decode_pass(rows)
        except Exception as exc:
            for row in rows:
                self._fail(row, exc)
            return
        self._steps += 1
        for row, row_logits in zip(rows, logits, strict=True):
            row.length += 1
            if not row.cancelled:
                self._emit(row, row_logits)

    def _decode_pass(self, rows: list[BatchRow]) -> list[npt.NDArray[np.float32]]:
        taking = {id(r) for r in rows}
        if self._slots is not None:
            count = max(r.slot for r in rows) + 1
            members = self._rows[:count]
            # a row that skips this step writes one unused position past its length (overwritten
            # when it goes on); its logits are dropped
            lengths = np.asarray(
                [r.length if r.state == "decode" else r.prefilled for r in members], np.int64
            )
            ids = np.asarray([[r.next_token if id(r) in taking else 0] for r in members], np.int64)
            width = int(lengths.max()) + 1
            mask = (np.arange(width)[None, :] <= lengths[:, None]).astype(np.int64)
            out = self._slots.run(0, ids, mask, lengths[:, None])
            return [out[r.slot, 0] for r in rows]
        assert self._padded is not None
        members = sorted((r for r in self._rows if r.slot >= 0), key=lambda r: r.slot)
        ids = np.asarray([[r.next_token if id(r) in taking else 0] for r in members], np.int64)
        take = np.asarray([1 if id(r) in taking else 0 for r in members], np.int64)
        positions = np.asarray([[r.length] for r in members], np.int64)
        out = self._padded.step(ids, take, positions)
        return [np.asarray(out[r.slot, -1], dtype=np.float32) for r in rows]

    # ------------------------------------------------------------------ a row's tokens and end
    def _emit(self, row: BatchRow, logits: npt.NDArray[np.float32]) -> None:
        """Sample the row's next id from its logits; emit it or end the row."""
        call = row.call
        try:
            token = row.sampler(logits)
        except Exception as exc:
            self._fail(row, exc)
            return
        if token in call.stops:
            self._end(row, Finish(FinishReason.STOP, stop=token))
            return
        if token in call.eos:
            self._end(row, Finish(FinishReason.EOS))
            return
        if row.cancelled:
            return
        try:
            row.observer.on_next(token if call.logprobs is None else token_item(call, token, logits))
        except Exception as exc:
            self._fail(row, exc)
            return
        row.produced += 1
        row.generated.append(token)
        row.next_token = token
        if row.cancelled:
            return
        if row.produced >= call.params.max_new_tokens or len(row.prompt) + row.produced >= call.max_length:
            self._end(row, Finish(FinishReason.LENGTH))

    def _end(self, row: BatchRow, finish: Finish) -> None:
        row.state = "done"
        try:
            owned = row.finish(finish)
        except Exception as exc:  # on_finish raised: the stream still ends, with that error
            row.observer.on_error(exc)
            return
        if owned:
            row.observer.on_completed()

    def _fail(self, row: BatchRow, exc: Exception) -> None:
        row.state = "done"
        row.failed = True
        try:
            owned = row.finish(Finish(FinishReason.ERROR, error=exc))
        except Exception:  # claimed, but on_finish raised: the error still goes on
            log.exception("generate: on_finish raised on a failure")
            owned = True
        if owned:
            row.observer.on_error(exc)

    def _fail_group(self, row: BatchRow, exc: Exception) -> None:
        followers = [f for f in row.followers if f.state == "follow"]
        row.followers = []
        for member in [row, *followers]:
            self._fail(member, exc)

    # ------------------------------------------------------------------ stats
    def _update_snapshot(self) -> None:
        rows = self._rows
        if self._slots is not None:
            nbytes, slots, capacity = self._slots.nbytes, self._slots.slots, self._slots.capacity
            allocated = slots * capacity
        else:
            assert self._padded is not None
            nbytes, slots = self._padded.nbytes, self._padded.rows
            allocated = self._padded.rows * self._padded.width
            capacity = self._padded.width
        self._peak_kv = max(self._peak_kv, allocated)
        snapshot = {
            "layout": self.layout,
            "rows": len(rows),
            "decoding": sum(1 for r in rows if r.state == "decode"),
            "prefilling": sum(1 for r in rows if r.state in ("prefill", "follow", "copy")),
            "max_batch": self.config.max_batch,
            "peak_rows": self._peak_rows,
            "slots": slots,
            "kv_capacity": capacity,
            "kv_allocated_tokens": allocated,
            "peak_kv_allocated_tokens": self._peak_kv,
            "kv_used_tokens": sum(r.length if r.state == "decode" else r.prefilled for r in rows),
            "kv_bytes": nbytes,
            "max_kv_tokens": self.kv_budget,
            "prefill_chunk": self.config.prefill_chunk,
            "decode_steps": self._steps,
            "prefill_tokens": self._prefill_tokens,
            "shared_prefix_tokens": self._shared_tokens,
            "prefix_cache_entries": len(self._store),
            "prefix_cache_tokens": self._store.tokens,
            "prefix_cache_bytes": self._store.nbytes,
            "max_prefix_cache_bytes": self._store.budget,
            "prefix_cache_hits": self._store.hits,
        }
        with self._cond:
            self._snapshot = snapshot


def _ready(row: BatchRow) -> bool:
    """Whether a row's consumer takes more now (a predicate that raises counts as ready)."""
    if row.ready is None:
        return True
    try:
        return bool(row.ready())
    except Exception:
        log.exception("generate: ready() raised")
        return True


def _slot_count(rows: int, max_batch: int) -> int:
    """Slots allocated for ``rows``: the next power of two, at most ``max_batch``."""
    return min(1 << max(rows - 1, 0).bit_length(), max(max_batch, rows))


def batched_observable(
    scheduler: Callable[[], BatchScheduler],
    call: GenerateCall,
    prompt: list[int],
    on_finish: FinishCallback | None,
    seed: int | None,
    ready: Callable[[], bool] | None,
) -> Observable[Any]:
    """The cold observable a batched :meth:`OnnxModel.generate` returns: each subscription is a row
    of the model's scheduler (made on first use); disposing cancels that row only."""

    def subscribe(
        observer: abc.ObserverBase[Any], _scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        batch = scheduler()
        row = BatchRow(call, prompt, observer, on_finish, seed, ready)
        batch.submit(row)
        return Disposable(lambda: batch.cancel(row))

    return reactivex.create(subscribe)
