"""A tiny random-weight decoder with the real model's inputs and outputs, for tests (built in ms)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..onnx._config import DecoderConfig
from ._export import write_model_dir
from ._graph import Attention, DecoderWeights, Quantization, prepare_initializers
from ._tokenizer import CHATML_TEMPLATE, SPECIAL_TOKENS, train_tiny_tokenizer

__all__ = ["build_tiny_model"]


def build_tiny_model(
    directory: str | Path,
    *,
    seed: int = 0,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 128,
    max_position_embeddings: int = 512,
    vocab_size: int = 384,
    attention: Attention = "plain",
    quantization: Quantization = "fp32",
    tie_word_embeddings: bool = True,
) -> Path:
    """Build a random-weight Llama-style decoder in the Optimum layout into ``directory``; return it.

    The directory gets ``model.onnx`` (with KV cache; plus ``model_plain.onnx`` when
    ``attention="gqa"``), ``config.json``, ``generation_config.json``, ``tokenizer.json`` (a byte-level
    BPE trained in-process with ``tokenizers``; ids 0, 1, 2 are ``<|endoftext|>``, ``<|im_start|>``,
    ``<|im_end|>``) and ``tokenizer_config.json`` with a ChatML chat template. EOS is ``<|im_end|>``.
    The same ``seed`` gives the same weights.
    """
    out = Path(directory)
    tokenizer = train_tiny_tokenizer(vocab_size)
    config = DecoderConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_layers=num_layers,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        max_position_embeddings=max_position_embeddings,
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=tie_word_embeddings,
        bos_token_id=1,
        eos_token_id=(2,),
        pad_token_id=0,
    )
    rng = np.random.default_rng(seed)

    def linear(n_out: int, n_in: int) -> np.ndarray:
        weight: np.ndarray = (rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)).astype(np.float32)
        return weight

    def norm() -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(hidden_size)).astype(np.float32)

    hd = config.head_dim
    layers = []
    for _ in range(num_layers):
        layers.append(
            {
                "input_norm": norm(),
                "q": linear(num_heads * hd, hidden_size),
                "k": linear(num_kv_heads * hd, hidden_size),
                "v": linear(num_kv_heads * hd, hidden_size),
                "o": linear(hidden_size, num_heads * hd),
                "post_norm": norm(),
                "gate": linear(intermediate_size, hidden_size),
                "up": linear(intermediate_size, hidden_size),
                "down": linear(hidden_size, intermediate_size),
            }
        )
    weights = DecoderWeights(
        embed=(0.3 * rng.standard_normal((config.vocab_size, hidden_size))).astype(np.float32),
        norm=norm(),
        lm_head=None if tie_word_embeddings else linear(config.vocab_size, hidden_size),
        layers=layers,
    )
    arrays = prepare_initializers(config, weights, quantization)
    return write_model_dir(
        out,
        config,
        arrays,
        tokenizer,
        chat_template=CHATML_TEMPLATE,
        attention=attention,
        external_data=False,
        eos_token=SPECIAL_TOKENS[2],
        bos_token=SPECIAL_TOKENS[1],
        pad_token=SPECIAL_TOKENS[0],
    )
