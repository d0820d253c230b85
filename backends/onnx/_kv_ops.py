"""The small ONNX graphs that move KV blocks (:class:`KVOps`: copy, resize, gather, join), run by
ONNX Runtime on the model's own provider so the cache never leaves its device."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import numpy as np
import onnxruntime as ort

from . import _onnx_writer as w
from ._session import DecoderSession

__all__ = ["ONNX_TYPES", "KVOps", "input_index"]

ONNX_TYPES = {"tensor(float)": w.FLOAT, "tensor(float16)": w.FLOAT16}
_NUMPY_TYPES: dict[str, type[np.generic]] = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


def input_index(graph: DecoderSession, name: str) -> int:
    return [i.name for i in graph.session.get_inputs()].index(name)


class KVOps:
    """Small ONNX graphs over every KV tensor at once, run on the model's provider.

    ``copy``: ``y = x`` (raw pointers: one slot to another); ``resize``: ``y = Pad(Slice(x))``
    (a buffer into a larger or smaller one); ``gather``: ``y = Slice(Gather(x, rows), columns)``
    (rows leave a padded batch); ``join``: ``y = Concat(Pad(a), Pad(Gather(b, rows)))`` (rows
    join one). Sessions are built on first use, with graph optimizations off (nothing to fuse).

    On the CPU, copies between raw pointers (:meth:`copy_between`, :meth:`copy_heads`) are plain
    ``memmove`` calls: an onnxruntime run binding every buffer costs more than the bytes (a
    one-token request whose prompt begins like a stored one: 38.3 -> 34.1 ms with SmolLM2
    int4-a8). Other providers run the ``copy`` graph.
    """

    def __init__(self, graph: DecoderSession) -> None:
        self.graph = graph
        kv_type = graph.session.get_inputs()[input_index(graph, graph.past_names[0])].type
        self.onnx_type = ONNX_TYPES[kv_type]
        self.np_type = _NUMPY_TYPES[kv_type]
        self.count = len(graph.past_names)
        self.memmove = graph.device == "cpu"
        """Copy between pointers with ``memmove`` (the CPU); False: with the ``copy`` graph."""
        self._sessions: dict[str, ort.InferenceSession] = {}

    def _session(self, kind: str) -> ort.InferenceSession:
        session = self._sessions.get(kind)
        if session is None:
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            options.log_severity_level = 3
            options.intra_op_num_threads = 1
            model = self._build(kind)
            providers = self.graph.session.get_providers()
            session = ort.InferenceSession(model, options, providers=providers)
            self._sessions[kind] = session
        return session

    def _build(self, kind: str) -> bytes:
        def tensor(name: str, elem: int = self.onnx_type) -> bytes:
            return w.tensor(name, elem)

        i64 = w.INT64
        nodes: list[bytes] = []
        inputs: list[bytes] = []
        outputs = [tensor(f"y{i}") for i in range(self.count)]
        if kind == "copy":
            inputs = [tensor(f"x{i}") for i in range(self.count)]
            nodes = [w.node("Identity", [f"x{i}"], [f"y{i}"]) for i in range(self.count)]
        elif kind == "resize":
            inputs = [tensor("starts", i64), tensor("ends", i64), tensor("pads", i64)]
            inputs += [tensor(f"x{i}") for i in range(self.count)]
            for i in range(self.count):
                nodes.append(w.node("Slice", [f"x{i}", "starts", "ends"], [f"s{i}"]))
                nodes.append(w.node("Pad", [f"s{i}", "pads"], [f"y{i}"]))
        elif kind == "gather":
            inputs = [tensor("rows", i64), tensor("starts", i64), tensor("ends", i64), tensor("axes", i64)]
            inputs += [tensor(f"x{i}") for i in range(self.count)]
            for i in range(self.count):
                nodes.append(w.node("Gather", [f"x{i}", "rows"], [f"g{i}"], axis=0))
                nodes.append(w.node("Slice", [f"g{i}", "starts", "ends", "axes"], [f"y{i}"]))
        elif kind == "join":
            inputs = [tensor("pads_a", i64), tensor("pads_b", i64), tensor("rows", i64)]
            inputs += [tensor(f"a{i}") for i in range(self.count)]
            inputs += [tensor(f"b{i}") for i in range(self.count)]
            for i in range(self.count):
                nodes.append(w.node("Pad", [f"a{i}", "pads_a"], [f"pa{i}"]))
                nodes.append(w.node("Gather", [f"b{i}", "rows"], [f"g{i}"], axis=0))
                nodes.append(w.node("Pad", [f"g{i}", "pads_b"], [f"pb{i}"]))
                nodes.append(w.node("Concat", [f"pa{i}", f"pb{i}"], [f"y{i}"], axis=0))
        else:  # pragma: no cover - internal
            raise ValueError(kind)
        return w.model(nodes, f"kv_{kind}", inputs, outputs, opset=17, ir_version=10)

    def _pointer(self, binding: ort.IOBinding, name: str, out: bool, shape: Sequence[int], ptr: int) -> None:
        device = self.graph.device
        if out:
            binding.bind_output(name, device, 0, self.np_type, list(shape), ptr)
        else:
            binding.bind_input(name, device, 0, self.np_type, list(shape), ptr)

    def copy(
        self, values: Sequence[ort.OrtValue], src: int, dst: int, shape: Sequence[int], stride: int
    ) -> None:
        """Copy the block ``shape`` at byte offset ``src * stride`` to ``dst * stride`` in every
        buffer of ``values``."""
        self.copy_between(values, src * stride, values, dst * stride, shape)

    def copy_between(
        self,
        sources: Sequence[ort.OrtValue],
        src: int,
        targets: Sequence[ort.OrtValue],
        dst: int,
        shape: Sequence[int],
    ) -> None:
        """Copy the block ``shape`` at byte offset ``src`` of each buffer of ``sources`` to byte
        offset ``dst`` of the matching buffer of ``targets``."""
        if self.memmove:
            nbytes = int(np.prod(shape)) * np.dtype(self.np_type).itemsize
            for source, target in zip(sources, targets, strict=True):
                ctypes.memmove(target.data_ptr() + dst, source.data_ptr() + src, nbytes)
            return
        session = self._session("copy")
        binding = session.io_binding()
        for i, (source, target) in enumerate(zip(sources, targets, strict=True)):
            self._pointer(binding, f"x{i}", False, shape, source.data_ptr() + src)
            self._pointer(binding, f"y{i}", True, shape, target.data_ptr() + dst)
        session.run_with_iobinding(binding)

    def copy_heads(
        self,
        sources: Sequence[ort.OrtValue],
        src: int,
        src_head: int,
        targets: Sequence[ort.OrtValue],
        dst: int,
        dst_head: int,
        length: int,
    ) -> None:
        """Copy ``length`` positions of every head, from byte offset ``src`` of each buffer of
        ``sources`` (heads ``src_head`` bytes apart) to offset ``dst`` of the matching buffer of
        ``targets`` (heads ``dst_head`` apart): one graph run per head, or on the CPU one
        ``memmove`` per head and buffer (a head's positions are contiguous)."""
        g = self.graph
        shape = [1, 1, length, g.head_dim]
        if self.memmove:
            nbytes = length * g.head_dim * np.dtype(self.np_type).itemsize
            move = ctypes.memmove
            for source, target in zip(sources, targets, strict=True):
                s, t = source.data_ptr() + src, target.data_ptr() + dst
                for h in range(g.kv_heads):
                    move(t + h * dst_head, s + h * src_head, nbytes)
            return
        for h in range(g.kv_heads):
            self.copy_between(sources, src + h * src_head, targets, dst + h * dst_head, shape)

    def resize(
        self, values: Sequence[ort.OrtValue], keep: Sequence[int], new_shape: Sequence[int]
    ) -> list[ort.OrtValue]:
        """New buffers of ``new_shape`` holding each buffer's leading block ``keep`` (zeros elsewhere)."""
        session = self._session("resize")
        binding = session.io_binding()
        binding.bind_cpu_input("starts", np.zeros(4, np.int64))
        binding.bind_cpu_input("ends", np.asarray(keep, np.int64))
        pads = [0, 0, 0, 0, *(int(n) - int(k) for n, k in zip(new_shape, keep, strict=True))]
        binding.bind_cpu_input("pads", np.asarray(pads, np.int64))
        out = [
            ort.OrtValue.ortvalue_from_shape_and_type(list(new_shape), self.np_type, self.graph.device, 0)
            for _ in values
        ]
        for i, (value, target) in enumerate(zip(values, out, strict=True)):
            binding.bind_ortvalue_input(f"x{i}", value)
            binding.bind_ortvalue_output(f"y{i}", target)
        session.run_with_iobinding(binding)
        return out

    def gather(
        self, values: Sequence[ort.OrtValue], rows: Sequence[int], start: int, end: int
    ) -> list[ort.OrtValue]:
        """``values[rows][:, :, start:end]`` (new buffers on the same device)."""
        session = self._session("gather")
        binding = session.io_binding()
        binding.bind_cpu_input("rows", np.asarray(rows, np.int64))
        binding.bind_cpu_input("starts", np.asarray([start], np.int64))
        binding.bind_cpu_input("ends", np.asarray([end], np.int64))
        binding.bind_cpu_input("axes", np.asarray([2], np.int64))
        for i, value in enumerate(values):
            binding.bind_ortvalue_input(f"x{i}", value)
            binding.bind_output(f"y{i}", self.graph.device)
        session.run_with_iobinding(binding)
        return list(binding.get_outputs())

    def join(
        self,
        a: Sequence[ort.OrtValue],
        b: Sequence[ort.OrtValue],
        rows: Sequence[int],
        left_a: int,
        left_b: int,
    ) -> list[ort.OrtValue]:
        """``a`` padded ``left_a`` columns on the left, then ``b[rows]`` padded ``left_b``."""
        session = self._session("join")
        binding = session.io_binding()
        binding.bind_cpu_input("pads_a", np.asarray([0, 0, left_a, 0, 0, 0, 0, 0], np.int64))
        binding.bind_cpu_input("pads_b", np.asarray([0, 0, left_b, 0, 0, 0, 0, 0], np.int64))
        binding.bind_cpu_input("rows", np.asarray(rows, np.int64))
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            binding.bind_ortvalue_input(f"a{i}", x)
            binding.bind_ortvalue_input(f"b{i}", y)
            binding.bind_output(f"y{i}", self.graph.device)
        session.run_with_iobinding(binding)
        return list(binding.get_outputs())
