"""Loading a model directory (:func:`load_directory`) and resolving a name (:func:`resolve_name`).

A directory in the Hugging Face Optimum layout (``model.onnx`` + ``config.json``) or one written by
the onnxruntime-genai builder (``genai_config.json``), with ``tokenizer.json`` and, when present,
``generation_config.json`` (EOS ids, sampling defaults) and ``tokenizer_config.json`` (EOS/BOS
tokens, chat template). :func:`resolve_name` is the name logic of
:meth:`OnnxModel.from_pretrained`; pulling a known model is the converter's job
(:mod:`rxstream.backends.convert`), imported only when a known name is asked for.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from rxstream import SamplingParams
from rxstream.chat import ChatTemplate

from ._config import BATCH_MODEL_FILE, FLOAT_MODEL_FILE, MODEL_FILE, DecoderConfig, sampling_defaults
from ._sampling import check_int
from ._session import DecoderSession, Provider, Spinning, fused_attention_off_device

__all__ = [
    "ModelParts",
    "check_load_args",
    "load_directory",
    "open_float_session",
    "open_plain_session",
    "resolve_name",
]

log = logging.getLogger("rxstream.backends")


@dataclass(frozen=True, slots=True)
class ModelParts:
    """What :func:`load_directory` read: everything an :class:`OnnxModel` is made of."""

    directory: Path
    session: DecoderSession
    tokenizer: Tokenizer
    config: DecoderConfig
    eos_token_ids: frozenset[int]
    chat_template: ChatTemplate | None
    default_sampling: SamplingParams


def check_load_args(who: str, provider: Any, threads: Any, spinning: Any) -> int | None:
    """Check the loading options before any file is read (or any model pulled); return ``threads``."""
    if provider not in ("auto", "cpu", "cuda"):
        raise ValueError(f"{who}: provider must be 'auto', 'cpu' or 'cuda', got {provider!r}")
    if not isinstance(spinning, (bool, np.bool_)) and spinning != "step":
        raise TypeError(f"{who}: spinning must be True, False or 'step', got {spinning!r}")
    # 0 lets ONNX Runtime choose (one thread per physical core), like None
    return None if threads is None else check_int(who, "threads", threads, minimum=0)


def load_directory(
    path: str | Path, provider: Provider, threads: int | None, spinning: Spinning
) -> ModelParts:
    """Read the model directory ``path`` (the work of :meth:`OnnxModel.load`; arguments checked)."""
    directory = Path(path).expanduser()
    if not directory.exists():
        raise FileNotFoundError(f"OnnxModel.load: model directory {str(directory)!r} does not exist")
    if not directory.is_dir():
        raise NotADirectoryError(f"OnnxModel.load: {str(directory)!r} is not a directory")
    model_file = _model_file(directory)
    tokenizer = _read_tokenizer(directory)
    config, eos = _read_config(directory)
    generation_config = _read_json(directory / "generation_config.json")
    eos |= _ids(generation_config.get("eos_token_id"))
    default_sampling = sampling_defaults(generation_config, str(directory / "generation_config.json"))
    tok_config = _read_json(directory / "tokenizer_config.json")
    eos_token = _token_text(tok_config.get("eos_token"))
    eos_id = None if eos_token is None else tokenizer.token_to_id(eos_token)
    if not eos and eos_id is not None:
        eos.add(int(eos_id))
    template = _read_chat_template(directory, tok_config, eos_token)
    session = _open_session(directory, model_file, provider, threads, config, spinning)
    if config.num_layers != session.num_layers:
        raise ValueError(
            f"OnnxModel.load: {model_file.name} has {session.num_layers} layers of KV cache but "
            f"config.json says num_hidden_layers={config.num_layers}"
        )
    return ModelParts(directory, session, tokenizer, config, frozenset(eos), template, default_sampling)


def _model_file(directory: Path) -> Path:
    """``model.onnx``, else the directory's only other ``.onnx`` file."""
    model_file = directory / MODEL_FILE
    if model_file.is_file():
        return model_file
    candidates = sorted(
        p for p in directory.glob("*.onnx") if p.name not in (BATCH_MODEL_FILE, FLOAT_MODEL_FILE)
    )
    if len(candidates) != 1:
        raise FileNotFoundError(
            f"OnnxModel.load: no {MODEL_FILE} in {str(directory)!r} "
            f"(found: {sorted(p.name for p in directory.iterdir()) or 'nothing'})"
        )
    return candidates[0]


def _read_tokenizer(directory: Path) -> Tokenizer:
    tok_file = directory / "tokenizer.json"
    if not tok_file.is_file():
        raise FileNotFoundError(f"OnnxModel.load: no tokenizer.json in {str(directory)!r}")
    try:
        return Tokenizer.from_file(str(tok_file))
    except Exception as exc:
        raise ValueError(f"OnnxModel.load: cannot read {tok_file}: {exc}") from exc


def _read_config(directory: Path) -> tuple[DecoderConfig, set[int]]:
    """The decoder's shape (``config.json``, else ``genai_config.json``) and the EOS ids it names."""
    config: DecoderConfig | None = None
    if (directory / "config.json").is_file():
        config = DecoderConfig.read(directory / "config.json")
    genai = _read_json(directory / "genai_config.json")  # read (and checked) even when unused
    if config is None and genai:
        config = _config_from_genai(genai, directory)
    if config is None:
        raise FileNotFoundError(
            f"OnnxModel.load: no config.json (or genai_config.json) in {str(directory)!r}"
        )
    return config, set(config.eos_token_id)


def _read_chat_template(
    directory: Path, tok_config: dict[str, Any], eos_token: str | None
) -> ChatTemplate | None:
    """``tokenizer_config.json``'s ``chat_template`` (a string or a list of named ones), else
    ``chat_template.jinja``; None when there is none."""
    bos_token = _token_text(tok_config.get("bos_token"))
    template_src = tok_config.get("chat_template")
    if isinstance(template_src, list):  # [{"name": ..., "template": ...}]
        named = {t.get("name"): t.get("template") for t in template_src if isinstance(t, dict)}
        template_src = named.get("default") or next(iter(named.values()), None)
    if template_src is None and (directory / "chat_template.jinja").is_file():
        template_src = (directory / "chat_template.jinja").read_text(encoding="utf-8")
    if not isinstance(template_src, str):
        return None
    return ChatTemplate(template_src, bos_token=bos_token or "", eos_token=eos_token or "")


def _open_session(
    directory: Path,
    model_file: Path,
    provider: Provider,
    threads: int | None,
    config: DecoderConfig,
    spinning: Spinning,
) -> DecoderSession:
    """The session of ``model_file``, or of the plain-attention graph where only that one runs on CUDA."""
    session = DecoderSession(model_file, provider, threads, config, spinning)
    if not fused_attention_off_device(session.device, session.ops, session.kv_dtype):
        return session
    plain = directory / BATCH_MODEL_FILE
    if plain.is_file():
        log.info(
            "OnnxModel: %s uses float32 GroupQueryAttention, which has no CUDA kernel; "
            "running %s on CUDA instead",
            model_file.name,
            plain.name,
        )
        return DecoderSession(plain, provider, threads, config, spinning)
    log.warning(
        "OnnxModel: %s uses float32 GroupQueryAttention, which has no CUDA kernel: "
        "ONNX Runtime will run those nodes on the CPU (slow); export a float16 "
        "model for CUDA",
        model_file.name,
    )
    return session


def open_plain_session(
    directory: Path,
    session: DecoderSession,
    provider: Provider,
    threads: int | None,
    config: DecoderConfig | None,
    spinning: Spinning,
) -> DecoderSession:
    """The plain-attention session beside ``session`` (a fused-attention graph without
    position_ids), for left-padded batches; ``ValueError`` when the directory has none."""
    path = directory / BATCH_MODEL_FILE
    if not path.is_file():
        raise ValueError(
            f"OnnxModel: {session.path.name} uses fused attention without position_ids, which "
            f"cannot run left-padded batches, and there is no {BATCH_MODEL_FILE} in {directory}"
        )
    return DecoderSession(path, provider, threads, config, spinning)


def open_float_session(
    directory: Path,
    session: DecoderSession,
    provider: Provider,
    threads: int | None,
    config: DecoderConfig | None,
    spinning: Spinning,
) -> DecoderSession | None:
    """The float twin beside an exact int4 graph (:data:`~._config.FLOAT_MODEL_FILE`: its
    ``MatMulNBits`` as float ``MatMul`` over the weights they make, folded when it opens), for
    passes of several rows on the CPU, where onnxruntime's float-activation 4-bit kernel
    dequantizes every block on each call; None where there is none, or on another device."""
    path = directory / FLOAT_MODEL_FILE
    if session.device != "cpu" or not path.is_file():
        return None
    twin = DecoderSession(path, provider, threads, config, spinning)
    _release_freed_memory()
    return twin


def _release_freed_memory() -> None:
    """Give the C heap's free memory back to the system where the C library can (glibc's
    ``malloc_trim``). Folding a float twin's weights frees intermediates several times the
    weights' size, which glibc keeps in the heap (SmolLM2's int4 build: 3.1 GB resident after
    the session opened, 0.6 GB after trimming)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None)
        trim = getattr(libc, "malloc_trim", None)
        if trim is not None:
            trim(0)
    except OSError:  # no C library to ask: the memory stays with the process
        pass


def resolve_name(
    name_or_path: str | os.PathLike[str],
    *,
    pull: Callable[[str], Path],
    known: Callable[[], frozenset[str]],
) -> Path:
    """The model directory :meth:`OnnxModel.from_pretrained` loads for ``name_or_path``.

    ``known()`` gives the known model names and ``pull(name)`` pulls one into the cache (both
    from :mod:`rxstream.backends.convert`; called only for a bare name).
    """
    if isinstance(name_or_path, os.PathLike):
        return Path(name_or_path).expanduser()
    if not isinstance(name_or_path, str):
        raise TypeError(
            "OnnxModel.from_pretrained: name_or_path must be a str or a path, "
            f"got {type(name_or_path).__name__}"
        )
    name = name_or_path
    if not name:
        raise ValueError("OnnxModel.from_pretrained: name_or_path is empty")
    separators = {os.sep} | ({os.altsep} if os.altsep else set())
    if any(sep in name for sep in separators) or name.startswith((".", "~")):
        return Path(name).expanduser()
    names = known()
    if name in names:
        if Path(name).is_dir():
            warnings.warn(
                f"OnnxModel.from_pretrained: {name!r} is a known model and also a directory here; "
                f"loading the known model (write './{name}' to load the directory)",
                UserWarning,
                stacklevel=3,
            )
        return pull(name)
    if Path(name).is_dir():
        return Path(name)
    raise ValueError(
        f"OnnxModel.from_pretrained: {name!r} is neither a model directory nor a known model "
        f"({', '.join(sorted(names))})"
    )


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"OnnxModel: {path} is not valid JSON ({exc})") from None
    return data if isinstance(data, dict) else {}


def _ids(value: Any) -> set[int]:
    if value is None:
        return set()
    if isinstance(value, list):
        return {int(v) for v in value}
    return {int(value)}


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _config_from_genai(genai: dict[str, Any], directory: Path) -> DecoderConfig:
    """A :class:`DecoderConfig` from onnxruntime-genai's ``genai_config.json``."""
    try:
        model = genai["model"]
        dec = model["decoder"]
        heads = int(dec["num_attention_heads"])
        head_size = int(dec["head_size"])
        return DecoderConfig(
            vocab_size=int(model["vocab_size"]),
            hidden_size=heads * head_size,
            intermediate_size=int(dec.get("intermediate_size", 4 * heads * head_size)),
            num_layers=int(dec["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(dec.get("num_key_value_heads", heads)),
            max_position_embeddings=int(model.get("context_length", 2048)),
            eos_token_id=tuple(sorted(_ids(model.get("eos_token_id")))),
            bos_token_id=model.get("bos_token_id"),
            pad_token_id=model.get("pad_token_id"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"OnnxModel.load: {directory / 'genai_config.json'} lacks decoder fields ({exc})"
        ) from None
