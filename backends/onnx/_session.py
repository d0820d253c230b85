"""The ONNX Runtime session of a decoder and its KV cache.

:class:`DecoderSession` opens one ``.onnx`` graph (provider choice: CUDA when asked for or when
``"auto"`` finds it usable, else CPU), checks that it is a decoder with KV cache in the Optimum
layout, and runs forward passes through IO binding so the cache stays where the provider keeps
it. :meth:`DecoderSession.new_cache` gives one generation its cache: :class:`SharedCache` (one
buffer per layer, written in place by fused GroupQueryAttention) or :class:`ConcatCache` (each
step's ``present`` becomes the next ``past``).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from ._config import DecoderConfig
from ._graph_ops import graph_ops as read_graph_ops
from ._graph_ops import nbits_accuracy_levels

__all__ = [
    "ConcatCache",
    "DecoderSession",
    "Provider",
    "SharedCache",
    "Spinning",
    "fused_attention_off_device",
]

Provider = Literal["auto", "cpu", "cuda"]
Spinning = bool | Literal["step"]
"""How ONNX Runtime's intra-op workers wait: ``True`` spin (its default), ``False`` block,
``"step"`` spin within a forward pass and stop when it returns (see :func:`_create_session`)."""

log = logging.getLogger("rxstream.backends")

LOGITS_TO_KEEP = "logits_to_keep"
"""The input of graphs rxstream's converter writes: logits for the last N positions (0: all)."""

_KEEP_ONE = np.asarray(1, np.int64)
_KEEP_ALL = np.asarray(0, np.int64)

_DTYPES: dict[str, type[np.generic]] = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(bfloat16)": np.float32,
}


class CudaUnavailableError(RuntimeError):
    """``provider='cuda'`` was asked for and CUDA cannot run here; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"OnnxModel: provider='cuda' was requested but {reason}; use provider='cpu' or 'auto'"
        )
        self.reason = reason


def _nvidia_device_present() -> bool:
    if sys.platform.startswith("linux"):
        return os.path.exists("/dev/nvidiactl") or os.path.isdir("/proc/driver/nvidia")
    return True


def _create_session(
    path: Path, provider: Provider, threads: int | None, spinning: Spinning = True
) -> tuple[ort.InferenceSession, str]:
    if provider not in ("auto", "cpu", "cuda"):
        raise ValueError(f"OnnxModel: provider must be 'auto', 'cpu' or 'cuda', got {provider!r}")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if threads is not None:
        options.intra_op_num_threads = threads
    # A decode step is hundreds of small kernels. Intra-op workers that spin between them (ORT's
    # default) keep the step fast when the cores are free: on 2 idle cores the earlier
    # (re-quantized, int8-activation) int4 build decoded ~1.4x and fp32 ~1.1x faster than with
    # blocking waits. On cores busy with other work the spinning steals
    # the CPU instead; ``spinning=False`` makes the workers block (better there, worse when idle).
    # ``"step"`` spins within a pass and stops the spinning when the pass returns, so the work
    # between passes (sampling, detokenizing, a server's event loop and its clients) has the
    # cores: measured with the server (SmolLM2 int4-a8, 2 cores), 1.29x the blocking tokens/s for
    # one client and 1.18x for 16, where always spinning gave 1.12x and 1.19x.
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    if spinning == "step":
        options.add_session_config_entry("session.force_spinning_stop", "1")
    want_cuda = provider == "cuda" or (
        provider == "auto"
        and "CUDAExecutionProvider" in ort.get_available_providers()
        and _nvidia_device_present()
    )
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if want_cuda else ["CPUExecutionProvider"]
    if provider == "cuda" and not _nvidia_device_present():  # say so before ONNX Runtime tries
        raise CudaUnavailableError("this machine has no NVIDIA GPU for CUDA (no /dev/nvidiactl)")
    if provider == "cuda":  # ONNX Runtime logs its own lines when CUDA fails: the error below says it
        ort.set_default_logger_severity(4)
    try:
        session = ort.InferenceSession(str(path), options, providers=providers)
    except Exception as exc:
        raise ValueError(f"OnnxModel: cannot load {path}: {exc}") from exc
    finally:
        if provider == "cuda":
            ort.set_default_logger_severity(2)
    running = "cuda" if "CUDAExecutionProvider" in session.get_providers() else "cpu"
    if provider == "cuda" and running != "cuda":
        raise CudaUnavailableError(
            "ONNX Runtime could not start CUDA (the CUDA or cuDNN libraries are missing)"
        )
    if want_cuda and running != "cuda":
        log.info("CUDA is not usable here; running %s on CPU", path.name)
    log.debug("loaded %s on %s", path, running)
    return session, running


def fused_attention_off_device(device: str, ops: frozenset[str], kv_dtype: Any) -> bool:
    """True when the graph's fused attention cannot run on ``device``.

    ONNX Runtime's CUDA GroupQueryAttention kernel exists for float16 and bfloat16 only; a float32
    graph would have its attention nodes placed on the CPU, copying the KV cache across at every
    step. The plain-attention graph (standard ONNX ops) runs on CUDA in float32.
    """
    return device == "cuda" and "GroupQueryAttention" in ops and np.dtype(kv_dtype) == np.float32


def _kv_names(path: Path, ins: Mapping[str, Any], outs: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The KV-cache input and output names (``past_key_values.{i}.key/value``, ``present.{i}.*``),
    after checking that the graph is a decoder with KV cache in the Optimum layout."""
    layers = 0
    while f"past_key_values.{layers}.key" in ins:
        layers += 1
    problems: list[str] = []
    for required in ("input_ids", "attention_mask"):
        if required not in ins:
            problems.append(f"missing input {required!r}")
    if "logits" not in outs:
        problems.append("missing output 'logits'")
    if layers == 0:
        problems.append("no KV-cache inputs 'past_key_values.{i}.key/value'")
    past_names: list[str] = []
    present_names: list[str] = []
    for i in range(layers):
        for kind in ("key", "value"):
            p, q = f"past_key_values.{i}.{kind}", f"present.{i}.{kind}"
            if p not in ins:
                problems.append(f"missing input {p!r}")
            if q not in outs:
                problems.append(f"missing output {q!r}")
            past_names.append(p)
            present_names.append(q)
    known = {"input_ids", "attention_mask", "position_ids", LOGITS_TO_KEEP, *past_names}
    unexpected = sorted(set(ins) - known)
    if unexpected:
        problems.append(f"unexpected input(s) {unexpected}")
    if problems:
        raise ValueError(
            f"OnnxModel: {path} is not a decoder with KV cache in the Optimum layout: "
            + "; ".join(problems)
            + " (expected inputs input_ids, attention_mask, [position_ids], "
            "past_key_values.{i}.key/value; "
            "outputs logits, present.{i}.key/value)"
        )
    return past_names, present_names


class DecoderSession:
    """One ONNX session plus the names and shapes of its KV cache."""

    def __init__(
        self,
        path: Path,
        provider: Provider,
        threads: int | None,
        config: DecoderConfig | None,
        spinning: Spinning = True,
    ) -> None:
        self.session, self.provider = _create_session(path, provider, threads, spinning)
        self.path = path
        ins = {i.name: i for i in self.session.get_inputs()}
        outs = {o.name: o for o in self.session.get_outputs()}
        self.past_names, self.present_names = _kv_names(path, ins, outs)
        layers = len(self.past_names) // 2
        self.num_layers = layers
        self.has_position_ids = "position_ids" in ins
        self.keeps_logits = LOGITS_TO_KEEP in ins
        """Whether the graph takes ``logits_to_keep`` (rxstream's converter writes it): every pass
        feeds it, a prompt pass asks for the last position's logits only."""
        past0 = ins["past_key_values.0.key"]
        self.kv_dtype = _DTYPES.get(past0.type, np.float32)
        shape = past0.shape
        kv_heads = shape[1] if isinstance(shape[1], int) else (config.num_kv_heads if config else None)
        head_dim = shape[3] if isinstance(shape[3], int) else (config.head_dim if config else None)
        if kv_heads is None or head_dim is None:
            raise ValueError(
                f"OnnxModel: {path}: KV-cache shape {shape} is symbolic and no config.json says it"
            )
        self.kv_heads, self.head_dim = int(kv_heads), int(head_dim)
        self.device = "cuda" if self.provider == "cuda" else "cpu"
        logits_meta = outs["logits"]
        self.logits_dtype = _DTYPES.get(logits_meta.type, np.float32)
        vocab = logits_meta.shape[-1] if logits_meta.shape else None
        self.vocab_out = int(vocab) if isinstance(vocab, int) else (config.vocab_size if config else 0)
        graph_ops = read_graph_ops(path)
        self.ops = graph_ops
        self.int8_activations = 4 in nbits_accuracy_levels(path)
        """Whether its ``MatMulNBits`` round the activations to 8 bits (``accuracy_level`` 4)."""
        # fused attention that can share past/present buffers (fp32 logits needed for the fixed buffer)
        self.shares_buffer = (
            "GroupQueryAttention" in graph_ops
            and self.logits_dtype is np.float32
            and self.vocab_out > 0
            and logits_meta.type == "tensor(float)"
        )

    def last_logits(self, feeds: dict[str, np.ndarray]) -> int:
        """Ask the pass for its last position's logits only, where the graph can; return the
        number of positions the logits will have."""
        if self.keeps_logits:
            feeds[LOGITS_TO_KEEP] = _KEEP_ONE
            return 1
        return int(feeds["input_ids"].shape[1])

    def last_logits_n(self, feeds: dict[str, np.ndarray], keep: int) -> int:
        """Ask the pass for its last ``keep`` positions' logits, where the graph can; return the
        number of positions the logits will have."""
        if self.keeps_logits:
            feeds[LOGITS_TO_KEEP] = np.asarray(keep, np.int64)
            return keep
        return int(feeds["input_ids"].shape[1])

    def all_logits(self, feeds: dict[str, np.ndarray]) -> None:
        """Ask the pass for every position's logits (the graph's ``logits_to_keep`` 0)."""
        if self.keeps_logits:
            feeds[LOGITS_TO_KEEP] = _KEEP_ALL

    def empty_past(self, batch: int) -> list[ort.OrtValue]:
        shape = [batch, self.kv_heads, 0, self.head_dim]
        return [
            ort.OrtValue.ortvalue_from_shape_and_type(shape, self.kv_dtype, self.device, 0)
            for _ in self.past_names
        ]

    def run_bound(self, binding: ort.IOBinding) -> None:
        """Run one forward pass on an IO binding (the single place every forward pass goes through)."""
        self.session.run_with_iobinding(binding)

    def step(
        self, feeds: Mapping[str, np.ndarray], past: Sequence[ort.OrtValue]
    ) -> tuple[npt.NDArray[np.float32], list[ort.OrtValue]]:
        """One forward pass with IO binding; the KV cache stays where the provider keeps it."""
        binding = self.session.io_binding()
        for name, array in feeds.items():
            binding.bind_cpu_input(name, array)
        for name, value in zip(self.past_names, past, strict=True):
            binding.bind_ortvalue_input(name, value)
        binding.bind_output("logits", "cpu")
        for name in self.present_names:
            binding.bind_output(name, self.device)
        self.run_bound(binding)
        outputs = binding.get_outputs()
        logits: npt.NDArray[np.float32] = outputs[0].numpy()
        return logits, list(outputs[1:])

    def new_cache(self, batch: int, needed: int, limit: int) -> ConcatCache | SharedCache:
        """A KV cache for one generation that will hold ``needed`` positions (at most ``limit``)."""
        if self.shares_buffer:
            return SharedCache(self, batch, needed, limit)
        return ConcatCache(self, batch)


class ConcatCache:
    """KV cache for graphs that concatenate past and new keys: each step's present is the next past."""

    def __init__(self, graph: DecoderSession, batch: int) -> None:
        self.graph = graph
        self.past = graph.empty_past(batch)

    def step(self, feeds: Mapping[str, np.ndarray], total: int) -> npt.NDArray[np.float32]:
        logits, self.past = self.graph.step(feeds, self.past)
        return logits


class SharedCache:
    """KV cache for GroupQueryAttention graphs: one buffer per layer, bound as both past and present.

    The attention op writes the new keys/values in place (ORT's past/present buffer sharing), so a
    decode step copies no cache. One IO binding is reused for the whole generation; only the ids,
    the mask and the logits are bound again each step. On CPU the buffers are numpy arrays that grow
    (doubling) when a generation outlives them; on CUDA they are allocated once for ``needed``.
    """

    _GROW_FROM = 256

    def __init__(self, graph: DecoderSession, batch: int, needed: int, limit: int) -> None:
        self.graph = graph
        self.batch = batch
        self.limit = limit
        self.binding = graph.session.io_binding()
        self.capacity = 0
        self.arrays: list[np.ndarray] = []
        self.values: list[ort.OrtValue] = []
        first = needed if graph.device == "cuda" else min(needed, max(self._GROW_FROM, 1))
        self._resize(min(max(first, 1), limit), used=0)
        self.logits_buffer: ort.OrtValue | None = None

    def _resize(self, capacity: int, used: int) -> None:
        g = self.graph
        shape = [self.batch, g.kv_heads, capacity, g.head_dim]
        if g.device == "cuda":
            if self.values:
                raise RuntimeError("generate: the CUDA KV cache is full (capacity fixed at the start)")
            self.values = [
                ort.OrtValue.ortvalue_from_shape_and_type(shape, g.kv_dtype, "cuda", 0) for _ in g.past_names
            ]
        else:
            arrays = [np.zeros(shape, dtype=g.kv_dtype) for _ in g.past_names]
            for new, old in zip(arrays, self.arrays, strict=False):
                new[:, :, :used] = old[:, :, :used]
            self.arrays = arrays
            self.values = [ort.OrtValue.ortvalue_from_numpy(a) for a in arrays]
        self.capacity = capacity
        for name, value in zip(g.past_names, self.values, strict=True):
            self.binding.bind_ortvalue_input(name, value)
        for name, value in zip(g.present_names, self.values, strict=True):
            self.binding.bind_ortvalue_output(name, value)

    def step(self, feeds: Mapping[str, np.ndarray], total: int) -> npt.NDArray[np.float32]:
        if total > self.capacity:
            if total > self.limit:
                raise RuntimeError(f"generate: {total} positions exceed the context length {self.limit}")
            self._resize(
                min(max(total, 2 * self.capacity), self.limit), used=total - feeds["input_ids"].shape[1]
            )
        b = self.binding
        for name, array in feeds.items():
            b.bind_cpu_input(name, array)
        keep = int(feeds[LOGITS_TO_KEEP]) if LOGITS_TO_KEEP in feeds else 0
        seq = keep if keep > 0 else int(feeds["input_ids"].shape[1])
        logits = self.logits_buffer
        if logits is None or seq != 1:
            logits = ort.OrtValue.ortvalue_from_shape_and_type(
                [self.batch, seq, self.graph.vocab_out], np.float32, "cpu", 0
            )
            if seq == 1:
                self.logits_buffer = logits
        b.bind_ortvalue_output("logits", logits)
        self.graph.run_bound(b)
        out: npt.NDArray[np.float32] = logits.numpy()
        return out
