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
    weights = _random_weights(config, seed)
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
        quantization=quantization,
    )


def _random_weights(config: DecoderConfig, seed: int) -> DecoderWeights:
    """Random weights of ``config``'s shapes (scaled so activations stay of order one)."""
    rng = np.random.default_rng(seed)
    hidden, hd = config.hidden_size, config.head_dim

    def linear(n_out: int, n_in: int) -> np.ndarray:
        weight: np.ndarray = (rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)).astype(np.float32)
        return weight

    def norm() -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)

    layers = []
    for _ in range(config.num_layers):
        layers.append(
            {
                "input_norm": norm(),
                "q": linear(config.num_heads * hd, hidden),
                "k": linear(config.num_kv_heads * hd, hidden),
                "v": linear(config.num_kv_heads * hd, hidden),
                "o": linear(hidden, config.num_heads * hd),
                "post_norm": norm(),
                "gate": linear(config.intermediate_size, hidden),
                "up": linear(config.intermediate_size, hidden),
                "down": linear(hidden, config.intermediate_size),
            }
        )
    return DecoderWeights(
        embed=(0.3 * rng.standard_normal((config.vocab_size, hidden))).astype(np.float32),
        norm=norm(),
        lm_head=None if config.tie_word_embeddings else linear(config.vocab_size, hidden),
        layers=layers,
    )
