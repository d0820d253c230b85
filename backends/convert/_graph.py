"""Build a Llama-style decoder with KV cache as an ONNX graph, with ``onnx.helper``.

The graph has the Hugging Face Optimum input/output names: inputs ``input_ids`` [batch, seq],
``attention_mask`` [batch, past + seq], ``position_ids`` [batch, seq] (plain attention only) and
``past_key_values.{i}.key/value`` [batch, kv_heads, past, head_dim]; outputs ``logits``
[batch, seq, vocab] and ``present.{i}.key/value`` [batch, kv_heads, past + seq, head_dim].

Two attention variants share the same weights:

* ``"plain"``: standard ONNX ops (MatMul/Softmax with an explicit causal + padding mask and
  explicit rotary embeddings from ``position_ids``). Handles left-padded batches.
* ``"gqa"``: ORT's fused ``com.microsoft.GroupQueryAttention`` (rotary inside, positions from the
  cache length). Much faster on CPU, but it assumes right padding, so it is used for single
  sequences only. It has no ``position_ids`` input (like the onnxruntime-genai builder's models).

Weights are given as :class:`DecoderWeights` (Hugging Face orientation, ``[out, in]``) and turned
into initializers by :func:`prepare_initializers` (fp32 ``MatMul`` or int4 ``MatMulNBits``). Matrices
that come with their GGUF blocks (:class:`BlockQuant`: Q4_0, Q4_1, Q8_0) keep those blocks in the int4
build, so its weights are exactly the fp32 build's; other matrices are quantized to 4 bits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper

from ..onnx._config import DecoderConfig

__all__ = [
    "Attention",
    "BlockQuant",
    "DecoderWeights",
    "Quantization",
    "build_decoder",
    "prepare_initializers",
    "rotary_cache",
]

Attention = Literal["plain", "gqa"]
Quantization = Literal["fp32", "int4"]
F32 = npt.NDArray[np.float32]

IR_VERSION = 10
OPSET = 17
INT4_BLOCK = 32
ACCURACY_LEVEL = 0
"""``MatMulNBits`` ``accuracy_level``: 0, float32 activations. Level 4 (int8 activations, int32 sums)
decodes the default model about 1.7x faster but its logits then correlate only ~0.996 with the fp32
build's, where level 0 matches them to float rounding."""


@dataclass(frozen=True)
class BlockQuant:
    """A matrix ``[out, in]`` in blocks of 32 along ``in``: ``w = (codes - zero_point) * scales``, plus
    ``mins`` when given (then ``zero_point`` is 0 and ``w = scales * codes + mins``).

    This is how GGUF stores Q4_0 (4 bits, zero point 8), Q4_1 (4 bits, with mins) and Q8_0 (8 bits,
    zero point 128 after adding 128 to the signed codes); :meth:`dequantize` computes the same float32
    values as ``gguf.quants.dequantize``.

    Attributes:
        codes: ``[out, blocks, 32]`` uint8 in ``0 .. 2**bits - 1``.
        scales: ``[out, blocks]``.
        zero_point: subtracted from every code.
        bits: 4 or 8.
        mins: ``[out, blocks]`` or None.
    """

    codes: npt.NDArray[np.uint8]
    scales: F32
    zero_point: int
    bits: int
    mins: F32 | None = None

    @property
    def kind(self) -> tuple[int, int, bool]:
        """(bits, zero point, has mins): blocks of one kind concatenate into one ``MatMulNBits``."""
        return self.bits, self.zero_point, self.mins is not None

    def rows(self, order: npt.NDArray[np.integer[Any]]) -> BlockQuant:
        """The matrix with its rows (outputs) taken in ``order``."""
        mins = None if self.mins is None else self.mins[order]
        return BlockQuant(self.codes[order], self.scales[order], self.zero_point, self.bits, mins)

    def dequantize(self) -> F32:
        """The float32 matrix ``[out, in]`` (the same operations, in the same order, as gguf-py)."""
        n, blocks, size = self.codes.shape
        if self.mins is not None:
            w = self.scales[..., None] * self.codes.astype(np.float32) + self.mins[..., None]
        else:
            codes = self.codes.astype(np.int16) - np.int16(self.zero_point)
            w = codes.astype(np.float32) * self.scales[..., None]
        return np.asarray(w, np.float32).reshape(n, blocks * size)


def concat_blocks(parts: list[BlockQuant | None]) -> BlockQuant | None:
    """The row-wise concatenation of ``parts``, or None when one is missing or the kinds differ."""
    known = [p for p in parts if p is not None]
    if len(known) != len(parts) or len({p.kind for p in known}) != 1:
        return None
    first = known[0]
    mins = None if first.mins is None else np.concatenate([p.mins for p in known if p.mins is not None])
    return BlockQuant(
        np.concatenate([p.codes for p in known]),
        np.concatenate([p.scales for p in known]),
        first.zero_point,
        first.bits,
        mins,
    )


@dataclass
class DecoderWeights:
    """The float32 weights of a Llama decoder, Hugging Face orientation (``[out_features, in_features]``).

    Attributes:
        embed: token embeddings ``[vocab, hidden]``.
        norm: final RMS norm weight ``[hidden]``.
        lm_head: output projection ``[vocab, hidden]``, or None when tied to ``embed``.
        layers: per layer, a mapping with ``input_norm``, ``q``, ``k``, ``v``, ``o``, ``post_norm``,
            ``gate``, ``up``, ``down``.
        blocks: the quantized blocks the matrices were dequantized from, where known: keys
            ``embed``, ``lm_head`` and ``layers.{i}.{q,k,v,o,gate,up,down}``. The int4 build uses
            them as they are (see :func:`prepare_initializers`).
    """

    embed: F32
    norm: F32
    lm_head: F32 | None = None
    layers: list[dict[str, F32]] = field(default_factory=list)
    blocks: dict[str, BlockQuant] = field(default_factory=dict)


def rotary_cache(config: DecoderConfig) -> tuple[F32, F32]:
    """Cos and sin tables ``[max_positions, head_dim // 2]`` of rotary embeddings (``rotate_half`` layout)."""
    half = config.head_dim // 2
    inv_freq = 1.0 / (config.rope_theta ** (np.arange(0, half, dtype=np.float64) * 2.0 / config.head_dim))
    angles = np.outer(np.arange(config.max_position_embeddings, dtype=np.float64), inv_freq)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def _quantize_int4(weight: F32) -> tuple[npt.NDArray[np.uint8], F32]:
    """Round-to-nearest symmetric 4-bit quantization in blocks of 32 along the input axis.

    Each block's largest-magnitude weight ``m`` maps exactly to code 0 (``scale = m / -8``), the
    others to ``round(w / scale) + 8`` clipped to 0..15; ``MatMulNBits`` without zero points reads
    them as ``(q - 8) * scale``. Returns packed weights ``[N, blocks, 16]`` and scales ``[N * blocks]``.
    """
    n, k = weight.shape
    if k % INT4_BLOCK:
        pad = INT4_BLOCK - k % INT4_BLOCK
        weight = np.concatenate([weight, np.zeros((n, pad), np.float32)], axis=1)
    blocks = weight.shape[1] // INT4_BLOCK
    w = weight.reshape(n, blocks, INT4_BLOCK)
    extreme = np.take_along_axis(w, np.abs(w).argmax(axis=2)[..., None], axis=2)[..., 0]
    scale = (extreme / -8.0).astype(np.float32)
    scale = np.where(scale == 0.0, np.float32(1.0), scale).astype(np.float32)
    q = np.clip(np.round(w / scale[..., None]) + 8, 0, 15).astype(np.uint8)
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    return packed, scale.reshape(-1)


def prepare_initializers(
    config: DecoderConfig,
    weights: DecoderWeights,
    quantization: Quantization = "fp32",
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, np.ndarray]:
    """Turn :class:`DecoderWeights` into the named arrays :func:`build_decoder` expects.

    Linear layers become ``{name}`` (``[in, out]`` for ``MatMul``) in fp32, or ``{name}.q``,
    ``{name}.scales`` (and ``{name}.zp``, ``{name}.mins`` where needed) for ``MatMulNBits`` in int4.
    Q/K/V are fused into one matrix. ``progress(done, total)`` is called after each layer.

    In int4 a matrix whose :attr:`DecoderWeights.blocks` are known keeps them (see
    :func:`_block_initializers`), so it is exactly the fp32 build's matrix; any other matrix
    (float weights, or GGUF types without such a mapping here: the K-quants, Q5_*, IQ*, ...) is
    quantized anew by :func:`_quantize_int4`, which adds its own rounding error.
    """
    if quantization not in ("fp32", "int4"):
        raise ValueError(f"quantization must be 'fp32' or 'int4', got {quantization!r}")
    if len(weights.layers) != config.num_layers:
        raise ValueError(f"weights have {len(weights.layers)} layers, config says {config.num_layers}")
    out: dict[str, np.ndarray] = {}

    def linear(name: str, weight: F32, blocks: list[BlockQuant | None]) -> None:
        exact = concat_blocks(blocks)
        if quantization == "int4" and exact is not None and exact.bits == 4:
            out.update(_block_initializers(name, exact))
        elif quantization == "int4" and exact is None:
            # no 4-bit blocks to keep: quantize anew (symmetric, round to nearest; lossy)
            q, s = _quantize_int4(np.ascontiguousarray(weight, dtype=np.float32))
            out[f"{name}.q"], out[f"{name}.scales"] = q, s
        else:
            # fp32; or 8-bit blocks (Q8_0), kept exact as float: onnxruntime's 8-bit MatMulNBits
            # either dequantizes the whole matrix on every call (accuracy_level 0, some 35x slower
            # than MatMul) or rounds the activations to int8 (level 4)
            out[name] = np.ascontiguousarray(weight.T, dtype=np.float32)

    def blocks(i: int, *names: str) -> list[BlockQuant | None]:
        return [weights.blocks.get(f"layers.{i}.{n}") for n in names]

    out["embed_tokens"] = np.ascontiguousarray(weights.embed, dtype=np.float32)
    cos, sin = rotary_cache(config)
    out["cos_cache"], out["sin_cache"] = cos, sin
    for i, layer in enumerate(weights.layers):
        p = f"layers.{i}"
        out[f"{p}.input_norm"] = np.asarray(layer["input_norm"], np.float32)
        out[f"{p}.post_norm"] = np.asarray(layer["post_norm"], np.float32)
        qkv = np.concatenate([layer["q"], layer["k"], layer["v"]], axis=0)
        linear(f"{p}.qkv", qkv, blocks(i, "q", "k", "v"))
        for n in ("o", "gate", "up", "down"):
            linear(f"{p}.{n}", layer[n], blocks(i, n))
        if progress is not None:
            progress(i + 1, config.num_layers)
    out["norm"] = np.asarray(weights.norm, np.float32)
    embed_blocks = weights.blocks.get("embed")
    if weights.lm_head is not None:
        linear("lm_head", weights.lm_head, [weights.blocks.get("lm_head")])
    elif quantization == "int4" and (embed_blocks is None or embed_blocks.bits == 4):
        linear("lm_head", weights.embed, [embed_blocks])
    # else a float head tied to the embeddings: the graph multiplies by ``embed_tokens`` transposed
    return out


def _block_initializers(name: str, w: BlockQuant) -> dict[str, np.ndarray]:
    """``MatMulNBits`` inputs that compute exactly the matrix ``w`` (in real arithmetic).

    ``{name}.q`` holds the codes (two per byte, low nibble first), ``{name}.scales`` the
    scales; ``{name}.zp`` (zero points, two per byte) is written only when the zero point is not
    the kernel's default 8. With mins (Q4_1) the zero point is 0 and
    ``{name}.mins`` ``[blocks, out]`` is added by the graph as ``block_sums(x) @ mins``: a float
    zero point ``-mins/scales`` would express it too, but onnxruntime's CPU kernel then dequantizes
    the whole matrix on every call (some 10x slower than ``MatMul``) and rounds ``(q - zp) * scale``
    differently from ``scale * q + min``.
    """
    n, blocks, _ = w.codes.shape
    if w.bits == 4:
        q = (w.codes[..., 0::2] | (w.codes[..., 1::2] << 4)).astype(np.uint8)
    else:
        q = np.ascontiguousarray(w.codes, dtype=np.uint8)
    out: dict[str, np.ndarray] = {
        f"{name}.q": q,
        f"{name}.scales": np.ascontiguousarray(w.scales.reshape(-1)),
    }
    if w.zero_point != 1 << (w.bits - 1):
        if w.bits != 4:
            raise ValueError(f"{name}: {w.bits}-bit blocks need the zero point {1 << (w.bits - 1)}")
        zp = np.full((n, blocks + blocks % 2), w.zero_point, np.uint8)
        out[f"{name}.zp"] = (zp[:, 0::2] | (zp[:, 1::2] << 4)).astype(np.uint8)
    if w.mins is not None:
        out[f"{name}.mins"] = np.ascontiguousarray(w.mins.T, dtype=np.float32)
    return out


class _Builder:
    """Accumulates nodes with unique names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.consts: list[TensorProto] = []
        self._n = 0

    def op(
        self, op_type: str, inputs: list[str], n_out: int = 1, domain: str = "", **attrs: Any
    ) -> list[str]:
        self._n += 1
        outs = [f"{op_type}_{self._n}_{j}" for j in range(n_out)]
        self.nodes.append(
            helper.make_node(op_type, inputs, outs, f"{op_type}_{self._n}", None, domain, **attrs)
        )
        return outs

    def one(self, op_type: str, inputs: list[str], domain: str = "", **attrs: Any) -> str:
        return self.op(op_type, inputs, 1, domain, **attrs)[0]

    def const(self, name: str, value: npt.ArrayLike, dtype: type = np.int64) -> str:
        """The constant ``name`` (added once: a later call with the same name reuses it)."""
        if any(c.name == name for c in self.consts):
            return name
        self.consts.append(onnx.numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name


def build_decoder(
    config: DecoderConfig,
    initializers: Mapping[str, TensorProto],
    *,
    attention: Attention = "plain",
    name: str = "decoder",
) -> onnx.ModelProto:
    """Build the decoder graph over ``initializers`` (TensorProtos named like :func:`prepare_initializers`).

    ``initializers`` may hold external-data TensorProtos (several graphs can share one data file).
    """
    if attention not in ("plain", "gqa"):
        raise ValueError(f"attention must be 'plain' or 'gqa', got {attention!r}")
    inputs, outputs = _graph_io(config, attention)
    nodes = _DecoderGraph(config, initializers, attention)
    logits = nodes.body()
    b = nodes.b
    b.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="logits_out"))
    graph = helper.make_graph(b.nodes, name, inputs, outputs, initializer=[*initializers.values(), *b.consts])
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)],
        ir_version=IR_VERSION,
        producer_name="rxstream",
    )


def _graph_io(
    c: DecoderConfig, attention: Attention
) -> tuple[list[onnx.ValueInfoProto], list[onnx.ValueInfoProto]]:
    """The graph's inputs and outputs in the Optimum layout (see the module docstring)."""
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info(
            "attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"]
        ),
    ]
    if attention == "plain":
        inputs.append(
            helper.make_tensor_value_info(
                "position_ids", TensorProto.INT64, ["batch_size", "sequence_length"]
            )
        )
    outputs = [
        helper.make_tensor_value_info(
            "logits", TensorProto.FLOAT, ["batch_size", "sequence_length", c.vocab_size]
        )
    ]
    kv_shape_in: list[str | int] = ["batch_size", c.num_kv_heads, "past_sequence_length", c.head_dim]
    kv_shape_out: list[str | int] = ["batch_size", c.num_kv_heads, "total_sequence_length", c.head_dim]
    for i in range(c.num_layers):
        for kind in ("key", "value"):
            inputs.append(
                helper.make_tensor_value_info(f"past_key_values.{i}.{kind}", TensorProto.FLOAT, kv_shape_in)
            )
            outputs.append(
                helper.make_tensor_value_info(f"present.{i}.{kind}", TensorProto.FLOAT, kv_shape_out)
            )
    return inputs, outputs


class _DecoderGraph:
    """The nodes of one decoder graph, added in order by :meth:`body` (embedding, the attention
    inputs, each layer, the final norm and the output projection)."""

    def __init__(
        self, config: DecoderConfig, initializers: Mapping[str, TensorProto], attention: Attention
    ) -> None:
        self.c = config
        self.initializers = initializers
        self.attention = attention
        self.b = _Builder()
        self.eps = float(config.rms_norm_eps)
        self.block_sums: dict[str, str] = {}  # x -> its sums over blocks of 32 (for the mins)
        # the attention inputs every layer shares (gqa: sequence lengths; plain: rotary, mask bias)
        self.seqlens = self.total = self.cos2 = self.sin2 = self.bias = ""

    def matmul(self, x: str, wname: str, k: int, n: int) -> str:
        if f"{wname}.q" not in self.initializers:
            return self.b.one("MatMul", [x, wname])
        y = self.b.one(
            "MatMulNBits",
            [x, f"{wname}.q", f"{wname}.scales"]
            + ([f"{wname}.zp"] if f"{wname}.zp" in self.initializers else []),
            domain="com.microsoft",
            K=k,
            N=n,
            bits=4,
            block_size=INT4_BLOCK,
            accuracy_level=ACCURACY_LEVEL,
        )
        if f"{wname}.mins" not in self.initializers:
            return y
        if x not in self.block_sums:
            shape = self.b.const(f"c_blocks_{k}", [0, 0, k // INT4_BLOCK, INT4_BLOCK])
            blocked = self.b.one("Reshape", [x, shape])
            self.block_sums[x] = self.b.one(
                "ReduceSum", [blocked, self.b.const("c_axes_last", [-1])], keepdims=0
            )
        return self.b.one("Add", [y, self.b.one("MatMul", [self.block_sums[x], f"{wname}.mins"])])

    def rms(self, x: str, weight: str) -> str:
        return self.b.op(
            "SimplifiedLayerNormalization", [x, weight], 1, axis=-1, epsilon=self.eps, stash_type=1
        )[0]

    def skip_rms(self, x: str, residual: str, weight: str) -> tuple[str, str]:
        """RMS norm of ``x + residual``: (normalized, the new residual stream)."""
        out, _, _, h = self.b.op(
            "SkipSimplifiedLayerNormalization",
            [x, residual, weight],
            4,
            domain="com.microsoft",
            epsilon=self.eps,
        )
        return out, h

    def body(self) -> str:
        """Add every node; return the name of the logits."""
        b, c = self.b, self.c
        b.const("c_axes1", [1])
        h = b.one("Gather", ["embed_tokens", "input_ids"], axis=0)
        if self.attention == "gqa":
            self._gqa_lengths()
        else:
            self._plain_tables()
        pending = ""  # the last MLP output, added to the residual stream by the next fused norm
        for i in range(c.num_layers):
            h, pending = self._layer(i, h, pending)
        final, _ = self.skip_rms(pending, h, "norm")
        if "lm_head" in self.initializers or "lm_head.q" in self.initializers:
            return self.matmul(final, "lm_head", c.hidden_size, c.vocab_size)
        return b.one("MatMul", [final, b.one("Transpose", ["embed_tokens"], perm=[1, 0])])

    def _gqa_lengths(self) -> None:
        """GroupQueryAttention's per-row past lengths and the total length, from the mask."""
        b = self.b
        mask_sum = b.one("ReduceSum", ["attention_mask", "c_axes1"], keepdims=0)
        past = b.one("Sub", [mask_sum, b.const("c_one_i64", 1)])
        self.seqlens = b.one("Cast", [past], to=TensorProto.INT32)
        self.total = b.one(
            "Cast",
            [b.one("Gather", [b.one("Shape", ["attention_mask"]), b.const("c_one_s", 1)], axis=0)],
            to=TensorProto.INT32,
        )

    def _plain_tables(self) -> None:
        """Rotary tables for the given positions and the causal + padding mask as an additive bias."""
        b, c = self.b, self.c
        nh, nkv, hd = c.num_heads, c.num_kv_heads, c.head_dim
        # rotary tables for the given positions: [B, 1, S, hd] in rotate_half layout
        cos_half = b.one("Unsqueeze", [b.one("Gather", ["cos_cache", "position_ids"], axis=0), "c_axes1"])
        sin_half = b.one("Unsqueeze", [b.one("Gather", ["sin_cache", "position_ids"], axis=0), "c_axes1"])
        self.cos2 = b.one("Concat", [cos_half, cos_half], axis=-1)
        self.sin2 = b.one("Concat", [sin_half, sin_half], axis=-1)
        # causal + padding mask as an additive bias [B, 1, S, T]
        s_len = b.one("Gather", [b.one("Shape", ["input_ids"]), b.const("c_one_s", 1)], axis=0)
        t_len = b.one("Gather", [b.one("Shape", ["attention_mask"]), "c_one_s"], axis=0)
        past_len = b.one("Sub", [t_len, s_len])
        zero = b.const("c_zero_s", 0)
        one = b.const("c_one_i64s", 1)
        q_pos = b.one("Add", [b.one("Range", [zero, s_len, one]), past_len])
        k_pos = b.one("Range", [zero, t_len, one])
        causal = b.one(
            "LessOrEqual",
            [b.one("Unsqueeze", [k_pos, b.const("c_axes0", [0])]), b.one("Unsqueeze", [q_pos, "c_axes1"])],
        )  # [S, T]
        pad = b.one(
            "Cast", [b.one("Unsqueeze", ["attention_mask", b.const("c_axes12", [1, 2])])], to=TensorProto.BOOL
        )  # [B, 1, 1, T]
        allowed = b.one("And", [causal, pad])
        self.bias = b.one(
            "Where",
            [
                allowed,
                b.const("c_f0", 0.0, np.float32),
                b.const("c_fmin", np.finfo(np.float32).min, np.float32),
            ],
        )
        b.const("c_q_shape", [0, 0, nh, hd])
        b.const("c_kv_shape", [0, 0, nkv, hd])
        b.const("c_expand", [1, 1, nh // nkv, 1, 1])
        b.const("c_heads_shape", [0, nh, -1, hd])
        b.const("c_merge", [0, 0, c.hidden_size])
        b.const("c_scale", 1.0 / np.sqrt(hd), np.float32)
        b.const("c_half", [hd // 2, hd // 2])
        b.const("c_axes2", [2])
        b.const("c_split_qkv", [nh * hd, nkv * hd, nkv * hd])

    def _layer(self, i: int, h: str, pending: str) -> tuple[str, str]:
        """Layer ``i`` on the residual stream ``h`` (``pending``: the previous MLP output, not yet
        added); returns the new residual stream and this layer's MLP output."""
        c, p = self.c, f"layers.{i}"
        hidden = c.hidden_size
        if i == 0:
            x = self.rms(h, f"{p}.input_norm")
        else:
            x, h = self.skip_rms(pending, h, f"{p}.input_norm")
        qkv = self.matmul(x, f"{p}.qkv", hidden, (c.num_heads + 2 * c.num_kv_heads) * c.head_dim)
        attn = self._gqa_attention(i, qkv) if self.attention == "gqa" else self._plain_attention(i, qkv)
        o = self.matmul(attn, f"{p}.o", hidden, hidden)
        x, h = self.skip_rms(o, h, f"{p}.post_norm")
        gate = self.matmul(x, f"{p}.gate", hidden, c.intermediate_size)
        up = self.matmul(x, f"{p}.up", hidden, c.intermediate_size)
        act = self.b.one("Mul", [self.b.one("Mul", [gate, self.b.one("Sigmoid", [gate])]), up])
        return h, self.matmul(act, f"{p}.down", c.intermediate_size, hidden)

    def _gqa_attention(self, i: int, qkv: str) -> str:
        c = self.c
        self.b.one(
            "GroupQueryAttention",
            [
                qkv,
                "",
                "",
                f"past_key_values.{i}.key",
                f"past_key_values.{i}.value",
                self.seqlens,
                self.total,
                "cos_cache",
                "sin_cache",
            ],
            domain="com.microsoft",
            num_heads=c.num_heads,
            kv_num_heads=c.num_kv_heads,
            do_rotary=1,
            rotary_interleaved=0,
            local_window_size=-1,
            scale=float(1.0 / np.sqrt(c.head_dim)),
        )
        # GroupQueryAttention has three outputs; name the last two as the graph's present outputs
        node = self.b.nodes[-1]
        node.output.extend([f"present.{i}.key", f"present.{i}.value"])
        return str(node.output[0])

    def _rope(self, x: str) -> str:  # x [B, H, S, hd]
        b = self.b
        x1, x2 = b.op("Split", [x, "c_half"], 2, axis=-1)
        rotated = b.one("Concat", [b.one("Neg", [x2]), x1], axis=-1)
        return b.one("Add", [b.one("Mul", [x, self.cos2]), b.one("Mul", [rotated, self.sin2])])

    def _heads(self, t: str) -> str:  # [B, kv, T, hd] -> [B, nh, T, hd]
        if self.c.num_heads == self.c.num_kv_heads:
            return t
        e = self.b.one("Expand", [self.b.one("Unsqueeze", [t, "c_axes2"]), "c_expand"])
        return self.b.one("Reshape", [e, "c_heads_shape"])

    def _plain_attention(self, i: int, qkv: str) -> str:
        b = self.b
        past_k, past_v = f"past_key_values.{i}.key", f"past_key_values.{i}.value"
        pres_k, pres_v = f"present.{i}.key", f"present.{i}.value"
        q, k, v = b.op("Split", [qkv, "c_split_qkv"], 3, axis=-1)
        q = self._rope(b.one("Transpose", [b.one("Reshape", [q, "c_q_shape"])], perm=[0, 2, 1, 3]))
        k = self._rope(b.one("Transpose", [b.one("Reshape", [k, "c_kv_shape"])], perm=[0, 2, 1, 3]))
        v = b.one("Transpose", [b.one("Reshape", [v, "c_kv_shape"])], perm=[0, 2, 1, 3])
        b.nodes.append(helper.make_node("Concat", [past_k, k], [pres_k], name=f"concat_k_{i}", axis=2))
        b.nodes.append(helper.make_node("Concat", [past_v, v], [pres_v], name=f"concat_v_{i}", axis=2))
        scores = b.one("MatMul", [q, b.one("Transpose", [self._heads(pres_k)], perm=[0, 1, 3, 2])])
        scores = b.one("Add", [b.one("Mul", [scores, "c_scale"]), self.bias])
        probs = b.one("Softmax", [scores], axis=-1)
        ctx = b.one("MatMul", [probs, self._heads(pres_v)])
        return b.one("Reshape", [b.one("Transpose", [ctx], perm=[0, 2, 1, 3]), "c_merge"])
