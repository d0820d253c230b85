"""Write an Optimum-layout model directory: ONNX graph(s), weights, config and tokenizer files."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import TensorProto
from tokenizers import Tokenizer

from ..onnx._config import BATCH_MODEL_FILE, DATA_FILE, FLOAT_MODEL_FILE, MODEL_FILE, DecoderConfig
from ._graph import Attention, Quantization, build_decoder

if TYPE_CHECKING:
    from ._gguf import GgufModel

__all__ = ["BATCH_MODEL_FILE", "DATA_FILE", "MODEL_FILE", "write_model_dir"]

_ALIGN = 4096


def _external_tensors(arrays: Mapping[str, np.ndarray], data_path: Path) -> dict[str, TensorProto]:
    """Write ``arrays`` to one data file and return TensorProtos that reference it."""
    protos: dict[str, TensorProto] = {}
    offset = 0
    with data_path.open("wb") as f:
        for name, array in arrays.items():
            raw = np.ascontiguousarray(array).tobytes()
            pad = (-offset) % _ALIGN
            if pad:
                f.write(b"\0" * pad)
                offset += pad
            f.write(raw)
            t = TensorProto()
            t.name = name
            t.dims.extend(array.shape)
            t.data_type = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
            t.data_location = TensorProto.EXTERNAL
            for key, value in (
                ("location", data_path.name),
                ("offset", str(offset)),
                ("length", str(len(raw))),
            ):
                entry = t.external_data.add()
                entry.key, entry.value = key, value
            protos[name] = t
            offset += len(raw)
    return protos


def write_model_dir(
    directory: Path,
    config: DecoderConfig,
    arrays: Mapping[str, np.ndarray],
    tokenizer: Tokenizer,
    *,
    chat_template: str | None,
    attention: Attention,
    external_data: bool,
    eos_token: str | None = None,
    bos_token: str | None = None,
    pad_token: str | None = None,
    extra_files: Mapping[str, Any] | None = None,
    quantization: Quantization = "fp32",
) -> Path:
    """Write a model directory in the Optimum layout and return it (``quantization``: the build
    ``arrays`` were prepared for, see :func:`~._graph.build_decoder`).

    With ``attention="gqa"`` a second, plain-attention graph (``model_plain.onnx``) is written over
    the same weights for left-padded batches, and for ``int4`` a float twin (``model_float.onnx``,
    see :func:`~._graph.build_decoder`'s ``float_weights``) for several-row steps. ``extra_files``
    maps file names to JSON-able content.
    """
    directory.mkdir(parents=True, exist_ok=True)
    if external_data:
        protos = _external_tensors(arrays, directory / DATA_FILE)
    else:
        protos = {
            name: onnx.numpy_helper.from_array(np.ascontiguousarray(a), name) for name, a in arrays.items()
        }
    graphs: dict[str, Attention] = {MODEL_FILE: attention}
    if attention == "gqa":
        graphs[BATCH_MODEL_FILE] = "plain"
    for filename, kind in graphs.items():
        model = build_decoder(config, protos, attention=kind, quantization=quantization)
        (directory / filename).write_bytes(model.SerializeToString())
    if quantization == "int4" and attention == "gqa":  # float weights for several-row steps
        model = build_decoder(config, protos, attention=attention, quantization="fp32", float_weights=True)
        (directory / FLOAT_MODEL_FILE).write_bytes(model.SerializeToString())
    config.write(directory / "config.json")
    tokenizer.save(str(directory / "tokenizer.json"))
    tok_config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": config.max_position_embeddings,
        "add_bos_token": False,
        "clean_up_tokenization_spaces": False,
    }
    for key, value in (
        ("eos_token", eos_token),
        ("bos_token", bos_token),
        ("pad_token", pad_token),
        ("chat_template", chat_template),
    ):
        if value is not None:
            tok_config[key] = value
    (directory / "tokenizer_config.json").write_text(
        json.dumps(tok_config, indent=2) + "\n", encoding="utf-8"
    )
    special = {
        k: v
        for k, v in (("eos_token", eos_token), ("bos_token", bos_token), ("pad_token", pad_token))
        if v is not None
    }
    (directory / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n", encoding="utf-8")
    generation: dict[str, Any] = {"eos_token_id": list(config.eos_token_id), "do_sample": False}
    if config.bos_token_id is not None:
        generation["bos_token_id"] = config.bos_token_id
    if config.pad_token_id is not None:
        generation["pad_token_id"] = config.pad_token_id
    (directory / "generation_config.json").write_text(
        json.dumps(generation, indent=2) + "\n", encoding="utf-8"
    )
    for filename, content in (extra_files or {}).items():
        (directory / filename).write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
    return directory


def write_gguf_model_dir(
    directory: Path, model: GgufModel, arrays: Mapping[str, np.ndarray], quantization: Quantization = "fp32"
) -> None:
    """:func:`write_model_dir` for a model read from a GGUF file (fused attention, external data,
    the file's tokenizer, chat template and special tokens)."""
    write_model_dir(
        directory,
        model.config,
        arrays,
        model.tokenizer,
        chat_template=model.chat_template,
        attention="gqa",
        external_data=True,
        eos_token=model.eos_token,
        bos_token=model.bos_token,
        pad_token=model.pad_token,
        quantization=quantization,
    )
