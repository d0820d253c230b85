"""Reading a llama-architecture GGUF file: dequantized weights, config, tokenizer and chat template."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer

from ._config import DecoderConfig
from ._graph import DecoderWeights
from ._tokenizer import byte_level_bpe

__all__ = ["GgufModel", "dequantize", "read_gguf", "unpermute_rope_rows"]

F32 = npt.NDArray[np.float32]

# ggml type ids (ggml.h): the ones this reader dequantizes
_F32, _F16, _Q4_0, _Q4_1, _Q8_0 = 0, 1, 2, 3, 8
_QK = 32  # weights per quantization block


def _f16(raw: npt.NDArray[np.uint8]) -> F32:
    return np.ascontiguousarray(raw).view(np.float16).astype(np.float32)


def dequantize(data: np.ndarray, ggml_type: int, shape: tuple[int, ...]) -> F32:
    """Dequantize one GGUF tensor to float32 with shape ``shape`` (rows first, numpy order).

    Supports F32, F16, Q4_0, Q4_1 and Q8_0 blocks of 32 weights: Q4_1 stores per block an fp16
    scale ``d``, an fp16 minimum ``m`` and 16 bytes whose low nibbles are weights 0..15 and high
    nibbles weights 16..31 (``w = q * d + m``); Q4_0 is ``(q - 8) * d``; Q8_0 is ``int8 * d``.
    """
    if ggml_type == _F32:
        return np.asarray(data, dtype=np.float32).reshape(shape)
    if ggml_type == _F16:
        return np.asarray(data).view(np.float16).astype(np.float32).reshape(shape)
    raw = np.asarray(data, dtype=np.uint8).reshape(-1)
    if ggml_type == _Q8_0:
        blocks = raw.reshape(-1, 2 + _QK)
        d = _f16(blocks[:, :2])
        q = blocks[:, 2:].view(np.int8).astype(np.float32)
        return (q * d).reshape(shape)
    if ggml_type in (_Q4_0, _Q4_1):
        header = 4 if ggml_type == _Q4_1 else 2
        blocks = raw.reshape(-1, header + _QK // 2)
        d = _f16(blocks[:, :2])
        qs = blocks[:, header:]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32)
        if ggml_type == _Q4_1:
            m = _f16(blocks[:, 2:4])
            return (q * d + m).reshape(shape)
        return ((q - 8.0) * d).reshape(shape)
    raise ValueError(f"GGUF: tensor type {ggml_type} is not supported (F32, F16, Q4_0, Q4_1, Q8_0 are)")


def unpermute_rope_rows(weight: F32, n_heads: int) -> F32:
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


def read_gguf(path: str | Path) -> GgufModel:
    """Read a llama-architecture GGUF file (weights dequantized to float32, Hugging Face orientation)."""
    try:
        from gguf import GGUFReader
    except ImportError as exc:  # pragma: no cover - gguf is a dependency
        raise RuntimeError("reading GGUF files needs the 'gguf' package") from exc
    reader = GGUFReader(str(path))
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"GGUF {path}: architecture {arch!r} is not supported (only 'llama')")
    n_heads = int(_field(reader, "llama.attention.head_count"))
    n_kv = int(_field(reader, "llama.attention.head_count_kv", n_heads))
    tokens: list[str] = list(_field(reader, "tokenizer.ggml.tokens"))
    merges: list[str] = list(_field(reader, "tokenizer.ggml.merges", []))
    types: list[int] = list(_field(reader, "tokenizer.ggml.token_type", [1] * len(tokens)))
    if _field(reader, "tokenizer.ggml.model") != "gpt2":
        raise ValueError(f"GGUF {path}: only byte-level BPE ('gpt2') tokenizers are supported")
    eos_id = _field(reader, "tokenizer.ggml.eos_token_id")
    bos_id = _field(reader, "tokenizer.ggml.bos_token_id")
    pad_id = _field(reader, "tokenizer.ggml.padding_token_id")
    config = DecoderConfig(
        vocab_size=int(_field(reader, "llama.vocab_size", len(tokens))),
        hidden_size=int(_field(reader, "llama.embedding_length")),
        intermediate_size=int(_field(reader, "llama.feed_forward_length")),
        num_layers=int(_field(reader, "llama.block_count")),
        num_heads=n_heads,
        num_kv_heads=n_kv,
        max_position_embeddings=int(_field(reader, "llama.context_length", 2048)),
        rope_theta=float(_field(reader, "llama.rope.freq_base", 10000.0)),
        rms_norm_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon", 1e-5)),
        tie_word_embeddings=True,
        bos_token_id=None if bos_id is None else int(bos_id),
        eos_token_id=() if eos_id is None else (int(eos_id),),
        pad_token_id=None if pad_id is None else int(pad_id),
    )
    tensors = {t.name: t for t in reader.tensors}

    def get(name: str) -> F32:
        t = tensors.get(name)
        if t is None:
            raise ValueError(f"GGUF {path}: tensor {name!r} is missing")
        shape = tuple(int(s) for s in reversed(t.shape.tolist()))
        return dequantize(t.data, int(t.tensor_type), shape)

    layers = []
    for i in range(config.num_layers):
        p = f"blk.{i}"
        layers.append(
            {
                "input_norm": get(f"{p}.attn_norm.weight"),
                "q": unpermute_rope_rows(get(f"{p}.attn_q.weight"), n_heads),
                "k": unpermute_rope_rows(get(f"{p}.attn_k.weight"), n_kv),
                "v": get(f"{p}.attn_v.weight"),
                "o": get(f"{p}.attn_output.weight"),
                "post_norm": get(f"{p}.ffn_norm.weight"),
                "gate": get(f"{p}.ffn_gate.weight"),
                "up": get(f"{p}.ffn_up.weight"),
                "down": get(f"{p}.ffn_down.weight"),
            }
        )
    lm_head = get("output.weight") if "output.weight" in tensors else None
    if lm_head is not None:
        config = DecoderConfig(
            **{**{f: getattr(config, f) for f in config.__dataclass_fields__}, "tie_word_embeddings": False}
        )
    weights = DecoderWeights(
        embed=get("token_embd.weight"), norm=get("output_norm.weight"), lm_head=lm_head, layers=layers
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
        eos_token=text(eos_id),
        bos_token=text(bos_id),
        pad_token=text(pad_id),
        name=str(_field(reader, "general.name", Path(path).stem)),
    )
