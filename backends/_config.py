"""The shape of a Llama-style decoder (:class:`DecoderConfig`), read from / written to ``config.json``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DecoderConfig"]


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
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"DecoderConfig: {name} must be a positive int, got {value!r}")
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
        """Read the fields this package needs from a Hugging Face ``config.json`` mapping."""
        try:
            eos = data.get("eos_token_id")
            eos_ids: tuple[int, ...] = (
                () if eos is None else (tuple(int(e) for e in eos) if isinstance(eos, list) else (int(eos),))
            )
            num_heads = int(data["num_attention_heads"])
            return cls(
                vocab_size=int(data["vocab_size"]),
                hidden_size=int(data["hidden_size"]),
                intermediate_size=int(data.get("intermediate_size", 4 * int(data["hidden_size"]))),
                num_layers=int(data["num_hidden_layers"]),
                num_heads=num_heads,
                num_kv_heads=int(data.get("num_key_value_heads") or num_heads),
                max_position_embeddings=int(data.get("max_position_embeddings", 2048)),
                rope_theta=float(data.get("rope_theta", 10000.0)),
                rms_norm_eps=float(data.get("rms_norm_eps", 1e-5)),
                tie_word_embeddings=bool(data.get("tie_word_embeddings", False)),
                bos_token_id=None if data.get("bos_token_id") is None else int(data["bos_token_id"]),
                eos_token_id=eos_ids,
                pad_token_id=None if data.get("pad_token_id") is None else int(data["pad_token_id"]),
            )
        except KeyError as exc:
            raise ValueError(f"config.json: missing required field {exc.args[0]!r}") from None

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
