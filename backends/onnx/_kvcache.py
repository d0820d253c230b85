"""KV caches shared by many rows of different lengths (the continuous-batching scheduler's memory).

Two layouts, chosen from the graph (:func:`batch_layout`):

* :class:`SlotCache`, for graphs with ``GroupQueryAttention`` (rxstream's converter,
  onnxruntime-genai's builder). One buffer per KV tensor, ``[slots, kv_heads, capacity,
  head_dim]``, bound as both ``past`` and ``present`` (ONNX Runtime's buffer sharing: the attention
  op writes the new positions in place). Right padding: row ``r`` keeps its positions
  ``0 .. len-1`` in slot ``r``; the graph derives each row's length from ``attention_mask``
  (``seqlens_k = sum(mask) - 1``; rotary positions follow), so rows of different lengths share one
  decode step. A pass over slots ``start .. start+count-1`` binds raw pointers into the buffers:
  nothing is copied, on the CPU or on a CUDA device.
* :class:`PaddedCache`, for plain-attention graphs with ``position_ids`` (Optimum exports,
  rxstream's ``model_plain.onnx``). Left padding: every row ends at the last column; each step's
  ``present`` (past plus the new column) becomes the next ``past``; a row joins by padding (the
  batch on the left when it is longer), leaves by being gathered out, and leading columns no row
  uses are cut. Rows that skip a step get a column masked out (a hole the attention never reads).

Blocks move with small ONNX graphs (:class:`KVOps`: copy, resize, gather, join) run by ONNX
Runtime on the model's own provider, so the cache never leaves the device it lives on; on the CPU
a copy between two pointers (a slot, a shared prefix, the prefix store) is a ``memmove`` instead
(an onnxruntime run binding every buffer cost more than the bytes).

CUDA (reviewed, not run: there is no GPU where this is tested). What the CUDA path relies on:
buffers from ``OrtValue.ortvalue_from_shape_and_type(..., "cuda", 0)`` and their
``data_ptr()`` bound with ``IOBinding.bind_input/bind_output(name, "cuda", 0, dtype, shape, ptr)``
(past and present of a slot range are one device pointer, as onnxruntime-genai binds them);
logits bound to a host buffer (ONNX Runtime copies them out after the run); the KV ops
(Identity, Slice, Pad, Gather, Concat) have CUDA kernels in float16 and float32, and their
session uses the model session's provider list. A float32 model runs its plain graph on CUDA
(GroupQueryAttention's CUDA kernels are float16/bfloat16 only), hence the padded layout there.
Not verified: chunked prefill of a slot row (a GroupQueryAttention pass with ``sequence_length >
1`` after a past) on CUDA kernels; with one chunk per prompt (``prefill_chunk`` at least the
longest prompt) no such pass happens.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from ._kv_ops import ONNX_TYPES, KVOps, input_index
from ._session import DecoderSession

__all__ = ["KVOps", "PaddedCache", "SlotCache", "batch_layout"]


def batch_layout(graph: DecoderSession) -> str | None:
    """``"slots"``, ``"padded"``, or None when the graph cannot run rows of different lengths in
    one pass (then each generation runs its own loop).

    ``"slots"`` needs ``GroupQueryAttention`` (its per-row lengths come from the mask), a known
    vocabulary size and a float32/float16 KV cache; ``"padded"`` needs ``position_ids`` and no fused
    attention (fused attention other than GQA cannot take left padding).
    """
    kv_type = graph.session.get_inputs()[input_index(graph, graph.past_names[0])].type
    if kv_type not in ONNX_TYPES:
        return None
    if "GroupQueryAttention" in graph.ops:
        return "slots" if graph.vocab_out > 0 else None
    fused = {"MultiHeadAttention", "Attention", "PagedAttention", "SparseAttention"}
    if graph.has_position_ids and not graph.ops & fused:
        return "padded"
    return None


def position_bytes(graph: DecoderSession) -> int:
    """Bytes one cached position of one row takes (all layers, keys and values)."""
    itemsize = np.dtype(graph.kv_dtype).itemsize
    return len(graph.past_names) * graph.kv_heads * graph.head_dim * itemsize


def _feeds(
    graph: DecoderSession, ids: np.ndarray, mask: np.ndarray, positions: np.ndarray, keep: int = 1
) -> dict[str, np.ndarray]:
    """The inputs of one pass; a pass of several positions asks for the last ``keep`` positions'
    logits only (a batched pass samples the last one; a draft pass each of its positions)."""
    feeds = {"input_ids": ids, "attention_mask": mask}
    if graph.has_position_ids:
        feeds["position_ids"] = positions
    if keep == 1:
        graph.last_logits(feeds)
    else:
        graph.last_logits_n(feeds, keep)
    return feeds


class SlotCache:
    """Right-padded rows in fixed slots of one buffer per KV tensor (fused GroupQueryAttention).

    ``slots`` rows of ``capacity`` positions are allocated; :meth:`reserve` grows or shrinks them
    (keeping what the live rows hold), :meth:`release` frees them. :meth:`run` is one forward pass
    over the slots ``start .. start+count-1``.
    """

    def __init__(self, graph: DecoderSession, ops: KVOps) -> None:
        self.graph = graph
        self.ops = ops
        self.slots = 0
        self.capacity = 0
        self.values: list[ort.OrtValue] = []
        self.position_bytes = position_bytes(graph)
        self._bindings: dict[tuple[int, int, int, int], tuple[ort.IOBinding, np.ndarray]] = {}
        """Decode bindings by (start, rows, seq): the KV pointers and the logits buffer bound once
        (0.5 ms of binding per step saved); dropped when the buffers change."""

    @property
    def nbytes(self) -> int:
        """Bytes the buffers hold now."""
        return self.slots * self.capacity * self.position_bytes

    def _row_stride(self) -> int:
        return self.graph.kv_heads * self._head_bytes(self.capacity)

    def reserve(self, slots: int, capacity: int, live: int) -> None:
        """Make the buffers ``[slots, kv_heads, capacity, head_dim]``, keeping slots ``0 .. live-1``."""
        if slots == self.slots and capacity == self.capacity:
            return
        self._bindings.clear()
        if slots == 0 or capacity == 0:
            self.release()
            return
        g = self.graph
        shape = [slots, g.kv_heads, capacity, g.head_dim]
        keep = min(live, slots, self.slots)
        if keep == 0 or not self.values:
            self.values = [
                ort.OrtValue.ortvalue_from_shape_and_type(shape, self.ops.np_type, g.device, 0)
                for _ in g.past_names
            ]
        else:
            kept = [keep, g.kv_heads, min(capacity, self.capacity), g.head_dim]
            self.values = self.ops.resize(self.values, kept, shape)
        self.slots, self.capacity = slots, capacity

    def release(self) -> None:
        """Free the buffers."""
        self._bindings.clear()
        self.values = []
        self.slots = self.capacity = 0

    def copy_slot(self, src: int, dst: int, length: int | None = None) -> None:
        """Copy the first ``length`` positions (None: every position) of slot ``src`` over slot
        ``dst``. A short prefix is copied head by head (a head's positions are contiguous), so a
        prompt's few shared positions cost what they hold, not the slot's whole capacity."""
        g = self.graph
        stride = self._row_stride()
        if length is None or 2 * length >= self.capacity:
            self.ops.copy(self.values, src, dst, [1, g.kv_heads, self.capacity, g.head_dim], stride)
            return
        if length > 0:
            head = self._head_bytes(self.capacity)
            self.ops.copy_heads(self.values, src * stride, head, self.values, dst * stride, head, length)

    def _head_bytes(self, positions: int) -> int:
        """Bytes of one head's ``positions`` positions (a buffer's head stride)."""
        return positions * self.graph.head_dim * np.dtype(self.ops.np_type).itemsize

    def extract(self, slot: int, length: int) -> list[ort.OrtValue]:
        """The first ``length`` positions of ``slot``: new buffers ``[1, kv_heads, length, head_dim]``
        (on CPU owned by numpy, so their memory goes back to the system when they are dropped)."""
        g = self.graph
        shape = [1, g.kv_heads, length, g.head_dim]
        if g.device == "cpu":
            out = [ort.OrtValue.ortvalue_from_numpy(np.empty(shape, self.ops.np_type)) for _ in self.values]
        else:
            out = [
                ort.OrtValue.ortvalue_from_shape_and_type(shape, self.ops.np_type, g.device, 0)
                for _ in self.values
            ]
        base = slot * self._row_stride()
        self.ops.copy_heads(
            self.values, base, self._head_bytes(self.capacity), out, 0, self._head_bytes(length), length
        )
        return out

    def load(self, source: Sequence[ort.OrtValue], held: int, length: int, slot: int) -> None:
        """Copy the first ``length`` positions of ``source`` (buffers ``[1, kv_heads, held,
        head_dim]``, as :meth:`extract` makes them) into ``slot``, head by head."""
        base = slot * self._row_stride()
        self.ops.copy_heads(
            source, 0, self._head_bytes(held), self.values, base, self._head_bytes(self.capacity), length
        )

    def run(
        self,
        start: int,
        ids: np.ndarray,
        mask: np.ndarray,
        positions: np.ndarray,
        keep: int = 1,
        graph: DecoderSession | None = None,
    ) -> npt.NDArray[np.float32]:
        """One forward pass over slots ``start .. start+len(ids)-1``: logits ``[rows, seq, vocab]``
        (for ``seq == 1`` in a buffer the next such pass over the same slots overwrites; with
        ``keep`` > 1 at least the last ``keep`` positions').

        ``mask[r]`` is ones over row ``r``'s cached positions plus its new ones, zeros after;
        ``positions`` are the new tokens' positions (fed when the graph takes ``position_ids``).
        ``graph``: another graph of the same inputs, outputs and KV layout to run instead (an int4
        build's float twin).
        """
        g = graph or self.graph
        count, seq = ids.shape
        if mask.shape[1] > self.capacity:
            raise RuntimeError(f"KV cache: {mask.shape[1]} positions exceed the capacity {self.capacity}")
        key = (id(g), start, count, seq)
        cached = self._bindings.get(key) if seq == 1 else None
        feeds = _feeds(g, ids, mask, positions, keep)
        out_seq = keep if g.keeps_logits else seq  # _feeds asks for the last ones where it can
        if cached is None:
            binding = g.session.io_binding()
            shape = [count, g.kv_heads, self.capacity, g.head_dim]
            offset = start * self._row_stride()
            for past, present, value in zip(g.past_names, g.present_names, self.values, strict=True):
                ptr = value.data_ptr() + offset
                binding.bind_input(past, g.device, 0, self.ops.np_type, shape, ptr)
                binding.bind_output(present, g.device, 0, self.ops.np_type, shape, ptr)
            logits = np.empty((count, out_seq, g.vocab_out), dtype=g.logits_dtype)
            binding.bind_output("logits", "cpu", 0, logits.dtype, list(logits.shape), logits.ctypes.data)
            cached = (binding, logits)
            if seq == 1:
                self._bindings[key] = cached
        binding, logits = cached
        for name, array in feeds.items():
            binding.bind_cpu_input(name, array)
        g.run_bound(binding)
        # a decode step's logits buffer is reused: they are valid until the next decode step
        return logits if logits.dtype == np.float32 else logits.astype(np.float32)


class PaddedCache:
    """Left-padded rows of one batch for plain-attention graphs (``present = concat(past, new)``).

    ``values`` are the batch's KV tensors ``[rows, kv_heads, width, head_dim]`` and ``mask`` its
    attention mask ``[rows, width]`` (1 where a row has a position, 0 in padding and holes).
    """

    def __init__(self, graph: DecoderSession, ops: KVOps) -> None:
        self.graph = graph
        self.ops = ops
        self.values: list[ort.OrtValue] = []
        self.mask = np.zeros((0, 0), np.int64)
        self.position_bytes = position_bytes(graph)

    @property
    def rows(self) -> int:
        return int(self.mask.shape[0])

    @property
    def width(self) -> int:
        return int(self.mask.shape[1])

    @property
    def nbytes(self) -> int:
        return self.rows * self.width * self.position_bytes

    def release(self) -> None:
        self.values = []
        self.mask = np.zeros((0, 0), np.int64)

    def prefill(
        self, past: list[ort.OrtValue] | None, ids: np.ndarray, done: int
    ) -> tuple[npt.NDArray[np.float32], list[ort.OrtValue]]:
        """One prompt chunk of a row that is not in the batch yet (its own cache ``past``)."""
        g = self.graph
        past = past if past is not None else g.empty_past(1)
        seq = ids.shape[1]
        mask = np.ones((1, done + seq), np.int64)
        positions = np.arange(done, done + seq, dtype=np.int64)[None, :]
        logits, present = g.step(_feeds(g, ids, mask, positions), past)
        return logits, present

    def join(self, past: list[ort.OrtValue], length: int, copies: int) -> None:
        """Append ``copies`` rows holding the ``length`` positions of ``past`` (a one-row cache)."""
        width = max(self.width, length)
        rows = [0] * copies
        new_mask = np.zeros((copies, width), np.int64)
        new_mask[:, width - length :] = 1
        if not self.values:
            self.values = self.ops.gather(past, rows, 0, length) if copies > 1 else list(past)
            self.mask = new_mask
            return
        self.values = self.ops.join(self.values, past, rows, width - self.width, width - length)
        old = np.zeros((self.rows, width), np.int64)
        old[:, width - self.width :] = self.mask
        self.mask = np.concatenate([old, new_mask], axis=0)

    def keep(self, rows: Sequence[int]) -> None:
        """Keep only ``rows`` (in that order); cut the leading columns none of them uses."""
        if not rows:
            self.release()
            return
        mask = self.mask[list(rows)]
        used = np.flatnonzero(mask.any(axis=0))
        start = int(used[0]) if used.size else 0
        if list(rows) == list(range(self.rows)) and start == 0:
            return
        self.values = self.ops.gather(self.values, rows, start, self.width)
        self.mask = np.ascontiguousarray(mask[:, start:])

    def step(self, ids: np.ndarray, take: np.ndarray, positions: np.ndarray) -> npt.NDArray[np.float32]:
        """One decode step for every row: ``take[r]`` 1 for the rows that advance, 0 for a hole."""
        g = self.graph
        mask = np.concatenate([self.mask, take.reshape(-1, 1).astype(np.int64)], axis=1)
        logits, present = g.step(_feeds(g, ids, mask, positions), self.values)
        self.values = present
        self.mask = mask
        return logits
