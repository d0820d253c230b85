"""GGUF reading and conversion: every tensor type gguf-py handles, RoPE row permutation, tokenizer, errors."""

from __future__ import annotations

import collections
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


def test_the_converter_reads_the_linear_block_types() -> None:
    from rxstream.backends.convert import _gguf

    assert set(_gguf.BLOCK_TYPES) == set(BLOCK_TYPES)


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
    """The graph's initializers by name; a fused ``{p}.gate_up`` (``[in, 2 * inter]``) is also
    given as its halves ``{p}.gate`` and ``{p}.up``."""
    model = onnx.load(str(model_dir / MODEL_FILE), load_external_data=True)
    return split_gate_up({i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}, axis=1)


def split_gate_up(arrays: dict[str, np.ndarray], axis: int) -> dict[str, np.ndarray]:
    """``arrays`` plus the halves of each float ``{p}.gate_up`` along ``axis`` (gate first)."""
    out = dict(arrays)
    for name, value in arrays.items():
        if name.endswith(".gate_up"):
            base = name.removesuffix(".gate_up")
            gate, up = np.split(value, 2, axis=axis)
            out[f"{base}.gate"], out[f"{base}.up"] = np.ascontiguousarray(gate), np.ascontiguousarray(up)
    return out


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


def _nodes(graph: onnx.GraphProto) -> Iterable[onnx.NodeProto]:
    """Every node of ``graph`` and of its subgraphs (an ``If``'s branches)."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _nodes(attr.g)


def _nbits_matrix(node: onnx.NodeProto, arrays: dict[str, np.ndarray], nodes: list[onnx.NodeProto]) -> F32:
    """The ``[N, K]`` float32 matrix one ``MatMulNBits`` node computes (in real arithmetic), read from
    the graph alone: its ``K``, ``N``, ``bits`` and ``block_size``, its packed codes, scales and zero
    points (default ``2**(bits-1)``), plus ``{prefix}.mins`` ``[blocks, N]`` per block of
    ``block_size`` where the graph adds ``block_sums(x) @ mins`` (checked: the sums are over
    ``block_size`` elements of the same input ``x``). A node whose input is ``x`` followed by its
    block sums (int4-a8's rest blocks) computes, over ``x``, its first ``K`` columns plus each rest
    column spread over its block (checked the same way)."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    k, n, bits, size = attrs["K"], attrs["N"], attrs["bits"], attrs["block_size"]
    x, qname, sname = node.input[0], node.input[1], node.input[2]
    blocks, per, mask = -(-k // size), 8 // bits, np.uint8((1 << bits) - 1)
    packed = arrays[qname].reshape(n, blocks, size // per)
    codes = np.stack([(packed >> np.uint8(bits * j)) & mask for j in range(per)], axis=-1)
    codes = codes.reshape(n, blocks, size).astype(np.int32)
    if len(node.input) > 3 and node.input[3]:
        zp_packed = arrays[node.input[3]]
        zp = np.stack([(zp_packed >> np.uint8(bits * j)) & mask for j in range(per)], axis=-1)
        zp = zp.reshape(n, -1)[:, :blocks].astype(np.int32)
    else:
        zp = np.full((n, blocks), 1 << (bits - 1), np.int32)
    scales = arrays[sname].reshape(n, blocks)
    w = (codes - zp[..., None]).astype(np.float32) * scales[..., None]
    w = np.asarray(w, np.float32).reshape(n, blocks * size)[:, :k]
    producer = {out: m for m in nodes for out in m.output}

    def block_sums_of(sums: str, of: str, width: int) -> None:
        reshape = producer[producer[sums].input[0]]
        assert reshape.op_type == "Reshape" and reshape.input[0] == of, qname
        assert list(arrays[reshape.input[1]])[-2:] == [width // size, size], qname

    concat = producer.get(x)
    if concat is not None and concat.op_type == "Concat":  # x, then its block sums
        x, sums = concat.input
        width = k * size // (size + 1)
        block_sums_of(sums, x, width)
        w = w[:, :width] + np.repeat(w[:, width : width + width // size], size, axis=1)
        k = width
    prefix = qname.removesuffix(".q8").removesuffix(".q")
    if f"{prefix}.mins" in arrays:
        (mm,) = [m for m in nodes if m.op_type == "MatMul" and m.input[1] == f"{prefix}.mins"]
        block_sums_of(mm.input[0], x, k)
        w = w + np.repeat(arrays[f"{prefix}.mins"].T, size, axis=1)[:, :k]
    return np.asarray(w, np.float32)


def int4_matrices(model_dir: Path) -> dict[str, F32]:
    """The ``[out, in]`` matrices of the linear layers and the head of ``model.onnx`` (int4 build):
    float ``MatMul`` weights transposed, ``MatMulNBits`` nodes decoded by :func:`_nbits_matrix`,
    segments ``{name}.s0``, ``{name}.s1``, ... stacked by rows."""
    model = onnx.load(str(model_dir / MODEL_FILE), load_external_data=True)
    arrays = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    nodes = list(_nodes(model.graph))
    by_prefix: dict[str, F32] = {}
    for node in nodes:
        if node.op_type == "MatMulNBits":
            prefix = node.input[1].removesuffix(".q8").removesuffix(".q")
            by_prefix[prefix] = _nbits_matrix(node, arrays, nodes)
        elif node.op_type == "MatMul" and node.input[1] in arrays and not node.input[1].endswith(".mins"):
            by_prefix[node.input[1]] = np.ascontiguousarray(arrays[node.input[1]].T)
    return stack_segments(by_prefix)


def stack_segments(by_prefix: dict[str, F32]) -> dict[str, F32]:
    """``[out, in]`` arrays by weight name: segments ``{name}.s0``, ``{name}.s1``, ... stacked by
    rows, each ``{p}.gate_up`` also as its halves ``{p}.gate`` and ``{p}.up``."""
    out: dict[str, F32] = {}
    for prefix, w in sorted(by_prefix.items()):
        base, _, seg = prefix.rpartition(".s")
        if base and seg.isdigit():
            assert int(seg) == 0 or f"{base}.s{int(seg) - 1}" in by_prefix
            out[base] = np.concatenate([out[base], w]) if base in out else w
        else:
            out[prefix] = w
    return split_gate_up(out, axis=0)


def assert_same_values(got: np.ndarray, expected: np.ndarray, what: str) -> None:
    """Bit for bit, except that +0.0 and -0.0 count as equal."""
    assert_same_bits(got + np.float32(0), expected + np.float32(0), what)


LINEAR_NAMES = ("qkv", "o", "gate", "up", "down")


def assert_int4_is_the_fp32_build(int4_dir: Path, fp32_dir: Path, config: DecoderConfig) -> dict[str, F32]:
    """Every int4 matrix (and a ``MatMulNBits`` head) decodes to the fp32 build's weights bit for bit;
    returns the int4 matrices."""
    fp32, int4 = onnx_weights(fp32_dir), int4_matrices(int4_dir)
    names = [f"layers.{i}.{n}" for i in range(config.num_layers) for n in LINEAR_NAMES]
    for name in names:
        assert_same_values(int4[name], np.ascontiguousarray(fp32[name].T), name)
    head = fp32["lm_head"].T if "lm_head" in fp32 else fp32["embed_tokens"]
    if "lm_head" in fp32 or "lm_head" in int4:
        assert_same_values(int4["lm_head"], np.ascontiguousarray(head), "lm_head")
    assert_same_bits(onnx_weights(int4_dir)["embed_tokens"], fp32["embed_tokens"], "embed_tokens")
    return int4


def assert_logits_agree(a: np.ndarray, b: np.ndarray) -> None:
    """Same weights, different summation order: logits within float rounding of the fp32 build's."""
    scale = float(np.abs(a).max())
    np.testing.assert_allclose(b, a, atol=1e-4 * max(scale, 1.0), rtol=0)


BLOCK_TYPES = [Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K]
"""GGUF types linear in their codes per block (``w = scale * (code - zero) [+ min]``)."""
NARROW = {Q.Q4_0, Q.Q4_1, Q.Q2_K, Q.Q3_K, Q.Q4_K}
"""Block types of at most 4 bits: ``MatMulNBits`` in the int4 build (the others stay float)."""


@pytest.mark.parametrize("qtype", BLOCK_TYPES, ids=lambda q: q.name)
@pytest.mark.parametrize("untied", [False, True], ids=["tied", "untied"])
def test_int4_keeps_the_gguf_blocks_exactly(qtype: Q, untied: bool, tmp_path: Path) -> None:
    # blocks of at most 4 bits go into MatMulNBits as they are, wider ones stay float: either way the
    # int4 weights are gguf-py's own dequantized values, the fp32 build's
    t = tiny_llama(untied=untied, seed=int(qtype))
    tensors = gguf_tensors(t)
    if qtype in WRITABLE:
        encoded = encode(tensors, lambda _name: qtype)
    else:  # the K-quants: gguf-py cannot quantize them, so the blocks are random bytes
        encoded = random_blocks(tensors, qtype, seed=int(qtype))
    path = write_gguf(tmp_path / "m.gguf", t, encoded)
    assert {r.tensor_type for r in gguf.GGUFReader(str(path)).tensors if len(r.shape) == 2} == {qtype}
    fp32_dir = convert_gguf(path, tmp_path / "fp32", progress=False)
    int4_dir = convert_gguf(path, tmp_path / "int4", quantization="int4", progress=False)
    assert_converted_weights_are_the_dequantized_tensors(path, fp32_dir, t)
    assert_int4_is_the_fp32_build(int4_dir, fp32_dir, t.config)
    graph = onnx.load(str(int4_dir / MODEL_FILE), load_external_data=False).graph
    ops_used = collections.Counter(node.op_type for node in _nodes(graph))
    linears = t.config.num_layers * len(LINEAR_NAMES) + int(untied or qtype in NARROW)
    assert ops_used["MatMulNBits"] == (linears if qtype in NARROW else 0)
    assert ("If" in ops_used) == (not untied and qtype in NARROW)  # a tied 4-bit head
    ids = [[1, 5, 9, 2, 7, 3, 11, 4]]
    fp32_model, int4_model = OnnxModel.load(fp32_dir), OnnxModel.load(int4_dir)
    assert_logits_agree(fp32_model.forward(ids)[0], int4_model.forward(ids)[0])
    # single-token steps after the prompt (the tied head's MatMulNBits branch)
    a = greedy_steps(fp32_model, ids[0], 3)
    b = greedy_steps(int4_model, ids[0], 3, follow=a[0])
    for x, y in zip(a[1], b[1], strict=True):
        assert_logits_agree(x, y)


def greedy_steps(
    model: OnnxModel, prompt: list[int], n: int, follow: list[int] | None = None
) -> tuple[list[int], list[np.ndarray]]:
    """The prompt, then ``n`` single-token steps on the KV cache (the tokens of ``follow`` if given,
    else greedy): the tokens fed and each step's last logits (the prompt's first)."""
    logits, past = model.forward([prompt])
    outs = [logits[0, -1]]
    tokens: list[int] = []
    for j in range(n):
        tok = follow[j] if follow is not None else int(outs[-1].argmax())
        tokens.append(tok)
        logits, past = model.forward([[tok]], past=past)
        assert logits.shape[:2] == (1, 1)
        outs.append(logits[0, -1])
    return tokens, outs


def test_int4_quantizes_anew_what_has_no_linear_block_form(tmp_path: Path) -> None:
    # F16 matrices (and IQ types, ...) are quantized to 4 bits (lossy). Q/K/V of different kinds become
    # exact segments (layer 0: Q4_K rows in blocks of 32 with mins, Q3_K rows in blocks of 16 with
    # zero point 4, Q6_K rows as floats); Q4_0 and Q4_1 rows (layer 1) share one MatMulNBits
    # (per-block zero points, zero mins for the Q4_0 rows)
    t = tiny_llama(seed=3)
    tensors = gguf_tensors(t)
    kinds = {
        "blk.0.attn_q": Q.Q4_K,
        "blk.0.attn_k": Q.Q3_K,
        "blk.0.attn_v": Q.Q6_K,
        "blk.1.attn_q": Q.Q4_0,
        "ffn_down": Q.F16,
    }

    def kind(name: str) -> Q:
        return next((q for key, q in kinds.items() if name.startswith(key) or key in name), Q.Q4_1)

    encoded = encode(tensors, lambda name: kind(name) if kind(name) in WRITABLE else Q.Q4_1)
    for name in tensors:
        if kind(name) not in WRITABLE:
            encoded[name] = random_blocks({name: tensors[name]}, kind(name), seed=len(name))[name]
    path = write_gguf(tmp_path / "m.gguf", t, encoded)
    int4_dir = convert_gguf(path, tmp_path / "int4", quantization="int4", progress=False)
    fp32_dir = convert_gguf(path, tmp_path / "fp32", progress=False)
    int4, fp32 = int4_matrices(int4_dir), onnx_weights(fp32_dir)
    arrays = onnx_weights(int4_dir)
    for i in range(t.config.num_layers):
        p = f"layers.{i}"
        down = f"{p}.down"  # symmetric, no zero points or mins: not the fp32 weights
        assert f"{down}.q" in arrays and f"{down}.zp" not in arrays and f"{down}.mins" not in arrays
        assert not np.array_equal(int4[down], fp32[down].T), down
        assert np.abs(int4[down] - fp32[down].T).max() < 0.1 * np.abs(fp32[down]).max()
        for name in (f"{p}.qkv", f"{p}.o", f"{p}.gate", f"{p}.up"):
            assert_same_values(int4[name], np.ascontiguousarray(fp32[name].T), name)
    assert {"layers.0.qkv.s0.mins", "layers.0.qkv.s1.zp", "layers.0.qkv.s2"} <= set(arrays)
    assert "layers.0.qkv.s1.mins" not in arrays and not any(k.startswith("layers.0.qkv.s3") for k in arrays)
    assert arrays["layers.0.qkv.s0.q"].shape[2] == 16 and arrays["layers.0.qkv.s1.q"].shape[2] == 8
    assert {"layers.1.qkv.q", "layers.1.qkv.zp", "layers.1.qkv.mins"} <= set(arrays)  # one segment
    zp = arrays["layers.1.qkv.zp"]
    q_rows = t.config.num_heads * t.config.head_dim
    assert (zp[:q_rows] == 0x88).all() and (zp[q_rows:] == 0).all()  # Q4_0 rows 8, Q4_1 rows 0
    assert (arrays["layers.1.qkv.mins"][:, :q_rows] == 0).all()
    assert_generates(int4_dir)


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


def test_gate_and_up_are_one_product_in_int4_a8(tmp_path: Path) -> None:
    # int4-a8 multiplies by gate and up at once (one matrix, split after); fp32 and int4 keep two
    t = tiny_llama(seed=3)
    path = write_gguf(tmp_path / "m.gguf", t, encode(gguf_tensors(t), lambda _name: Q.Q4_1))
    for quant, fused in (("fp32", False), ("int4-a8", True), ("int4", False)):
        directory = convert_gguf(path, tmp_path / quant, quantization=quant, progress=False)
        model = onnx.load(str(directory / MODEL_FILE), load_external_data=False)
        names = {i.name.removesuffix(".q") for i in model.graph.initializer}
        splits = [n for n in _nodes(model.graph) if n.op_type == "Split"]
        assert ("layers.0.gate_up" in names) is fused and ("layers.0.gate" in names) is not fused, quant
        assert len(splits) == (t.config.num_layers if fused else 0), quant
        assert_generates(directory)
