"""Write a Hugging Face-format folder (config.json, model.safetensors, tokenizer files) from a GGUF file.

Other toolchains (e.g. onnxruntime-genai's model builder) read this layout, so the same weights can be
compared across runtimes. The safetensors file is written directly (its format is a JSON header plus
raw little-endian tensors), with no extra dependency.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from rxstream.backends._gguf import read_gguf

__all__ = ["export_hf_folder", "write_safetensors"]

_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.int64): "I64"}


def write_safetensors(path: Path, tensors: Mapping[str, np.ndarray]) -> None:
    """Write ``tensors`` to ``path`` in the safetensors format."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    arrays: list[np.ndarray] = []
    for name, array in tensors.items():
        a = np.ascontiguousarray(array)
        if a.dtype not in _DTYPES:
            raise ValueError(f"write_safetensors: unsupported dtype {a.dtype} for {name!r}")
        header[name] = {
            "dtype": _DTYPES[a.dtype],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + a.nbytes],
        }
        offset += a.nbytes
        arrays.append(a)
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * ((-len(raw)) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for a in arrays:
            f.write(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())


def export_hf_folder(gguf_path: str | Path, out: str | Path) -> Path:
    """Write a ``LlamaForCausalLM`` folder with the dequantized GGUF weights into ``out``; return it."""
    model = read_gguf(gguf_path)
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    w = model.weights
    tensors: dict[str, np.ndarray] = {"model.embed_tokens.weight": w.embed, "model.norm.weight": w.norm}
    names = {
        "q": "self_attn.q_proj",
        "k": "self_attn.k_proj",
        "v": "self_attn.v_proj",
        "o": "self_attn.o_proj",
        "gate": "mlp.gate_proj",
        "up": "mlp.up_proj",
        "down": "mlp.down_proj",
        "input_norm": "input_layernorm",
        "post_norm": "post_attention_layernorm",
    }
    for i, layer in enumerate(w.layers):
        for key, hf in names.items():
            tensors[f"model.layers.{i}.{hf}.weight"] = layer[key]
    if w.lm_head is not None:
        tensors["lm_head.weight"] = w.lm_head
    write_safetensors(target / "model.safetensors", tensors)
    model.config.write(target / "config.json")
    model.tokenizer.save(str(target / "tokenizer.json"))
    tok_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": model.config.max_position_embeddings,
        "add_bos_token": False,
        "clean_up_tokenization_spaces": False,
        "eos_token": model.eos_token,
        "bos_token": model.bos_token,
        "pad_token": model.pad_token,
        "unk_token": None,
        "chat_template": model.chat_template,
    }
    (target / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2) + "\n", encoding="utf-8")
    special = {k: v for k, v in tok_config.items() if k in ("eos_token", "bos_token", "pad_token") and v}
    (target / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n", encoding="utf-8")
    generation = {
        "eos_token_id": list(model.config.eos_token_id),
        "bos_token_id": model.config.bos_token_id,
        "pad_token_id": model.config.pad_token_id,
        "do_sample": False,
    }
    (target / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n", encoding="utf-8")
    return target
