"""GGUF reading and conversion: every tensor type gguf-py handles, RoPE row permutation, tokenizer, errors."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
import onnx
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import quants
from reactivex import operators as ops
from tokenizers import Tokenizer

from rxstream.backends import OnnxModel
from rxstream.backends.convert import convert_gguf
from rxstream.backends.convert._export import MODEL_FILE, write_model_dir
from rxstream.backends.convert._gguf import read_gguf, unpermute_rope_rows
from rxstream.backends.convert._graph import DecoderWeights, prepare_initializers
from rxstream.backends.convert._tokenizer import CHATML_TEMPLATE, train_tiny_tokenizer
from rxstream.backends.onnx._config import DecoderConfig

F32 = np.ndarray
ROW = 256  # a multiple of every ggml block size (32, 64, 128, 256)


def _can_quantize(qtype: Q) -> bool:
    try:
        quants.quantize(np.zeros((1, ROW), np.float32), qtype)
    except (NotImplementedError, quants.QuantError):
        return False
    return True


def _can_dequantize(qtype: Q) -> bool:
    try:
        quants.dequantize(np.zeros((1, gguf.GGML_QUANT_SIZES[qtype][1]), np.uint8), qtype)
    except NotImplementedError:
        return False
    return True


WRITABLE = [q for q in Q if _can_quantize(q)]
"""Every type gguf-py can write (F32, F16, BF16 and the types ``gguf.quants.quantize`` supports)."""
READ_ONLY = [q for q in Q if _can_dequantize(q) and q not in WRITABLE]
"""Types gguf-py can dequantize but not write (the K-quants, IQ types, ...)."""
UNREADABLE = [q for q in Q if not _can_dequantize(q)]


def test_the_type_lists_cover_the_common_llama_cpp_types() -> None:
    assert {Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0} <= set(WRITABLE)
    assert {Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K} <= set(WRITABLE) | set(READ_ONLY)


def llama_cpp_permute(w: F32, n_head: int, n_head_kv: int | None) -> F32:
    """``LlamaModel.permute`` of llama.cpp's convert_hf_to_gguf.py: each head's rotary halves interleaved."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    out: F32 = w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    return out


def test_unpermute_inverts_the_llama_cpp_permutation() -> None:
    w = np.arange(4 * 8 * 3, dtype=np.float32).reshape(4 * 8, 3)
    permuted = llama_cpp_permute(w, 4, None)
    assert not np.array_equal(permuted, w)
    np.testing.assert_array_equal(unpermute_rope_rows(permuted, 4), w)


# ---------------------------------------------------------------------------------------- tiny models
@dataclass
class Tiny:
    tokenizer: Tokenizer
    tokens: list[str]
    merges: list[str]
    types: list[int]
    config: DecoderConfig
    weights: DecoderWeights


def tiny_llama(
    *, hidden: int = ROW, intermediate: int = 2 * ROW, untied: bool = False, seed: int = 0
) -> Tiny:
    """A random two-layer Llama (4 heads, 2 KV heads) with a real byte-level BPE tokenizer."""
    tok = train_tiny_tokenizer()
    data = json.loads(tok.to_str())
    vocab: dict[str, int] = data["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    types = [3 if i < 3 else 1 for i in range(len(tokens))]
    cfg = DecoderConfig(
        vocab_size=len(tokens),
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=(2,),
        tie_word_embeddings=not untied,
    )
    rng = np.random.default_rng(seed)

    def lin(o: int, i: int) -> F32:
        return (rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32)

    def norm() -> F32:
        return (1.0 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)

    kv = cfg.num_kv_heads * cfg.head_dim
    layers = [
        {
            "input_norm": norm(),
            "post_norm": norm(),
            "q": lin(hidden, hidden),
            "k": lin(kv, hidden),
            "v": lin(kv, hidden),
            "o": lin(hidden, hidden),
            "gate": lin(intermediate, hidden),
            "up": lin(intermediate, hidden),
            "down": lin(hidden, intermediate),
        }
        for _ in range(cfg.num_layers)
    ]
    weights = DecoderWeights(
        embed=(0.3 * rng.standard_normal((len(tokens), hidden))).astype(np.float32),
        norm=norm(),
        lm_head=lin(len(tokens), hidden) if untied else None,
        layers=layers,
    )
    return Tiny(tok, tokens, merges, types, cfg, weights)


_LINEAR = (
    ("v", "attn_v"),
    ("o", "attn_output"),
    ("gate", "ffn_gate"),
    ("up", "ffn_up"),
    ("down", "ffn_down"),
)


def gguf_tensors(t: Tiny) -> dict[str, F32]:
    """The float32 tensors under their GGUF names, Q and K permuted as llama.cpp's converter does."""
    cfg, w = t.config, t.weights
    out = {"token_embd.weight": w.embed, "output_norm.weight": w.norm}
    if w.lm_head is not None:
        out["output.weight"] = w.lm_head
    for i, layer in enumerate(w.layers):
        p = f"blk.{i}"
        out[f"{p}.attn_norm.weight"] = layer["input_norm"]
        out[f"{p}.ffn_norm.weight"] = layer["post_norm"]
        out[f"{p}.attn_q.weight"] = llama_cpp_permute(layer["q"], cfg.num_heads, cfg.num_heads)
        out[f"{p}.attn_k.weight"] = llama_cpp_permute(layer["k"], cfg.num_heads, cfg.num_kv_heads)
        for src, dst in _LINEAR:
            out[f"{p}.{dst}.weight"] = layer[src]
    return out


Encoded = dict[str, tuple[np.ndarray, Q]]


def encode(tensors: dict[str, F32], qtype_of: Callable[[str], Q]) -> Encoded:
    """Matrices quantized with ``gguf.quants.quantize`` to ``qtype_of(name)``; norms stay F32."""
    out: Encoded = {}
    for name, a in tensors.items():
        q = qtype_of(name) if a.ndim == 2 else Q.F32
        out[name] = (quants.quantize(a, q), q)
    return out


def random_blocks(tensors: dict[str, F32], qtype: Q, seed: int = 0) -> Encoded:
    """Matrices as random ``qtype`` blocks (for types gguf-py cannot write); norms stay F32.

    Bit 6 of every byte is cleared, so no fp16 / e8m0 / e4m3 scale in a block is infinite or NaN.
    """
    rng = np.random.default_rng(seed)
    out: Encoded = {}
    for name, a in tensors.items():
        if a.ndim == 1:
            out[name] = (a, Q.F32)
            continue
        shape = quants.quant_shape_to_byte_shape(a.shape, qtype)
        raw = rng.integers(0, 256, size=shape, dtype=np.uint8) & np.uint8(0xBF)
        out[name] = (raw, qtype)
    return out


def write_gguf(
    path: Path,
    t: Tiny,
    tensors: Encoded,
    *,
    omit: Iterable[str] = (),
    more: Callable[[gguf.GGUFWriter], None] | None = None,
) -> Path:
    cfg = t.config
    w = gguf.GGUFWriter(str(path), "llama")
    meta: dict[str, Callable[[], None]] = {
        "llama.block_count": lambda: w.add_block_count(cfg.num_layers),
        "llama.context_length": lambda: w.add_context_length(cfg.max_position_embeddings),
        "llama.embedding_length": lambda: w.add_embedding_length(cfg.hidden_size),
        "llama.feed_forward_length": lambda: w.add_feed_forward_length(cfg.intermediate_size),
        "llama.attention.head_count": lambda: w.add_head_count(cfg.num_heads),
        "llama.attention.head_count_kv": lambda: w.add_head_count_kv(cfg.num_kv_heads),
        "llama.rope.freq_base": lambda: w.add_rope_freq_base(cfg.rope_theta),
        "llama.attention.layer_norm_rms_epsilon": lambda: w.add_layer_norm_rms_eps(cfg.rms_norm_eps),
        "llama.vocab_size": lambda: w.add_vocab_size(cfg.vocab_size),
    }
    for key, add in meta.items():
        if key not in omit:
            add()
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(t.tokens)
    w.add_token_types(t.types)
    w.add_token_merges(t.merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template(CHATML_TEMPLATE)
    if more is not None:
        more(w)
    for name, (raw, qtype) in tensors.items():
        w.add_tensor(name, raw, raw_dtype=qtype if raw.dtype == np.uint8 else None)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def onnx_weights(model_dir: Path) -> dict[str, np.ndarray]:
    model = onnx.load(str(model_dir / MODEL_FILE), load_external_data=True)
    return {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}


def assert_same_bits(got: np.ndarray, expected: np.ndarray, what: str) -> None:
    assert got.dtype == np.float32 and expected.dtype == np.float32, what
    assert got.shape == expected.shape, (what, got.shape, expected.shape)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32)), what


def assert_converted_weights_are_the_dequantized_tensors(gguf_path: Path, model_dir: Path, t: Tiny) -> None:
    """Every ONNX weight is bit for bit ``gguf.quants.dequantize`` of its GGUF tensor.

    Q and K rows are compared after applying llama.cpp's permutation to the converted weights
    (independent of the converter's un-permutation).
    """
    reader = gguf.GGUFReader(str(gguf_path))
    deq = {r.name: quants.dequantize(r.data, r.tensor_type) for r in reader.tensors}
    got = onnx_weights(model_dir)
    cfg = t.config
    nh, nkv, hd = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    assert_same_bits(got["embed_tokens"], deq["token_embd.weight"], "token_embd")
    assert_same_bits(got["norm"], deq["output_norm.weight"], "output_norm")
    if "output.weight" in deq:
        assert_same_bits(got["lm_head"].T, deq["output.weight"], "output")
    else:
        assert "lm_head" not in got
    for i in range(cfg.num_layers):
        p, g = f"blk.{i}", f"layers.{i}"
        assert_same_bits(got[f"{g}.input_norm"], deq[f"{p}.attn_norm.weight"], f"{p}.attn_norm")
        assert_same_bits(got[f"{g}.post_norm"], deq[f"{p}.ffn_norm.weight"], f"{p}.ffn_norm")
        qkv = np.ascontiguousarray(got[f"{g}.qkv"].T)
        q, k, v = np.split(qkv, [nh * hd, (nh + nkv) * hd])
        assert_same_bits(llama_cpp_permute(q, nh, nh), deq[f"{p}.attn_q.weight"], f"{p}.attn_q")
        assert_same_bits(llama_cpp_permute(k, nh, nkv), deq[f"{p}.attn_k.weight"], f"{p}.attn_k")
        assert_same_bits(v, deq[f"{p}.attn_v.weight"], f"{p}.attn_v")
        for name, dst in _LINEAR[1:]:
            assert_same_bits(got[f"{g}.{name}"].T, deq[f"{p}.{dst}.weight"], f"{p}.{dst}")


def assert_generates(model_dir: Path, n: int = 4) -> list[int]:
    model = OnnxModel.load(model_dir)
    assert np.isfinite(model.forward([[1, 5, 9, 2]])[0]).all()
    prompt = model.encode_chat([{"role": "user", "content": "What is the capital of France?"}])
    ids: list[int] = model.generate(prompt, max_new_tokens=n, ignore_eos=True).pipe(ops.to_list()).run()
    assert len(ids) == n and all(0 <= i < model.tokenizer.get_vocab_size() for i in ids)
    return ids


# -------------------------------------------------------------------------------------- conversion
@pytest.mark.parametrize("qtype", WRITABLE, ids=lambda q: q.name)
def test_every_writable_type_converts_to_its_dequantized_values(qtype: Q, tmp_path: Path) -> None:
    t = tiny_llama(untied=True, seed=int(qtype))
    path = write_gguf(tmp_path / "m.gguf", t, encode(gguf_tensors(t), lambda _name: qtype))
    assert {r.tensor_type for r in gguf.GGUFReader(str(path)).tensors if len(r.shape) == 2} == {qtype}
    model_dir = convert_gguf(path, tmp_path / "onnx", progress=False)
    assert_converted_weights_are_the_dequantized_tensors(path, model_dir, t)
    assert_generates(model_dir)


@pytest.mark.parametrize("qtype", READ_ONLY, ids=lambda q: q.name)
def test_every_read_only_type_converts_to_its_dequantized_values(qtype: Q, tmp_path: Path) -> None:
    # K-quants, IQ types, ...: gguf-py cannot quantize them, so the blocks are random bytes
    t = tiny_llama()
    path = write_gguf(tmp_path / "m.gguf", t, random_blocks(gguf_tensors(t), qtype, seed=int(qtype)))
    model_dir = convert_gguf(path, tmp_path / "onnx", progress=False)
    assert_converted_weights_are_the_dequantized_tensors(path, model_dir, t)
    assert_generates(model_dir)


def test_mixed_types_in_one_file(tmp_path: Path) -> None:
    # llama.cpp mixes types in one file (Q4_K_M: Q6_K for some tensors, Q4_K for the rest)
    t = tiny_llama()
    tensors = gguf_tensors(t)
    kinds = [q for q in (Q.Q6_K, Q.Q4_K) if q in READ_ONLY]
    encoded = encode(tensors, lambda _name: Q.Q8_0)
    matrices = [name for name, a in tensors.items() if a.ndim == 2]
    for j, name in enumerate(matrices):
        if kinds and j % 3:
            encoded[name] = random_blocks({name: tensors[name]}, kinds[j % 3 - 1], seed=j)[name]
    path = write_gguf(tmp_path / "m.gguf", t, encoded)
    assert {r.tensor_type for r in gguf.GGUFReader(str(path)).tensors} == {Q.F32, Q.Q8_0, *kinds}
    model_dir = convert_gguf(path, tmp_path / "onnx", progress=False)
    assert_converted_weights_are_the_dequantized_tensors(path, model_dir, t)


def dequantize_nbits(arrays: dict[str, np.ndarray], name: str) -> np.ndarray:
    """The ``[out, in]`` float32 matrix a 4-bit ``MatMulNBits`` computes from ``{name}.q``,
    ``{name}.scales``, ``{name}.zp`` (default 8) and the added ``{name}.mins`` (``[blocks, out]``)."""
    packed = arrays[f"{name}.q"]
    n, blocks, half = packed.shape
    assert half == 16, name  # 4 bits, blocks of 32
    codes = np.concatenate([packed[..., :, None] & 15, packed[..., :, None] >> 4], axis=-1).reshape(
        n, blocks, 32
    )
    if f"{name}.zp" in arrays:
        zp_packed = arrays[f"{name}.zp"]
        zp = np.stack([zp_packed & 15, zp_packed >> 4], axis=-1).reshape(n, -1)[:, :blocks]
    else:
        zp = np.full((n, blocks), 8, np.uint8)
    scales = arrays[f"{name}.scales"].reshape(n, blocks)
    w = (codes.astype(np.int16) - zp[..., None].astype(np.int16)).astype(np.float32) * scales[..., None]
    if f"{name}.mins" in arrays:
        w = w + arrays[f"{name}.mins"].T[..., None]
    return np.asarray(w, np.float32).reshape(n, blocks * 32)


@pytest.mark.parametrize(("qtype", "untied"), [(Q.Q4_0, False), (Q.Q4_1, False), (Q.Q4_1, True)])
def test_int4_keeps_the_gguf_4bit_blocks_exactly(qtype: Q, untied: bool, tmp_path: Path) -> None:
    # Q4_0 / Q4_1 blocks go into MatMulNBits as they are: the int4 weights are the fp32 build's
    t = tiny_llama(untied=untied, seed=int(qtype))
    encoded = encode(gguf_tensors(t), lambda name: Q.Q8_0 if name == "token_embd.weight" else qtype)
    path = write_gguf(tmp_path / "m.gguf", t, encoded)
    fp32_dir = convert_gguf(path, tmp_path / "fp32", progress=False)
    int4_dir = convert_gguf(path, tmp_path / "int4", quantization="int4", progress=False)
    fp32, int4 = onnx_weights(fp32_dir), onnx_weights(int4_dir)
    names = [
        f"layers.{i}.{n}" for i in range(t.config.num_layers) for n in ("qkv", "o", "gate", "up", "down")
    ]
    for name in [*names, *(["lm_head"] if untied else [])]:
        assert (f"{name}.mins" in int4) == (qtype == Q.Q4_1), name
        assert_same_bits(dequantize_nbits(int4, name), np.ascontiguousarray(fp32[name].T), name)
    # the tied Q8_0 head stays the float embedding table (8-bit MatMulNBits is slow or int8-rounded)
    assert untied or not any(k.startswith("lm_head") for k in int4)
    assert_same_bits(int4["embed_tokens"], fp32["embed_tokens"], "embed_tokens")
    ids = [[1, 5, 9, 2, 7, 3, 11, 4]]
    a, b = OnnxModel.load(fp32_dir).forward(ids)[0], OnnxModel.load(int4_dir).forward(ids)[0]
    np.testing.assert_allclose(b, a, atol=1e-4, rtol=0)


def test_int4_quantizes_anew_what_has_no_exact_4bit_form(tmp_path: Path) -> None:
    # Q/K/V of different block kinds (Q4_0 and Q4_1) and F16 matrices: quantized to 4 bits;
    # Q8_0 matrices stay exact floats (MatMul)
    t = tiny_llama(seed=3)
    kinds = {"attn_q": Q.Q4_0, "attn_k": Q.Q4_1, "attn_v": Q.Q4_1, "ffn_up": Q.Q8_0, "ffn_down": Q.F16}
    encoded = encode(
        gguf_tensors(t), lambda name: next((q for key, q in kinds.items() if key in name), Q.Q4_1)
    )
    path = write_gguf(tmp_path / "m.gguf", t, encoded)
    int4 = onnx_weights(convert_gguf(path, tmp_path / "int4", quantization="int4", progress=False))
    fp32 = onnx_weights(convert_gguf(path, tmp_path / "fp32", progress=False))
    for i in range(t.config.num_layers):
        p = f"layers.{i}"
        for name in (f"{p}.qkv", f"{p}.down"):  # symmetric, no zero points or mins
            assert f"{name}.q" in int4 and f"{name}.zp" not in int4 and f"{name}.mins" not in int4
            assert not np.array_equal(dequantize_nbits(int4, name), fp32[name].T), name
        for name in (f"{p}.o", f"{p}.gate"):  # Q4_1 kept
            assert_same_bits(dequantize_nbits(int4, name), np.ascontiguousarray(fp32[name].T), name)
        assert f"{p}.up.q" not in int4
        assert_same_bits(int4[f"{p}.up"], fp32[f"{p}.up"], f"{p}.up")
    assert_generates(tmp_path / "int4")


def test_unpermutation_restores_the_original_q_and_k(tmp_path: Path) -> None:
    # F32 tensors permuted as llama.cpp's converter does: the converted Q/K rows are the originals
    t = tiny_llama(hidden=64, intermediate=96)
    path = write_gguf(tmp_path / "m.gguf", t, encode(gguf_tensors(t), lambda _name: Q.F32))
    got = onnx_weights(convert_gguf(path, tmp_path / "onnx", progress=False))
    cfg = t.config
    rows = [cfg.num_heads * cfg.head_dim, (cfg.num_heads + cfg.num_kv_heads) * cfg.head_dim]
    for i, layer in enumerate(t.weights.layers):
        q, k, v = np.split(np.ascontiguousarray(got[f"layers.{i}.qkv"].T), rows)
        assert not np.array_equal(q, llama_cpp_permute(layer["q"], cfg.num_heads, None))
        assert_same_bits(q, layer["q"], f"layer {i} q")
        assert_same_bits(k, layer["k"], f"layer {i} k")
        assert_same_bits(v, layer["v"], f"layer {i} v")


def test_gguf_conversion_end_to_end(tmp_path: Path) -> None:
    t = tiny_llama(hidden=64, intermediate=96)
    encoded = encode(gguf_tensors(t), lambda name: Q.Q8_0 if name == "token_embd.weight" else Q.Q4_1)
    gguf_path = write_gguf(tmp_path / "tiny.gguf", t, encoded)

    parsed = read_gguf(gguf_path)
    assert parsed.config.num_kv_heads == 2 and parsed.config.vocab_size == len(t.tokens)
    assert parsed.chat_template == CHATML_TEMPLATE and parsed.eos_token == "<|im_end|>"
    text = "What is the capital of France? 12 cafés"
    assert parsed.tokenizer.encode(text).ids == t.tokenizer.encode(text).ids

    converted = OnnxModel.load(convert_gguf(gguf_path, tmp_path / "converted", progress=False))
    # reference: the same (dequantized, unpermuted) weights written directly
    ref_layers = [
        {
            k: (quants.dequantize(quants.quantize(v, Q.Q4_1), Q.Q4_1) if v.ndim == 2 else v)
            for k, v in layer.items()
        }
        for layer in t.weights.layers
    ]
    ref_weights = DecoderWeights(
        embed=quants.dequantize(quants.quantize(t.weights.embed, Q.Q8_0), Q.Q8_0),
        norm=t.weights.norm,
        layers=ref_layers,
    )
    ref_dir = write_model_dir(
        tmp_path / "ref",
        t.config,
        prepare_initializers(t.config, ref_weights),
        t.tokenizer,
        chat_template=CHATML_TEMPLATE,
        attention="plain",
        external_data=False,
    )
    reference = OnnxModel.load(ref_dir)
    ids = [converted.encode_chat([{"role": "user", "content": text}])]
    np.testing.assert_allclose(converted.forward(ids)[0], reference.forward(ids)[0], atol=1e-4, rtol=0)
    assert converted.eos_token_ids == frozenset({2})


# ------------------------------------------------------------------------------------------ errors
@pytest.mark.skipif(not UNREADABLE, reason="this gguf version dequantizes every type")
def test_an_unsupported_type_is_refused_by_tensor_name(tmp_path: Path) -> None:
    qtype = next((q for q in UNREADABLE if gguf.GGML_QUANT_SIZES[q][0] > 1), UNREADABLE[0])
    t = tiny_llama()
    encoded = encode(gguf_tensors(t), lambda _name: Q.Q8_0)
    a = gguf_tensors(t)["blk.1.attn_v.weight"]
    shape = quants.quant_shape_to_byte_shape(a.shape, qtype)
    encoded["blk.1.attn_v.weight"] = (np.zeros(shape, np.uint8), qtype)
    path = write_gguf(tmp_path / "m.gguf", t, encoded)
    with pytest.raises(
        ValueError, match=rf"'blk\.1\.attn_v\.weight' has type {qtype.name}\b.*cannot dequantize"
    ):
        read_gguf(path)
    assert not (tmp_path / "onnx").exists()
    with pytest.raises(ValueError, match=r"blk\.1\.attn_v\.weight"):
        convert_gguf(path, tmp_path / "onnx", progress=False)
    assert not (tmp_path / "onnx").exists()


def test_a_tensor_of_the_wrong_shape_is_refused_by_name(tmp_path: Path) -> None:
    t = tiny_llama(hidden=64, intermediate=96)
    tensors = gguf_tensors(t)
    tensors["blk.0.attn_k.weight"] = tensors["blk.0.attn_q.weight"]  # 4 heads' rows where 2 belong
    path = write_gguf(tmp_path / "m.gguf", t, encode(tensors, lambda _name: Q.F32))
    with pytest.raises(ValueError, match=r"'blk\.0\.attn_k\.weight' has shape \(64, 64\).*\(32, 64\)"):
        read_gguf(path)


def test_a_missing_tensor_is_refused_by_name(tmp_path: Path) -> None:
    t = tiny_llama(hidden=64, intermediate=96)
    tensors = gguf_tensors(t)
    del tensors["blk.1.ffn_up.weight"]
    path = write_gguf(tmp_path / "m.gguf", t, encode(tensors, lambda _name: Q.F32))
    with pytest.raises(ValueError, match=r"'blk\.1\.ffn_up\.weight' is missing"):
        read_gguf(path)


@pytest.mark.parametrize(
    "key",
    [
        "llama.embedding_length",
        "llama.feed_forward_length",
        "llama.block_count",
        "llama.attention.head_count",
    ],
)
def test_missing_required_metadata_is_refused_by_key(key: str, tmp_path: Path) -> None:
    t = tiny_llama(hidden=64, intermediate=96)
    path = write_gguf(tmp_path / "m.gguf", t, encode(gguf_tensors(t), lambda _name: Q.F32), omit=[key])
    with pytest.raises(ValueError, match=rf"metadata key '{key}' is missing"):
        read_gguf(path)


def test_a_file_that_is_not_gguf_is_refused_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "not.gguf"
    path.write_bytes(b"GGML" + bytes(60))
    with pytest.raises(ValueError, match=r"not\.gguf"):
        read_gguf(path)


def _rope_scaling(w: gguf.GGUFWriter) -> None:
    w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
    w.add_rope_scaling_factor(4.0)


def _rope_freqs(w: gguf.GGUFWriter) -> None:
    w.add_tensor("rope_freqs.weight", np.ones(8, np.float32))


@pytest.mark.parametrize(
    ("more", "message"),
    [
        (_rope_scaling, "RoPE scaling 'linear' is not supported"),
        (_rope_freqs, "per-frequency RoPE factors"),
        (lambda w: w.add_expert_count(8), r"mixture-of-experts models \(8 experts\)"),
        (lambda w: w.add_rope_dimension_count(8), "rotary embeddings over 8 of 16 head dimensions"),
    ],
    ids=["rope-scaling", "rope-freqs", "experts", "partial-rotary"],
)
def test_llama_variants_the_graph_cannot_compute_are_refused(
    more: Callable[[gguf.GGUFWriter], None], message: str, tmp_path: Path
) -> None:
    t = tiny_llama(hidden=64, intermediate=96)
    path = write_gguf(tmp_path / "m.gguf", t, encode(gguf_tensors(t), lambda _name: Q.F32), more=more)
    with pytest.raises(ValueError, match=message):
        read_gguf(path)


def test_metadata_that_matches_the_graph_is_accepted(tmp_path: Path) -> None:
    def more(w: gguf.GGUFWriter) -> None:
        w.add_rope_dimension_count(16)
        w.add_rope_scaling_type(gguf.RopeScalingType.NONE)

    t = tiny_llama(hidden=64, intermediate=96)
    path = write_gguf(tmp_path / "m.gguf", t, encode(gguf_tensors(t), lambda _name: Q.F32), more=more)
    assert read_gguf(path).config.head_dim == 16
