"""Reading a llama-architecture GGUF file: dequantized weights, config, tokenizer and chat template.

Weights are dequantized with ``gguf.quants.dequantize``, so every tensor type the installed ``gguf``
package can dequantize (F32, F16, BF16, Q4_0 ... Q8_0, the K-quants Q2_K ... Q6_K, the IQ and TQ
types, ...) converts; a tensor of any other type is refused by name before anything is dequantized.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, ReaderTensor, quants
from tokenizers import Tokenizer

from ..onnx._config import DecoderConfig
from ._graph import BlockQuant, DecoderWeights
from ._tokenizer import byte_level_bpe

__all__ = [
    "BLOCK_TYPES",
    "GgufModel",
    "block_quant",
    "can_dequantize",
    "dequantize_tensor",
    "read_gguf",
    "unpermute_rope_rows",
]

F32 = npt.NDArray[np.float32]
_T = TypeVar("_T", bound=np.generic)

_ROW_BLOCKS = 4096
"""Quantized blocks per row handed to ``gguf.quants.dequantize`` (at most; see :func:`dequantize_tensor`)."""


@functools.cache
def can_dequantize(qtype: GGMLQuantizationType) -> bool:
    """Whether the installed ``gguf`` package can dequantize tensors of type ``qtype``."""
    _, type_size = GGML_QUANT_SIZES[qtype]
    try:
        quants.dequantize(np.zeros((1, type_size), np.uint8), qtype)
    except NotImplementedError:
        return False
    return True


def _unsupported(name: str, qtype: GGMLQuantizationType) -> ValueError:
    supported = ", ".join(t.name for t in GGMLQuantizationType if can_dequantize(t))
    return ValueError(
        f"tensor {name!r} has type {qtype.name}, which gguf {version('gguf')} cannot dequantize "
        f"(it can: {supported})"
    )


def dequantize_tensor(tensor: ReaderTensor) -> F32:
    """The float32 values of a tensor read by ``gguf.GGUFReader`` (numpy order: rows first).

    Uses ``gguf.quants.dequantize``; raises ValueError naming the tensor if its type is not supported.
    """
    qtype = GGMLQuantizationType(tensor.tensor_type)
    if not can_dequantize(qtype):
        raise _unsupported(tensor.name, qtype)
    data = tensor.data
    shape = tuple(int(s) for s in reversed(tensor.shape.tolist()))
    if data.dtype == np.uint8:
        # Blocks are independent, so gguf may see the bytes as rows of up to _ROW_BLOCKS blocks:
        # it works on groups of 16 rows, and short model rows (e.g. 18 blocks) make that 2-3x slower.
        type_size = GGML_QUANT_SIZES[qtype][1]
        data = data.reshape(-1, math.gcd(data.size // type_size, _ROW_BLOCKS) * type_size)
    values: F32 = np.asarray(quants.dequantize(data, qtype), dtype=np.float32).reshape(shape)
    return values


def _fp16(raw: npt.NDArray[np.uint8]) -> F32:
    """Little-endian float16 values (the last axis: 2 bytes) as float32."""
    return np.ascontiguousarray(raw).view(np.float16)[..., 0].astype(np.float32)


def _nibbles(raw: npt.NDArray[np.uint8], runs: int) -> npt.NDArray[np.uint8]:
    """Low then high nibbles of ``runs`` runs of bytes: ``[..., runs * len]`` -> ``[..., 2 * runs, len]``."""
    r = raw.reshape(*raw.shape[:-1], runs, 1, raw.shape[-1] // runs)
    both = np.concatenate([r & np.uint8(15), r >> np.uint8(4)], axis=-2)
    return both.reshape(*raw.shape[:-1], 2 * runs, raw.shape[-1] // runs)


def _crumbs(raw: npt.NDArray[np.uint8], runs: int, width: int) -> npt.NDArray[np.uint8]:
    """Fields of ``width`` bits (from bit 0 up) of ``runs`` runs of bytes, as
    ``[..., runs * 8 // width, len]``."""
    shifts = np.arange(0, 8, width, dtype=np.uint8).reshape(1, -1, 1)
    r = raw.reshape(*raw.shape[:-1], runs, 1, raw.shape[-1] // runs)
    fields = (r >> shifts) & np.uint8((1 << width) - 1)
    return fields.reshape(*raw.shape[:-1], runs * (8 // width), raw.shape[-1] // runs)


def _k_scale_min(raw: npt.NDArray[np.uint8]) -> tuple[F32, F32]:
    """The eight 6-bit sub-block scales and mins of a Q4_K / Q5_K super-block (12 bytes)."""
    d, m, md = raw[..., 0:4], raw[..., 4:8], raw[..., 8:12]
    sc = np.concatenate([d & 63, (md & 15) | ((d >> 2) & 48)], axis=-1)
    mn = np.concatenate([m & 63, (md >> 4) | ((m >> 2) & 48)], axis=-1)
    return sc.astype(np.float32), mn.astype(np.float32)


def _legacy(qtype: GGMLQuantizationType, raw: npt.NDArray[np.uint8]) -> BlockQuant:
    """Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: ``[n, blocks, bytes]`` -> blocks of 32."""
    Q = GGMLQuantizationType
    d = _fp16(raw[..., 0:2])
    if qtype == Q.Q8_0:
        codes = (raw[..., 2:].view(np.int8).astype(np.int16) + 128).astype(np.uint8)
        return BlockQuant(codes, d, zero_point=128, bits=8)
    mins = _fp16(raw[..., 2:4]) if qtype in (Q.Q4_1, Q.Q5_1) else None
    rest = raw[..., 4:] if mins is not None else raw[..., 2:]
    if qtype in (Q.Q4_0, Q.Q4_1):  # element j in the low nibble of byte j, element j + 16 in the high
        codes = _nibbles(rest, 1).reshape(*raw.shape[:-1], 32)
        return BlockQuant(codes, d, zero_point=0 if mins is not None else 8, bits=4, mins=mins)
    high = np.unpackbits(rest[..., 0:4], axis=-1, bitorder="little")  # bit j of the 32-bit word
    codes = _nibbles(rest[..., 4:], 1).reshape(*raw.shape[:-1], 32) | (high << np.uint8(4))
    return BlockQuant(codes, d, zero_point=0 if mins is not None else 16, bits=5, mins=mins)


def _k_quant(qtype: GGMLQuantizationType, raw: npt.NDArray[np.uint8]) -> BlockQuant:
    """Q2_K ... Q6_K: ``[n, super-blocks, bytes]`` -> sub-blocks of 16 or 32, the super-block's
    scales multiplied into each sub-block's (in float32, as gguf-py does: exact products)."""
    Q = GGMLQuantizationType
    n, sb, _ = raw.shape
    if qtype == Q.Q2_K:  # scales 16, qs 64, d, dmin
        sub_sm, qs = raw[..., 0:16], raw[..., 16:80]  # per sub-block: scale (low nibble), min (high)
        scales = _fp16(raw[..., 80:82])[..., None] * (sub_sm & np.uint8(15)).astype(np.float32)
        mins = -(_fp16(raw[..., 82:84])[..., None] * (sub_sm >> np.uint8(4)).astype(np.float32))
        codes = _crumbs(qs, 2, 2).reshape(n, sb * 16, 16)
        return BlockQuant(codes, scales.reshape(n, -1), 0, 2, mins.reshape(n, -1))
    if qtype == Q.Q3_K:  # hmask 32, qs 64, scales 12, d
        hmask, qs, packed = raw[..., 0:32], raw[..., 32:96], raw[..., 96:108]
        low = _nibbles(packed[..., 0:8], 1).reshape(n, sb, 16)
        high = _crumbs(packed[..., 8:12], 1, 2).reshape(n, sb, 16)
        sub = (low | (high << np.uint8(4))).astype(np.float32) - np.float32(32)
        scales = _fp16(raw[..., 108:110])[..., None] * sub
        q3 = _crumbs(qs, 2, 2) | (_crumbs(hmask, 1, 1) << np.uint8(2))
        return BlockQuant(q3.reshape(n, sb * 16, 16), scales.reshape(n, -1), 4, 3)
    if qtype in (Q.Q4_K, Q.Q5_K):  # d, dmin, scales 12, [qh 32], qs 128
        sc, mn = _k_scale_min(raw[..., 4:16])
        scales = _fp16(raw[..., 0:2])[..., None] * sc
        mins = -(_fp16(raw[..., 2:4])[..., None] * mn)
        if qtype == Q.Q4_K:
            qk, bits = _nibbles(raw[..., 16:144], 4), 4
        else:
            qk = _nibbles(raw[..., 48:176], 4) | (_crumbs(raw[..., 16:48], 1, 1) << np.uint8(4))
            bits = 5
        return BlockQuant(qk.reshape(n, sb * 8, 32), scales.reshape(n, -1), 0, bits, mins.reshape(n, -1))
    # Q6_K: ql 128, qh 64, scales 16 (int8), d
    ql = _nibbles(raw[..., 0:128], 2).reshape(n, sb, 8, 32)  # per 64-byte half: low, then high nibbles
    qh = _crumbs(raw[..., 128:192], 2, 2)  # [n, sb, 8, 32]
    q6 = (ql | (qh << np.uint8(4))).reshape(n, sb * 16, 16)
    scales = _fp16(raw[..., 208:210])[..., None] * raw[..., 192:208].view(np.int8).astype(np.float32)
    return BlockQuant(q6, scales.reshape(n, -1), 32, 6)


_LEGACY = frozenset(GGMLQuantizationType[t] for t in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"))
_K_QUANTS = frozenset(GGMLQuantizationType[t] for t in ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"))
BLOCK_TYPES = _LEGACY | _K_QUANTS
"""The GGUF types :func:`block_quant` reads as linear blocks (``w = scale * (code - zero) [+ min]``)."""


def block_quant(tensor: ReaderTensor) -> BlockQuant | None:
    """The blocks of a matrix of a type in :data:`BLOCK_TYPES` as :class:`BlockQuant`, else None.

    Every one of these types is linear in its codes per block of 16 or 32 weights (the K-quants:
    per sub-block, with ``d * sub_scale`` and ``dmin * sub_min`` exact float32 products), so its
    blocks say exactly what ``gguf.quants.dequantize`` computes. The IQ types (codebooks), TQ1_0 /
    TQ2_0 and the FP4 types are not read here.
    """
    qtype = GGMLQuantizationType(tensor.tensor_type)
    if qtype not in BLOCK_TYPES:
        return None
    shape = tuple(int(s) for s in reversed(tensor.shape.tolist()))
    if len(shape) != 2:
        return None
    n, k = shape
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    raw = np.asarray(tensor.data, dtype=np.uint8).reshape(n, k // block_size, type_size)
    return _legacy(qtype, raw) if qtype in _LEGACY else _k_quant(qtype, raw)


def unpermute_rope_rows(weight: npt.NDArray[_T], n_heads: int) -> npt.NDArray[_T]:
    """Undo llama.cpp's row permutation of a Q or K projection (interleaved rotary -> ``rotate_half``).

    llama.cpp reorders each head's rows from ``[first half, second half]`` to interleaved pairs;
    this puts them back so the usual ``rotate_half`` rotary embedding applies.
    """
    rows = weight.shape[0]
    return np.ascontiguousarray(
        weight.reshape(n_heads, rows // n_heads // 2, 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


@dataclass
class GgufModel:
    """Everything needed to write an ONNX model directory from a GGUF file."""

    config: DecoderConfig
    weights: DecoderWeights
    tokenizer: Tokenizer
    chat_template: str | None
    eos_token: str | None
    bos_token: str | None
    pad_token: str | None
    name: str


def _field(reader: Any, key: str, default: Any = None) -> Any:
    field = reader.fields.get(key)
    if field is None:
        return default
    return field.contents()


def _required(reader: Any, path: str | Path, key: str) -> Any:
    value = _field(reader, key)
    if value is None:
        raise ValueError(f"GGUF {path}: metadata key {key!r} is missing")
    return value


def _expected_shapes(config: DecoderConfig, *, untied: bool) -> dict[str, tuple[int, ...]]:
    """The tensors :func:`read_gguf` uses and their shapes (numpy order) implied by ``config``."""
    hidden, inter, hd = config.hidden_size, config.intermediate_size, config.head_dim
    q_rows, kv_rows = config.num_heads * hd, config.num_kv_heads * hd
    shapes: dict[str, tuple[int, ...]] = {
        "token_embd.weight": (config.vocab_size, hidden),
        "output_norm.weight": (hidden,),
    }
    if untied:
        shapes["output.weight"] = (config.vocab_size, hidden)
    for i in range(config.num_layers):
        p = f"blk.{i}"
        shapes.update(
            {
                f"{p}.attn_norm.weight": (hidden,),
                f"{p}.attn_q.weight": (q_rows, hidden),
                f"{p}.attn_k.weight": (kv_rows, hidden),
                f"{p}.attn_v.weight": (kv_rows, hidden),
                f"{p}.attn_output.weight": (hidden, q_rows),
                f"{p}.ffn_norm.weight": (hidden,),
                f"{p}.ffn_gate.weight": (inter, hidden),
                f"{p}.ffn_up.weight": (inter, hidden),
                f"{p}.ffn_down.weight": (hidden, inter),
            }
        )
    return shapes


def _refuse_unsupported_features(
    reader: Any, path: str | Path, config: DecoderConfig, tensors: Mapping[str, ReaderTensor]
) -> None:
    """Raise ValueError for llama-architecture variants the ONNX graph would compute wrongly."""
    scaling = _field(reader, "llama.rope.scaling.type")
    if scaling not in (None, "none"):
        raise ValueError(f"GGUF {path}: RoPE scaling {scaling!r} is not supported")
    if "rope_freqs.weight" in tensors:
        raise ValueError(
            f"GGUF {path}: per-frequency RoPE factors (tensor 'rope_freqs.weight', as in Llama 3.1) "
            "are not supported"
        )
    experts = int(_field(reader, "llama.expert_count", 0))
    if experts:
        raise ValueError(f"GGUF {path}: mixture-of-experts models ({experts} experts) are not supported")
    rotary = _field(reader, "llama.rope.dimension_count")
    if rotary is not None and int(rotary) != config.head_dim:
        raise ValueError(
            f"GGUF {path}: rotary embeddings over {int(rotary)} of {config.head_dim} head dimensions "
            "are not supported (only the whole head)"
        )


def read_gguf(path: str | Path) -> GgufModel:
    """Read a llama-architecture GGUF file (weights dequantized to float32, Hugging Face orientation)."""
    try:
        reader = GGUFReader(str(path))
    except ValueError as exc:  # e.g. a tensor type newer than the installed gguf package
        raise ValueError(f"GGUF {path}: gguf {version('gguf')} cannot read it: {exc}") from exc
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"GGUF {path}: architecture {arch!r} is not supported (only 'llama')")
    tokens: list[str] = list(_required(reader, path, "tokenizer.ggml.tokens"))
    merges: list[str] = list(_field(reader, "tokenizer.ggml.merges", []))
    types: list[int] = list(_field(reader, "tokenizer.ggml.token_type", [1] * len(tokens)))
    if _field(reader, "tokenizer.ggml.model") != "gpt2":
        raise ValueError(f"GGUF {path}: only byte-level BPE ('gpt2') tokenizers are supported")
    config = _config_of(reader, path, len(tokens))
    tensors = {t.name: t for t in reader.tensors}
    _refuse_unsupported_features(reader, path, config, tensors)
    _check_tensors(path, config, tensors)
    weights = _weights_of(config, tensors)
    if weights.lm_head is not None:
        config = DecoderConfig(
            **{**{f: getattr(config, f) for f in config.__dataclass_fields__}, "tie_word_embeddings": False}
        )
    special = [i for i, ty in enumerate(types) if ty == 3]
    user = [i for i, ty in enumerate(types) if ty == 4]
    tokenizer = byte_level_bpe(tokens, merges, special_ids=special, user_defined_ids=user)

    def text(i: Any) -> str | None:
        return None if i is None or not 0 <= int(i) < len(tokens) else tokens[int(i)]

    template = _field(reader, "tokenizer.chat_template")
    return GgufModel(
        config=config,
        weights=weights,
        tokenizer=tokenizer,
        chat_template=None if template is None else str(template),
        eos_token=text(_field(reader, "tokenizer.ggml.eos_token_id")),
        bos_token=text(_field(reader, "tokenizer.ggml.bos_token_id")),
        pad_token=text(_field(reader, "tokenizer.ggml.padding_token_id")),
        name=str(_field(reader, "general.name", Path(path).stem)),
    )


def _config_of(reader: GGUFReader, path: str | Path, n_tokens: int) -> DecoderConfig:
    """The decoder's shape from the ``llama.*`` and ``tokenizer.ggml.*`` metadata."""
    n_heads = int(_required(reader, path, "llama.attention.head_count"))
    eos_id = _field(reader, "tokenizer.ggml.eos_token_id")
    bos_id = _field(reader, "tokenizer.ggml.bos_token_id")
    pad_id = _field(reader, "tokenizer.ggml.padding_token_id")
    return DecoderConfig(
        vocab_size=int(_field(reader, "llama.vocab_size", n_tokens)),
        hidden_size=int(_required(reader, path, "llama.embedding_length")),
        intermediate_size=int(_required(reader, path, "llama.feed_forward_length")),
        num_layers=int(_required(reader, path, "llama.block_count")),
        num_heads=n_heads,
        num_kv_heads=int(_field(reader, "llama.attention.head_count_kv", n_heads)),
        max_position_embeddings=int(_field(reader, "llama.context_length", 2048)),
        rope_theta=float(_field(reader, "llama.rope.freq_base", 10000.0)),
        rms_norm_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon", 1e-5)),
        tie_word_embeddings=True,
        bos_token_id=None if bos_id is None else int(bos_id),
        eos_token_id=() if eos_id is None else (int(eos_id),),
        pad_token_id=None if pad_id is None else int(pad_id),
    )


def _check_tensors(path: str | Path, config: DecoderConfig, tensors: Mapping[str, ReaderTensor]) -> None:
    """Refuse a bad file before dequantizing anything: a missing tensor, a wrong shape or type."""
    shapes = _expected_shapes(config, untied="output.weight" in tensors)
    for name, shape in shapes.items():
        t = tensors.get(name)
        if t is None:
            raise ValueError(f"GGUF {path}: tensor {name!r} is missing")
        got = tuple(int(s) for s in reversed(t.shape.tolist()))
        if got != shape:
            raise ValueError(f"GGUF {path}: tensor {name!r} has shape {got}, the metadata implies {shape}")
        qtype = GGMLQuantizationType(t.tensor_type)
        if not can_dequantize(qtype):
            raise ValueError(f"GGUF {path}: {_unsupported(name, qtype)}")


def _weights_of(config: DecoderConfig, tensors: Mapping[str, ReaderTensor]) -> DecoderWeights:
    """The dequantized weights, Q/K rows un-permuted from llama.cpp's rotary layout."""

    def get(name: str) -> F32:
        return dequantize_tensor(tensors[name])

    blocks: dict[str, BlockQuant] = {}
    heads = {"q": config.num_heads, "k": config.num_kv_heads}
    for i in range(config.num_layers):
        for key, gguf_name in _LINEAR.items():
            quant = block_quant(tensors[f"blk.{i}.{gguf_name}.weight"])
            if quant is not None:
                if key in heads:
                    order = np.arange(quant.codes.shape[0])
                    quant = quant.rows(unpermute_rope_rows(order, heads[key]))
                blocks[f"layers.{i}.{key}"] = quant
    for key, gguf_name in (("embed", "token_embd.weight"), ("lm_head", "output.weight")):
        quant = block_quant(tensors[gguf_name]) if gguf_name in tensors else None
        if quant is not None:
            blocks[key] = quant

    layers = []
    for i in range(config.num_layers):
        p = f"blk.{i}"
        layers.append(
            {
                "input_norm": get(f"{p}.attn_norm.weight"),
                "q": unpermute_rope_rows(get(f"{p}.attn_q.weight"), config.num_heads),
                "k": unpermute_rope_rows(get(f"{p}.attn_k.weight"), config.num_kv_heads),
                "v": get(f"{p}.attn_v.weight"),
                "o": get(f"{p}.attn_output.weight"),
                "post_norm": get(f"{p}.ffn_norm.weight"),
                "gate": get(f"{p}.ffn_gate.weight"),
                "up": get(f"{p}.ffn_up.weight"),
                "down": get(f"{p}.ffn_down.weight"),
            }
        )
    lm_head = get("output.weight") if "output.weight" in tensors else None
    return DecoderWeights(
        embed=get("token_embd.weight"),
        norm=get("output_norm.weight"),
        lm_head=lm_head,
        layers=layers,
        blocks=blocks,
    )


_LINEAR = {
    "q": "attn_q",
    "k": "attn_k",
    "v": "attn_v",
    "o": "attn_output",
    "gate": "ffn_gate",
    "up": "ffn_up",
    "down": "ffn_down",
}
"""The decoder's matrices and their GGUF tensor names (``blk.{i}.<name>.weight``)."""
