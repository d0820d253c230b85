"""Write a Hugging Face-format folder (config.json, model.safetensors, tokenizer files) from a GGUF file.

Other toolchains (e.g. onnxruntime-genai's model builder) read this layout, so the same weights can be
compared across runtimes. The safetensors file is written directly (its format is a JSON header plus
raw little-endian tensors), with no extra dependency.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import numpy as np

from rxstream.backends.convert._cache import locked, remove, remove_stale, temp_name
from rxstream.backends.convert._gguf import GgufModel, read_gguf
from rxstream.backends.convert._progress import Progress

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
    with _atomic_file(path) as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for a in arrays:
            f.write(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())


@contextmanager
def _atomic_file(path: Path) -> Iterator[BinaryIO]:
    """Write ``path`` through a hidden temporary sibling renamed over it at the end: an interrupted
    write never leaves a truncated file under the final name."""
    tmp = temp_name(path)
    try:
        with tmp.open("wb") as f:
            yield f
        os.replace(tmp, path)
    finally:
        remove(tmp)


def _write_text(path: Path, text: str) -> None:
    with _atomic_file(path) as f:
        f.write(text.encode("utf-8"))


def export_hf_folder(gguf_path: str | Path, out: str | Path) -> Path:
    """Write a ``LlamaForCausalLM`` folder with the dequantized GGUF weights into ``out``; return it.

    Each file is written to a temporary sibling and renamed into place, ``model.safetensors`` last,
    so its presence means the folder is complete. Concurrent exports into one folder run one after
    the other (lock file ``.<out>.lock`` beside it); temporaries left by a killed export are removed
    by the next one.
    """
    model = read_gguf(gguf_path)
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    with locked(target, Progress(False)):
        for name in _FILES:
            remove_stale(target / name)
        _export(model, target)
    return target


_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
    "model.safetensors",
)


def _export(model: GgufModel, target: Path) -> None:
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
    _write_text(target / "config.json", json.dumps(model.config.to_hf_dict(), indent=2) + "\n")
    _write_text(target / "tokenizer.json", model.tokenizer.to_str(pretty=True))
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
    _write_text(target / "tokenizer_config.json", json.dumps(tok_config, indent=2) + "\n")
    special = {k: v for k, v in tok_config.items() if k in ("eos_token", "bos_token", "pad_token") and v}
    _write_text(target / "special_tokens_map.json", json.dumps(special, indent=2) + "\n")
    generation = {
        "eos_token_id": list(model.config.eos_token_id),
        "bos_token_id": model.config.bos_token_id,
        "pad_token_id": model.config.pad_token_id,
        "do_sample": False,
    }
    _write_text(target / "generation_config.json", json.dumps(generation, indent=2) + "\n")
    write_safetensors(target / "model.safetensors", tensors)  # last: the folder is complete
