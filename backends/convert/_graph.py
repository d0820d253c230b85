"""Build a Llama-style decoder with KV cache as an ONNX graph, with ``onnx.helper``.

The graph has the Hugging Face Optimum input/output names: inputs ``input_ids`` [batch, seq],
``attention_mask`` [batch, past + seq], ``position_ids`` [batch, seq] (plain attention only) and
``past_key_values.{i}.key/value`` [batch, kv_heads, past, head_dim]; outputs ``logits``
[batch, seq, vocab] and ``present.{i}.key/value`` [batch, kv_heads, past + seq, head_dim]; and one
more input, ``logits_to_keep`` (int64 scalar, 0: every position), the number of last positions
whose logits are computed: a prompt pass that only samples the next token feeds 1 and skips the
head for the rest (for SmolLM2, whose head is a 49152 x 576 product, about a fifth of a prompt
pass).

Two attention variants share the same weights:

* ``"plain"``: standard ONNX ops (MatMul/Softmax with an explicit causal + padding mask and
  explicit rotary embeddings from ``position_ids``). Handles left-padded batches.
* ``"gqa"``: ORT's fused ``com.microsoft.GroupQueryAttention`` (rotary inside, positions from the
  cache length). Much faster on CPU, but it assumes right padding, so it is used for single
  sequences only. It has no ``position_ids`` input (like the onnxruntime-genai builder's models).

Weights are given as :class:`DecoderWeights` (Hugging Face orientation, ``[out, in]``) and turned
into initializers by :func:`prepare_initializers` (fp32 ``MatMul`` or int4 ``MatMulNBits``).

The int4 build keeps a GGUF's own blocks where they are linear (``w = scale * (code - zero)``, or
``scale * code + min``), so its weights are exactly the fp32 build's: blocks of at most 4 bits
(Q4_0, Q4_1, Q4_K, Q3_K, Q2_K) go into ``MatMulNBits`` as they are, with fp32 activations
(``accuracy_level`` 0); blocks of 5 to 8 bits (Q5_0, Q5_1, Q5_K, Q6_K, Q8_0) stay float ``MatMul``.
Two exact ``MatMulNBits`` forms of those exist but are slower on CPU with onnxruntime 1.31:
``bits=8`` with float activations dequantizes the whole matrix on every call (~3 ms against
0.06 ms for a 576 x 960 matrix), and splitting each code into a high and a low 4-bit plane
(``s * (c - z) = 16 s * (hi - zh) + s * (lo - zl)``, both exact float32 products, over the input
repeated twice along K) decoded SmolLM2 with Q8_0 layers 1.28x slower per token, and its 83-token
prompt 1.9x slower, than float ``MatMul`` (one thread). Other matrices (float weights, IQ*, TQ*,
FP4 types) are quantized to 4 bits anew (symmetric, round to nearest: lossy).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper

from ..onnx._config import DecoderConfig, Quantization, check_quantization

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
F32 = npt.NDArray[np.float32]

IR_VERSION = 10

LOGITS_TO_KEEP = "logits_to_keep"
"""Scalar input: logits for the last N positions only (0: every position)."""
OPSET = 17
INT4_BLOCK = 32
NBITS_HEAD_ROWS = 1
"""A head tied to 4-bit embeddings runs as ``MatMulNBits`` for steps of at most this many rows (batch
times sequence), as a float ``MatMul`` over the embedding table for longer ones. Measured on
SmolLM2's head shape (576 x 49152, one thread): 2.4 ms against 6.5 ms for one row, but 8.0 against
7.2 ms for two rows and 50 against 47 ms for 83."""
NBITS_HEAD_ROWS_A8 = 16
"""The same bound for a head with 8-bit activations (``int4-a8``): its ``MatMulNBits`` (8-bit codes,
int8 dot products) beats the float ``MatMul`` up to about 16 rows on SmolLM2's head (1.3 against
5.5 ms for one row, 12.7 against 17 for 16, 22 against 18 for 32)."""
ACCURACY_LEVEL = 0
"""``MatMulNBits`` ``accuracy_level`` of the exact builds: 0, float32 activations. ``int4-a8``
uses level 4 (int8 activations quantized per block of the weights' block size, int32 sums)."""
A8_LEVEL = 4


@dataclass(frozen=True)
class BlockQuant:
    """A matrix ``[out, in]`` in blocks along ``in``: ``w = (codes - zero_point) * scales``, plus
    ``mins`` when given (then ``zero_point`` is 0 and ``w = scales * codes + mins``).

    This is how GGUF stores its block types, read by :func:`~._gguf.block_quant`: Q4_0 (4 bits,
    zero point 8), Q4_1 (4 bits, with mins), Q5_0 / Q5_1 (5 bits), Q8_0 (8 bits, zero point 128
    after adding 128 to the signed codes), and the K-quants per sub-block with the super-block's
    scales already multiplied in (Q2_K: 2 bits with mins, blocks of 16; Q3_K: 3 bits, zero point 4,
    blocks of 16; Q4_K / Q5_K: 4 / 5 bits with mins, blocks of 32; Q6_K: 6 bits, zero point 32,
    blocks of 16). :meth:`dequantize` computes the same float32 values as ``gguf.quants.dequantize``.

    Attributes:
        codes: ``[out, blocks, block_size]`` uint8 in ``0 .. 2**bits - 1``.
        scales: ``[out, blocks]``.
        zero_point: subtracted from every code.
        bits: 2 to 8.
        mins: ``[out, blocks]`` or None.
    """

    codes: npt.NDArray[np.uint8]
    scales: F32
    zero_point: int
    bits: int
    mins: F32 | None = None

    @property
    def block_size(self) -> int:
        """Weights per block (a power of two, at least 16)."""
        return int(self.codes.shape[2])

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


@dataclass(frozen=True)
class Nibbles:
    """A matrix ``[out, in]`` as one 4-bit ``MatMulNBits`` computes it: ``(codes - zero_points) *
    scales`` per block, plus ``mins`` times the input's block sums (added by the graph).

    Rows of blocks of 4 bits or less (:class:`BlockQuant` of Q4_0, Q4_1, Q4_K, Q3_K, Q2_K; or the
    symmetric re-quantization of float weights) of one block size concatenate into one ``Nibbles``:
    zero points are per block, and rows without mins get zero mins.

    Attributes:
        codes: ``[out, blocks, block_size]`` uint8 in ``0 .. 15``.
        scales: ``[out, blocks]``.
        zero_points: ``[out, blocks]`` uint8 in ``0 .. 15``.
        mins: ``[out, blocks]`` or None.
    """

    codes: npt.NDArray[np.uint8]
    scales: F32
    zero_points: npt.NDArray[np.uint8]
    mins: F32 | None = None

    @classmethod
    def of(cls, w: BlockQuant, *, center: bool = False, bits: int = 4) -> Nibbles:
        """``w``'s blocks (codes of at most ``bits`` bits: 4, or 8 for an 8-bit ``MatMulNBits``).

        ``center``: blocks with mins (``w = s * c + m``) get the zero point nearest ``-m / s``
        (clipped to the codes' range) and keep only the rest of the min, ``m + s * z``:
        ``s * (c - z) + (m + s * z)`` is the same weight, but the product the kernel computes
        is now over centred weights, so 8-bit activations' rounding error is not multiplied by
        the blocks' mean (``s * c`` is about ``8 s`` on average; ``s * (c - z)`` about 0) --
        what llama.cpp gets by summing the quantized activations for the mins (Q8_1).
        """
        if w.bits > bits:
            raise ValueError(f"Nibbles: {w.bits}-bit codes do not fit {bits} bits")
        zero = np.full(w.scales.shape, w.zero_point, np.uint8)
        mins = w.mins
        if center and mins is not None:
            top = (1 << bits) - 1
            safe = np.where(w.scales == 0, np.float32(1), w.scales)
            z = np.where(w.scales == 0, 0, np.clip(np.rint(-mins / safe), 0, top)).astype(np.uint8)
            rest = (mins + w.scales * z.astype(np.float32)).astype(np.float32)
            zero, mins = z, (rest if rest.any() else None)
        return cls(w.codes, w.scales, zero, mins)

    @property
    def block_size(self) -> int:
        """Weights per block: matrices of one block size concatenate (by rows) into one ``MatMulNBits``."""
        return int(self.codes.shape[2])

    def dequantize(self) -> F32:
        """The float32 matrix ``[out, in]`` (as :meth:`BlockQuant.dequantize` computes it)."""
        n, blocks, size = self.codes.shape
        codes = self.codes.astype(np.int16) - self.zero_points[..., None].astype(np.int16)
        w = codes.astype(np.float32) * self.scales[..., None]
        if self.mins is not None:
            w = w + self.mins[..., None]
        return np.asarray(w, np.float32).reshape(n, blocks * size)


def concat_nibbles(parts: list[Nibbles]) -> Nibbles:
    """The row-wise concatenation of ``parts`` (one block size; zero mins where a part has none)."""
    mins = None
    if any(p.mins is not None for p in parts):
        mins = np.concatenate([np.zeros_like(p.scales) if p.mins is None else p.mins for p in parts])
    return Nibbles(
        np.concatenate([p.codes for p in parts]),
        np.concatenate([p.scales for p in parts]),
        np.concatenate([p.zero_points for p in parts]),
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


def _quantize_int4(weight: F32) -> BlockQuant:
    """Round-to-nearest symmetric 4-bit quantization in blocks of 32 along the input axis.

    Each block's largest-magnitude weight ``m`` maps exactly to code 0 (``scale = m / -8``), the
    others to ``round(w / scale) + 8`` clipped to 0..15, read as ``(q - 8) * scale``. An input
    width that is not a multiple of 32 is padded with zero weights.
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
    return BlockQuant(q, scale, zero_point=8, bits=4)


def prepare_initializers(
    config: DecoderConfig,
    weights: DecoderWeights,
    quantization: Quantization = "fp32",
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, np.ndarray]:
    """Turn :class:`DecoderWeights` into the named arrays :func:`build_decoder` expects.

    Linear layers become ``{name}`` (``[in, out]`` for ``MatMul``) in fp32, or ``MatMulNBits``
    inputs in int4 (see :func:`_nibble_initializers`). Q/K/V are fused into one matrix; in
    ``int4-a8`` so are the MLP's gate and up (``{p}.gate_up``, gate's rows first, split after the
    product: each output column is the same sum as before).
    ``progress(done, total)`` is called after each layer.

    In int4 every matrix stays exactly the fp32 build's where its GGUF blocks are known
    (:attr:`DecoderWeights.blocks`): blocks of at most 4 bits (Q4_0, Q4_1, Q4_K, Q3_K, Q2_K) go into
    ``MatMulNBits`` as they are; wider ones (Q5_0, Q5_1, Q5_K, Q6_K, Q8_0) stay float ``MatMul``
    (see the module docstring). Any other matrix (float weights, or GGUF types without a linear
    block form: IQ*, TQ*, MXFP4, ...) is quantized anew by :func:`_quantize_int4`, which adds its own
    rounding error. Rows of different kinds (say Q and K in Q4_K, V in Q6_K) become segments
    ``{name}.s0``, ``{name}.s1``, ... whose outputs the graph concatenates. A head tied to 4-bit
    embeddings is also written as ``lm_head`` for ``MatMulNBits`` (the graph uses it for
    single-row steps, see :data:`NBITS_HEAD_ROWS`).

    ``int4-a8`` writes the same weights for 8-bit activations (the graph's ``MatMulNBits`` at
    ``accuracy_level`` 4, :data:`A8_LEVEL`): blocks with mins get centred zero points
    (:meth:`Nibbles.of`), blocks of 5 to 8 bits become 8-bit ``MatMulNBits`` (``{name}.q8``)
    instead of floats, and a head tied to quantized embeddings is written as ``lm_head`` too
    (used for steps of at most :data:`NBITS_HEAD_ROWS_A8` rows). The codes, scales and zero
    points are still the GGUF's, value for value in real arithmetic; what is rounded is each block
    of 32 activations, to 8 bits, as llama.cpp rounds them, and the rest of each centred min (at
    most half a step), to the matrix's own code width in extra blocks of the same ``MatMulNBits``
    (:func:`_with_rests`): a block's weights move together by at most half a step of its row's
    rest codes (1/30 of the range of that row's rests at 4 bits, 1/510 at 8).
    """
    a8 = check_quantization(quantization, "prepare_initializers") == "int4-a8"
    if len(weights.layers) != config.num_layers:
        raise ValueError(f"weights have {len(weights.layers)} layers, config says {config.num_layers}")
    out: dict[str, np.ndarray] = {}

    def linear(name: str, parts: list[tuple[F32, BlockQuant | None]]) -> None:
        if quantization == "fp32":
            weight = np.concatenate([w for w, _ in parts]) if len(parts) > 1 else parts[0][0]
            out[name] = np.ascontiguousarray(weight.T, dtype=np.float32)
            return
        # runs of consecutive rows of one kind: MatMulNBits of (bits, block size), or floats (0, 0)
        segments: list[tuple[tuple[int, int], list[Nibbles], list[F32]]] = []
        for weight, blocks in parts:
            key: tuple[int, int]
            if blocks is not None and blocks.bits > 4 and a8:  # exact 8-bit codes, int8 products
                n = Nibbles.of(blocks, center=True, bits=8)
                key, nibbles, floats = (8, n.block_size), [n], []
            elif blocks is not None and blocks.bits > 4:  # exact as floats (see the module docstring)
                key, nibbles, floats = (0, 0), [], [np.asarray(weight, np.float32)]
            else:
                n = Nibbles.of(blocks if blocks is not None else _quantize_int4(weight), center=a8)
                key, nibbles, floats = (4, n.block_size), [n], []
            if segments and segments[-1][0] == key:
                segments[-1][1].extend(nibbles)
                segments[-1][2].extend(floats)
            else:
                segments.append((key, nibbles, floats))
        for j, (key, nibbles, floats) in enumerate(segments):
            prefix = name if len(segments) == 1 else f"{name}.s{j}"
            if key[0]:
                joined = _with_rests(concat_nibbles(nibbles), key[0]) if a8 else concat_nibbles(nibbles)
                out.update(_nibble_initializers(prefix, joined, bits=key[0]))
            else:
                out[prefix] = np.ascontiguousarray(np.concatenate(floats).T, dtype=np.float32)

    def part(i: int, n: str) -> tuple[F32, BlockQuant | None]:
        return weights.layers[i][n], weights.blocks.get(f"layers.{i}.{n}")

    out["embed_tokens"] = np.ascontiguousarray(weights.embed, dtype=np.float32)
    cos, sin = rotary_cache(config)
    out["cos_cache"], out["sin_cache"] = cos, sin
    for i, layer in enumerate(weights.layers):
        p = f"layers.{i}"
        out[f"{p}.input_norm"] = np.asarray(layer["input_norm"], np.float32)
        out[f"{p}.post_norm"] = np.asarray(layer["post_norm"], np.float32)
        linear(f"{p}.qkv", [part(i, "q"), part(i, "k"), part(i, "v")])
        if a8:  # one wider product (measured: 0.95x a step; fp32 and int4 gained nothing)
            linear(f"{p}.gate_up", [part(i, "gate"), part(i, "up")])
        else:
            linear(f"{p}.gate", [part(i, "gate")])
            linear(f"{p}.up", [part(i, "up")])
        for n in ("o", "down"):
            linear(f"{p}.{n}", [part(i, n)])
        if progress is not None:
            progress(i + 1, config.num_layers)
    out["norm"] = np.asarray(weights.norm, np.float32)
    embed_blocks = weights.blocks.get("embed")
    if weights.lm_head is not None:
        linear("lm_head", [(weights.lm_head, weights.blocks.get("lm_head"))])
    elif quantization == "int4" and (embed_blocks is None or embed_blocks.bits <= 4):
        linear("lm_head", [(weights.embed, embed_blocks)])
    elif a8 and embed_blocks is not None:  # 4- or 8-bit codes, int8 products (see NBITS_HEAD_ROWS_A8)
        linear("lm_head", [(weights.embed, embed_blocks)])
    # else a float head tied to the embeddings: the graph multiplies by ``embed_tokens`` transposed
    return out


def _nibble_initializers(name: str, w: Nibbles, bits: int = 4) -> dict[str, np.ndarray]:
    """``MatMulNBits`` inputs (4 bits) that compute exactly the matrix ``w`` (in real arithmetic).

    ``{name}.q`` ``[out, blocks, block_size / 2]`` holds the codes (two per byte, low nibble
    first), ``{name}.scales`` the scales; ``{name}.zp`` (zero points, two per byte) is written only
    when one is not the kernel's default 8. ``{name}.mins`` ``[blocks, out]`` is added by the graph
    as ``block_sums(x) @ mins``: a float zero point ``-mins/scales`` would express it too, but
    onnxruntime's CPU kernel then dequantizes the whole matrix on every call (some 10x slower than
    ``MatMul``) and rounds ``(q - zp) * scale`` differently from ``scale * q + min``.
    ``bits=8``: ``{name}.q8`` ``[out, blocks, block_size]`` and ``{name}.zp`` one byte a block.
    Codes with more blocks than the input has (:func:`_with_rests`) take the input's block sums
    after it.
    """
    n, blocks, _ = w.codes.shape
    mins = {} if w.mins is None else {f"{name}.mins": np.ascontiguousarray(w.mins.T, np.float32)}
    if bits == 8:  # one code and one zero point a byte
        return {
            f"{name}.q8": np.ascontiguousarray(w.codes, dtype=np.uint8),
            f"{name}.scales": np.ascontiguousarray(w.scales.reshape(-1), dtype=np.float32),
            f"{name}.zp": np.ascontiguousarray(w.zero_points.reshape(-1), dtype=np.uint8),
            **mins,
        }
    out: dict[str, np.ndarray] = {
        f"{name}.q": (w.codes[..., 0::2] | (w.codes[..., 1::2] << np.uint8(4))).astype(np.uint8),
        f"{name}.scales": np.ascontiguousarray(w.scales.reshape(-1), dtype=np.float32),
    }
    if (w.zero_points != 8).any():
        zp = w.zero_points
        if blocks % 2:
            zp = np.concatenate([zp, np.zeros((n, 1), np.uint8)], axis=1)
        out[f"{name}.zp"] = (zp[:, 0::2] | (zp[:, 1::2] << np.uint8(4))).astype(np.uint8)
    return {**out, **mins}


def _with_rests(w: Nibbles, bits: int) -> Nibbles:
    """``w`` with its mins as extra blocks (``int4-a8``): the rests ``[out, blocks]``,
    ``block_size`` of them a block, rounded to ``bits``-bit codes with their own scale and zero
    point (0 exactly representable, so the unused end of the last block adds nothing); ``w``
    itself where it has no mins. The graph feeds such a ``MatMulNBits`` ``x`` followed by its block
    sums (``K`` grows by one per block of ``x``), so the mins term comes out of the linear's own
    kernel call, as llama.cpp's Q4_1 dot product adds its ``m * s_a`` term in the same loop.
    Measured on SmolLM2 (a decode step, interleaved processes, both load orders): 0.915x and
    0.923x as long as with a separate 8-bit ``MatMulNBits`` for the term."""
    if w.mins is None:
        return w
    n, blocks, size = w.codes.shape
    extra = -(-blocks // size)
    rests = np.zeros((n, extra * size), np.float32)
    rests[:, :blocks] = w.mins
    grouped = rests.reshape(n, extra, size)
    low = np.minimum(grouped.min(axis=-1), 0)
    high = np.maximum(grouped.max(axis=-1), 0)
    top = (1 << bits) - 1
    scales = np.where(high > low, (high - low) / np.float32(top), np.float32(1)).astype(np.float32)
    zero = np.clip(np.rint(-low / scales), 0, top)
    codes = np.clip(np.rint(grouped / scales[..., None]) + zero[..., None], 0, top)
    return Nibbles(
        np.concatenate([w.codes, codes.astype(np.uint8)], axis=1),
        np.concatenate([w.scales, scales], axis=1),
        np.concatenate([w.zero_points, zero.astype(np.uint8)], axis=1),
        None,
    )


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
    quantization: Quantization = "fp32",
    float_weights: bool = False,
) -> onnx.ModelProto:
    """Build the decoder graph over ``initializers`` (TensorProtos named like :func:`prepare_initializers`
    for ``quantization``: ``int4-a8`` runs every ``MatMulNBits`` with 8-bit activations).

    ``float_weights``: the same initializers, but each ``MatMulNBits`` (with its mins term) becomes
    a float ``MatMul`` over the matrix its codes, scales, zero points and mins make, computed by
    nodes whose inputs are all initializers: onnxruntime folds them into float weights when it
    opens the session, so the file stays small and the weights are, value for value, the fp32
    build's (``s * c + m`` as gguf-py dequantizes them). The batch scheduler runs its several-row
    steps on this graph (:data:`~rxstream.backends.onnx._config.FLOAT_MODEL_FILE`).

    ``initializers`` may hold external-data TensorProtos (several graphs can share one data file).
    """
    if attention not in ("plain", "gqa"):
        raise ValueError(f"attention must be 'plain' or 'gqa', got {attention!r}")
    check_quantization(quantization, "build_decoder")
    inputs, outputs = _graph_io(config, attention)
    nodes = _DecoderGraph(config, initializers, attention, quantization == "int4-a8", float_weights)
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
    # 0: logits for every position; 1: for the last one only (a prompt pass that samples the next
    # token)
    inputs.append(helper.make_tensor_value_info(LOGITS_TO_KEEP, TensorProto.INT64, []))
    outputs = [
        helper.make_tensor_value_info(
            "logits", TensorProto.FLOAT, ["batch_size", "logits_length", c.vocab_size]
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
        self,
        config: DecoderConfig,
        initializers: Mapping[str, TensorProto],
        attention: Attention,
        a8: bool = False,
        float_weights: bool = False,
    ) -> None:
        self.c = config
        self.float_weights = float_weights
        self.initializers = initializers
        self.attention = attention
        self.level = A8_LEVEL if a8 else ACCURACY_LEVEL
        self.head_rows = NBITS_HEAD_ROWS_A8 if a8 else NBITS_HEAD_ROWS
        self.b = _Builder()
        self.eps = float(config.rms_norm_eps)
        self.block_sums: dict[tuple[str, int], str] = {}  # (x, block size) -> x's block sums
        # the attention inputs every layer shares (gqa: sequence lengths; plain: rotary, mask bias)
        self.seqlens = self.total = self.cos2 = self.sin2 = self.bias = ""

    def _segments(self, wname: str) -> list[str]:
        """The prefixes of ``wname``'s segments: itself, or ``{wname}.s0``, ``{wname}.s1``, ...
        (each a float matrix or ``MatMulNBits`` inputs ``{prefix}.q`` ...); none if absent."""
        if any(f"{wname}{end}" in self.initializers for end in ("", ".q", ".q8")):
            return [wname]
        found: list[str] = []
        while any(f"{wname}.s{len(found)}{end}" in self.initializers for end in ("", ".q", ".q8")):
            found.append(f"{wname}.s{len(found)}")
        return found

    def matmul(self, x: str, wname: str, k: int, n: int) -> str:
        outs = [
            self._nbits(x, p, k)
            if f"{p}.q" in self.initializers or f"{p}.q8" in self.initializers
            else self.b.one("MatMul", [x, p])
            for p in self._segments(wname)
        ]
        if not outs:
            raise ValueError(f"build_decoder: no initializers for {wname!r}")
        return outs[0] if len(outs) == 1 else self.b.one("Concat", outs, axis=-1)

    def _nbits(self, x: str, prefix: str, k: int) -> str:
        """One ``MatMulNBits`` (see :func:`_nibble_initializers`), plus its mins term."""
        b = self.b
        if self.float_weights:
            return b.one("MatMul", [x, self._dequantized(prefix, k)])
        bits = 8 if f"{prefix}.q8" in self.initializers else 4
        codes = f"{prefix}.q8" if bits == 8 else f"{prefix}.q"
        n, blocks, width = (int(d) for d in self.initializers[codes].dims)
        size = width * 8 // bits
        zp = [f"{prefix}.zp"] if f"{prefix}.zp" in self.initializers else []
        x_in, k_in = x, k
        if blocks > -(-k // size):  # rest blocks (_with_rests): x, then its block sums
            x_in = b.one("Concat", [x, self._block_sums(x, k, size)], axis=-1)
            k_in = k + k // size
        y = b.one(
            "MatMulNBits",
            [x_in, codes, f"{prefix}.scales", *zp],
            domain="com.microsoft",
            K=k_in,
            N=n,
            bits=bits,
            block_size=size,
            accuracy_level=self.level,
        )
        if f"{prefix}.mins" not in self.initializers:
            return y
        return b.one("Add", [y, b.one("MatMul", [self._block_sums(x, k, size), f"{prefix}.mins"])])

    def _block_sums(self, x: str, k: int, size: int) -> str:
        """The sums of ``x``'s blocks of ``size`` (``[..., k / size]``), made once per input."""
        b = self.b
        if (x, size) not in self.block_sums:
            blocked = b.one("Reshape", [x, b.const(f"c_blocks_{k}_{size}", [0, 0, k // size, size])])
            axes = b.const("c_axes_last", [-1])
            self.block_sums[(x, size)] = b.one("ReduceSum", [blocked, axes], keepdims=0)
        return self.block_sums[(x, size)]

    def _dequantized(self, prefix: str, k: int) -> str:
        """The float ``[k, n]`` matrix of ``prefix``'s ``MatMulNBits`` inputs, from initializers
        only (folded when the session opens): ``scale * (code - zero point) + min`` per block, in
        that order, as gguf-py computes it. Codes and zero points are unpacked as bytes, so the
        folding makes few float intermediates of the matrix's size (onnxruntime holds them until
        its folding pass ends)."""
        b = self.b
        bits = 8 if f"{prefix}.q8" in self.initializers else 4
        codes = f"{prefix}.q8" if bits == 8 else f"{prefix}.q"
        n, blocks, width = (int(d) for d in self.initializers[codes].dims)
        size = width * 8 // bits
        if blocks > -(-k // size):
            raise ValueError(f"build_decoder: {prefix} has rest blocks (int4-a8), not float weights")
        last = b.const("c_axis_last", [-1])
        if bits == 4:  # two codes a byte, the low nibble first
            codes = b.one(
                "Reshape", [self._nibbles(codes), b.const(f"c_shape_{n}_{blocks}_{size}", [n, blocks, size])]
            )
        values = b.one("Cast", [codes], to=TensorProto.FLOAT)
        shape = b.const(f"c_shape_{n}_{blocks}", [n, blocks])
        if f"{prefix}.zp" in self.initializers:
            zero = f"{prefix}.zp"
            if bits == 4:  # two zero points a byte along the blocks, padded to whole bytes
                half = (blocks + 1) // 2
                zero = self._nibbles(b.one("Reshape", [zero, b.const(f"c_shape_{n}_{half}", [n, half])]))
                flat = b.one("Reshape", [zero, b.const(f"c_shape_{n}_{2 * half}", [n, 2 * half])])
                ends = (
                    b.const("c_zero_1", [0]),
                    b.const(f"c_end_{blocks}", [blocks]),
                    b.const("c_axes1", [1]),
                )
                zero = b.one("Slice", [flat, *ends])
            zero = b.one("Cast", [b.one("Reshape", [zero, shape])], to=TensorProto.FLOAT)
            values = b.one("Sub", [values, b.one("Unsqueeze", [zero, last])])
        else:  # MatMulNBits' default zero point: the middle code
            values = b.one(
                "Sub", [values, b.const(f"c_f_{1 << (bits - 1)}", float(1 << (bits - 1)), np.float32)]
            )
        scales = b.one("Unsqueeze", [b.one("Reshape", [f"{prefix}.scales", shape]), last])
        w = b.one("Mul", [values, scales])
        if f"{prefix}.mins" in self.initializers:  # [blocks, n]
            mins = b.one("Unsqueeze", [b.one("Transpose", [f"{prefix}.mins"], perm=[1, 0]), last])
            w = b.one("Add", [w, mins])
        w = b.one("Reshape", [w, b.const(f"c_shape_{n}_{k}", [n, k])])
        return b.one("Transpose", [w], perm=[1, 0])

    def _nibbles(self, packed: str) -> str:
        """Bytes ``[..., m]`` split into their low and high nibbles, ``[..., m, 2]`` (bytes)."""
        b = self.b
        last = b.const("c_axis_last", [-1])
        four = b.const("c_u8_4", 4, np.uint8)
        high = b.one("BitShift", [packed, four], direction="RIGHT")
        low = b.one(
            "BitShift", [b.one("BitShift", [packed, four], direction="LEFT"), four], direction="RIGHT"
        )
        return b.one("Concat", [b.one("Unsqueeze", [low, last]), b.one("Unsqueeze", [high, last])], axis=-1)

    def head(self, final: str) -> str:
        """The logits: ``lm_head`` (float, ``MatMulNBits`` or segments), or the float embeddings
        transposed (a tied head).

        A tied head that also has 4-bit ``lm_head`` blocks uses them for at most
        :data:`NBITS_HEAD_ROWS` rows of logits (decoding steps, and prompt passes that keep only
        the last position's logits: they read a sixth of the floats' bytes) and the
        float embedding table for longer ones (prompts), where onnxruntime's float-activation
        ``MatMulNBits`` dequantizes every block on each call and is slower than ``MatMul``.
        """
        b, c = self.b, self.c

        def floats() -> str:
            return b.one("MatMul", [final, b.one("Transpose", ["embed_tokens"], perm=[1, 0])])

        if not self._segments("lm_head"):
            return floats()
        if not c.tie_word_embeddings or self.float_weights:  # a float twin: what one-row steps use
            return self.matmul(final, "lm_head", c.hidden_size, c.vocab_size)
        # the rows entering the head (after ``logits_to_keep``): a prompt pass that keeps one is one
        size = b.one("Size", [final])
        few = b.one("LessOrEqual", [size, b.const("c_head_size", self.head_rows * c.hidden_size)])

        def nbits() -> str:
            return self.matmul(final, "lm_head", c.hidden_size, c.vocab_size)

        branches: list[onnx.GraphProto] = []
        for build in (nbits, floats):
            outer = b.nodes
            b.nodes = []
            y = build()
            branch, b.nodes = b.nodes, outer
            out = helper.make_tensor_value_info(y, TensorProto.FLOAT, None)
            graph: onnx.GraphProto = helper.make_graph(branch, f"head_{len(branches)}", [], [out])
            branches.append(graph)
        self.block_sums.clear()  # names made inside a branch are not visible outside it
        return b.one("If", [few], then_branch=branches[0], else_branch=branches[1])

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
        # only the last ``logits_to_keep`` positions go through the head (0, the default: all)
        start = b.one("Neg", [b.one("Reshape", [LOGITS_TO_KEEP, b.const("c_shape_1", [1])])])
        final = b.one("Slice", [final, start, b.const("c_int64_max", [2**62]), "c_axes1"])
        return self.head(final)

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
        inter = c.intermediate_size
        if self._segments(f"{p}.gate_up"):  # one product, split (see prepare_initializers)
            both = self.matmul(x, f"{p}.gate_up", hidden, 2 * inter)
            halves = self.b.const(f"c_split_{inter}", [inter, inter])
            gate, up = self.b.op("Split", [both, halves], 2, axis=-1)
        else:
            gate = self.matmul(x, f"{p}.gate", hidden, inter)
            up = self.matmul(x, f"{p}.up", hidden, inter)
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
