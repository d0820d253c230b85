"""GGUF reading and conversion: dequantization, RoPE row permutation, tokenizer, end-to-end convert."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import quants

from rxstream.backends import OnnxModel
from rxstream.backends._config import DecoderConfig
from rxstream.backends._export import write_model_dir
from rxstream.backends._gguf import dequantize, read_gguf, unpermute_rope_rows
from rxstream.backends._graph import DecoderWeights, prepare_initializers
from rxstream.backends._pull import convert_gguf
from rxstream.backends._tokenizer import CHATML_TEMPLATE, train_tiny_tokenizer


@pytest.mark.parametrize("qtype", [Q.Q4_1, Q.Q4_0, Q.Q8_0, Q.F16, Q.F32])
def test_dequantize_matches_the_reference_implementation(qtype: Q) -> None:
    x = np.random.default_rng(int(qtype)).standard_normal((6, 96)).astype(np.float32)
    raw = quants.quantize(x, qtype)
    expected = quants.dequantize(raw, qtype)
    got = dequantize(raw, int(qtype), (6, 96))
    np.testing.assert_array_equal(got, expected)


def llama_cpp_permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's conversion order: each head's two rotary halves interleaved row by row."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def test_unpermute_inverts_the_llama_cpp_permutation() -> None:
    w = np.arange(4 * 8 * 3, dtype=np.float32).reshape(4 * 8, 3)
    permuted = llama_cpp_permute(w, 4)
    assert not np.array_equal(permuted, w)
    np.testing.assert_array_equal(unpermute_rope_rows(permuted, 4), w)


def _write_gguf(
    path: Path,
    cfg: DecoderConfig,
    weights: DecoderWeights,
    tokens: list[str],
    merges: list[str],
    types: list[int],
) -> None:
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(cfg.num_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_heads)
    w.add_head_count_kv(cfg.num_kv_heads)
    w.add_rope_freq_base(cfg.rope_theta)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template(CHATML_TEMPLATE)

    def q41(name: str, m: np.ndarray) -> None:
        w.add_tensor(name, quants.quantize(m, Q.Q4_1), raw_dtype=Q.Q4_1)

    w.add_tensor("token_embd.weight", quants.quantize(weights.embed, Q.Q8_0), raw_dtype=Q.Q8_0)
    w.add_tensor("output_norm.weight", weights.norm)
    for i, layer in enumerate(weights.layers):
        p = f"blk.{i}"
        w.add_tensor(f"{p}.attn_norm.weight", layer["input_norm"])
        w.add_tensor(f"{p}.ffn_norm.weight", layer["post_norm"])
        q41(f"{p}.attn_q.weight", llama_cpp_permute(layer["q"], cfg.num_heads))
        q41(f"{p}.attn_k.weight", llama_cpp_permute(layer["k"], cfg.num_kv_heads))
        for src, dst in (
            ("v", "attn_v"),
            ("o", "attn_output"),
            ("gate", "ffn_gate"),
            ("up", "ffn_up"),
            ("down", "ffn_down"),
        ):
            q41(f"{p}.{dst}.weight", layer[src])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_gguf_conversion_end_to_end(tmp_path: Path) -> None:
    tok = train_tiny_tokenizer()
    data = json.loads(tok.to_str())
    vocab: dict[str, int] = data["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    types = [3 if i < 3 else 1 for i in range(len(tokens))]
    cfg = DecoderConfig(
        vocab_size=len(tokens),
        hidden_size=64,
        intermediate_size=96,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=(2,),
    )
    rng = np.random.default_rng(0)

    def lin(o: int, i: int) -> np.ndarray:
        return (rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32)

    layers = [
        {
            "input_norm": np.ones(64, np.float32),
            "post_norm": np.ones(64, np.float32),
            "q": lin(64, 64),
            "k": lin(32, 64),
            "v": lin(32, 64),
            "o": lin(64, 64),
            "gate": lin(96, 64),
            "up": lin(96, 64),
            "down": lin(64, 96),
        }
        for _ in range(2)
    ]
    weights = DecoderWeights(
        embed=(0.3 * rng.standard_normal((len(tokens), 64))).astype(np.float32),
        norm=np.ones(64, np.float32),
        layers=layers,
    )
    gguf_path = tmp_path / "tiny.gguf"
    _write_gguf(gguf_path, cfg, weights, tokens, merges, types)

    parsed = read_gguf(gguf_path)
    assert parsed.config.num_kv_heads == 2 and parsed.config.vocab_size == len(tokens)
    assert parsed.chat_template == CHATML_TEMPLATE and parsed.eos_token == "<|im_end|>"
    text = "What is the capital of France? 12 cafés"
    assert parsed.tokenizer.encode(text).ids == tok.encode(text).ids

    converted = OnnxModel.load(convert_gguf(gguf_path, tmp_path / "converted", progress=False))
    # reference: the same (dequantized, unpermuted) weights written directly
    ref_layers = [
        {
            k: (quants.dequantize(quants.quantize(v, Q.Q4_1), Q.Q4_1) if v.ndim == 2 else v)
            for k, v in layer.items()
        }
        for layer in layers
    ]
    ref_weights = DecoderWeights(
        embed=quants.dequantize(quants.quantize(weights.embed, Q.Q8_0), Q.Q8_0),
        norm=weights.norm,
        layers=ref_layers,
    )
    ref_dir = write_model_dir(
        tmp_path / "ref",
        cfg,
        prepare_initializers(cfg, ref_weights),
        tok,
        chat_template=CHATML_TEMPLATE,
        attention="plain",
        external_data=False,
    )
    reference = OnnxModel.load(ref_dir)
    ids = [converted.encode_chat([{"role": "user", "content": text}])]
    np.testing.assert_allclose(converted.forward(ids)[0], reference.forward(ids)[0], atol=1e-4, rtol=0)
    assert converted.eos_token_ids == frozenset({2})
