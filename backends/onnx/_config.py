"""The shape of a Llama-style decoder (:class:`DecoderConfig`), read from / written to ``config.json``;
the sampling defaults of ``generation_config.json`` (:func:`sampling_defaults`); the names of the
graph files in a model directory (:data:`MODEL_FILE`, :data:`BATCH_MODEL_FILE`,
:data:`FLOAT_MODEL_FILE`, :data:`DATA_FILE`);
the builds a GGUF converts to (:data:`QUANTIZATIONS`)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rxstream import SamplingParams, SamplingParamsError

__all__ = [
    "BATCH_MODEL_FILE",
    "DATA_FILE",
    "FLOAT_MODEL_FILE",
    "MODEL_FILE",
    "QUANTIZATIONS",
    "DecoderConfig",
    "Quantization",
    "check_quantization",
    "sampling_defaults",
]

Quantization = Literal["fp32", "int4", "int4-a8"]
QUANTIZATIONS: tuple[Quantization, ...] = ("fp32", "int4", "int4-a8")
"""The builds of a GGUF: ``fp32`` (float weights), ``int4`` (the GGUF's own blocks of at most 4
bits as ``MatMulNBits``, float activations: exact) and ``int4-a8`` (the same weights, 8-bit
activations per block of 32 as llama.cpp rounds them: faster, not exact; docs/benchmarks.md
gives its accuracy)."""


def check_quantization(value: object, owner: str) -> Quantization:
    """``value`` if it names a build, else a ``ValueError`` naming ``owner`` and the builds."""
    for q in QUANTIZATIONS:
        if value == q:
            return q
    names = ", ".join(map(repr, QUANTIZATIONS))
    raise ValueError(f"{owner}: quantization must be one of {names}, got {value!r}")


MODEL_FILE = "model.onnx"
"""The graph :class:`~rxstream.backends.OnnxModel` loads."""
BATCH_MODEL_FILE = "model_plain.onnx"
"""A plain-attention graph over the same weights, for left-padded batches when ``model.onnx`` uses GQA."""
FLOAT_MODEL_FILE = "model_float.onnx"
"""In an exact int4 build: the graph over the same file whose ``MatMulNBits`` are float ``MatMul``
over the weights their blocks make (folded when the session opens), for the batch's several-row
steps, where onnxruntime's float-activation 4-bit kernel dequantizes every block on each call."""
DATA_FILE = "model.onnx.data"
"""The external weights file shared by the graphs."""

_REQUIRED: Any = object()


@dataclass(frozen=True, slots=True)
class DecoderConfig:
    """Hyper-parameters of a Llama-architecture decoder (the fields of a Hugging Face ``config.json``).

    Attributes:
        vocab_size: number of token ids.
        hidden_size: width of the residual stream.
        intermediate_size: width of the gated MLP.
        num_layers: number of decoder blocks.
        num_heads: number of query heads.
        num_kv_heads: number of key/value heads (grouped-query attention when smaller).
        max_position_embeddings: the longest sequence the rotary cache covers.
        rope_theta: rotary embedding base.
        rms_norm_eps: epsilon of the RMS norms.
        tie_word_embeddings: whether the output projection is the embedding matrix.
        bos_token_id: beginning-of-sequence id (or None).
        eos_token_id: end-of-sequence id(s).
        pad_token_id: padding id (or None).
    """

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = True
    bos_token_id: int | None = None
    eos_token_id: tuple[int, ...] = ()
    pad_token_id: int | None = None

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_layers",
            "num_heads",
            "num_kv_heads",
            "max_position_embeddings",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"DecoderConfig: {name} must be a positive int, got {value!r}")
        for name in ("rope_theta", "rms_norm_eps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"DecoderConfig: {name} must be a finite number, got {value!r}")
        if not self.rope_theta > 0:
            raise ValueError(f"DecoderConfig: rope_theta must be > 0, got {self.rope_theta!r}")
        if not self.rms_norm_eps >= 0:
            raise ValueError(f"DecoderConfig: rms_norm_eps must be >= 0, got {self.rms_norm_eps!r}")
        if not isinstance(self.tie_word_embeddings, bool):
            raise ValueError(
                f"DecoderConfig: tie_word_embeddings must be a bool, got {self.tie_word_embeddings!r}"
            )
        if not isinstance(self.eos_token_id, tuple):
            raise ValueError(f"DecoderConfig: eos_token_id must be a tuple of ids, got {self.eos_token_id!r}")
        for name, ids in (
            ("bos_token_id", () if self.bos_token_id is None else (self.bos_token_id,)),
            ("eos_token_id", self.eos_token_id),
            ("pad_token_id", () if self.pad_token_id is None else (self.pad_token_id,)),
        ):
            for i in ids:
                if isinstance(i, bool) or not isinstance(i, int) or i < 0:
                    raise ValueError(f"DecoderConfig: {name} must hold token ids (ints >= 0), got {i!r}")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"DecoderConfig: hidden_size {self.hidden_size} is not a multiple of "
                f"num_heads {self.num_heads}"
            )
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"DecoderConfig: num_heads {self.num_heads} is not a multiple of num_kv_heads "
                f"{self.num_kv_heads}"
            )
        if self.head_dim % 2:
            raise ValueError(f"DecoderConfig: head_dim {self.head_dim} must be even for rotary embeddings")

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden_size // self.num_heads

    def to_hf_dict(self) -> dict[str, Any]:
        """The Hugging Face ``config.json`` content (``LlamaForCausalLM``)."""
        eos: int | list[int] | None
        eos = list(self.eos_token_id) if len(self.eos_token_id) != 1 else self.eos_token_id[0]
        if not self.eos_token_id:
            eos = None
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "max_position_embeddings": self.max_position_embeddings,
            "rope_theta": self.rope_theta,
            "rope_scaling": None,
            "rms_norm_eps": self.rms_norm_eps,
            "hidden_act": "silu",
            "attention_bias": False,
            "mlp_bias": False,
            "tie_word_embeddings": self.tie_word_embeddings,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": eos,
            "pad_token_id": self.pad_token_id,
            "torch_dtype": "float32",
            "use_cache": True,
        }

    @classmethod
    def from_hf_dict(cls, data: dict[str, Any]) -> DecoderConfig:
        """Read the fields this package needs from a Hugging Face ``config.json`` mapping.

        A missing or malformed field raises ``ValueError`` naming it.
        """

        def field(key: str, default: Any = _REQUIRED) -> Any:
            value = data.get(key)
            if value is None:
                if default is _REQUIRED:
                    raise ValueError(f"config.json: missing required field {key!r}")
                return default
            return value

        def whole(key: str, value: Any) -> int:
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value != int(value)
            ):
                raise ValueError(f"config.json: {key} must be an integer, got {value!r}")
            return int(value)

        def integer(key: str, default: Any = _REQUIRED) -> int:
            return whole(key, field(key, default))

        def number(key: str, default: float) -> float:
            value = field(key, default)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"config.json: {key} must be a number, got {value!r}")
            return float(value)

        def optional_id(key: str) -> int | None:
            # some configs say -1 for "none"
            value = None if data.get(key) is None else integer(key)
            return None if value is None or value < 0 else value

        eos = data.get("eos_token_id")
        if eos is None:
            eos_ids: tuple[int, ...] = ()
        elif isinstance(eos, list):
            eos_ids = tuple(i for i in (whole("eos_token_id", e) for e in eos) if i >= 0)
        else:
            eos_ids = tuple(i for i in (whole("eos_token_id", eos),) if i >= 0)
        num_heads = integer("num_attention_heads")
        hidden = integer("hidden_size")
        tie = field("tie_word_embeddings", False)
        if tie not in (True, False):
            raise ValueError(f"config.json: tie_word_embeddings must be true or false, got {tie!r}")
        kv_heads = data.get("num_key_value_heads") or num_heads  # 0 or null: as many as query heads
        fields: dict[str, Any] = {
            "vocab_size": integer("vocab_size"),
            "hidden_size": hidden,
            "intermediate_size": integer("intermediate_size", 4 * hidden),
            "num_layers": integer("num_hidden_layers"),
            "num_heads": num_heads,
            "num_kv_heads": whole("num_key_value_heads", kv_heads),
            "max_position_embeddings": integer("max_position_embeddings", 2048),
            "rope_theta": number("rope_theta", 10000.0),
            "rms_norm_eps": number("rms_norm_eps", 1e-5),
            "tie_word_embeddings": bool(tie),
            "bos_token_id": optional_id("bos_token_id"),
            "eos_token_id": eos_ids,
            "pad_token_id": optional_id("pad_token_id"),
        }
        try:
            return cls(**fields)
        except ValueError as exc:
            raise ValueError(str(exc).replace("DecoderConfig: ", "config.json: ", 1)) from None

    @classmethod
    def read(cls, path: Path) -> DecoderConfig:
        """Read ``config.json`` at ``path``."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a JSON object")
        return cls.from_hf_dict(data)

    def write(self, path: Path) -> None:
        """Write ``config.json`` to ``path``."""
        path.write_text(json.dumps(self.to_hf_dict(), indent=2) + "\n", encoding="utf-8")


_SAMPLING_FIELDS = tuple(spec for spec in SamplingParams.table() if spec.hf)
"""The sampling fields a ``generation_config.json`` may give (under the same names)."""


def sampling_defaults(
    generation_config: Mapping[str, Any], where: str = "generation_config.json"
) -> SamplingParams:
    """The sampling a model's ``generation_config.json`` asks for, as vLLM reads it by default.

    * ``do_sample: false`` means greedy decoding, whatever the sampling fields say (as in
      Hugging Face transformers); a ``repetition_penalty`` still applies.
    * Otherwise the sampling fields it has (those of :meth:`SamplingParams.table` marked
      ``hf``: ``temperature``, ``top_k``, ...) are the defaults; a field it lacks keeps rxstream's default
      (``temperature`` 1.0 once some sampling field is given, as in transformers).
    * Without sampling fields: greedy.
    * ``max_new_tokens`` there becomes the default budget.

    Raises:
        ValueError: a field with an unusable value, naming the file and the field.
    """
    values: dict[str, Any] = {}
    given = (spec for spec in _SAMPLING_FIELDS if generation_config.get(spec.name) is not None)
    do_sample = generation_config.get("do_sample")
    if do_sample is False:  # greedy: only the fields that still apply
        given = (spec for spec in given if spec.greedy_too)
    present = {spec.name: generation_config[spec.name] for spec in given}
    if do_sample is not False and present and "temperature" not in present:
        values["temperature"] = 1.0
    values.update(present)
    budget = generation_config.get("max_new_tokens")
    if budget is not None:
        values["max_new_tokens"] = budget
    try:
        return SamplingParams(**values)
    except SamplingParamsError as exc:
        raise ValueError(f"{where}: {exc}") from None
