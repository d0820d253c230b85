"""The ``int4-a8`` build of a GGUF: the GGUF's own codes, scales and zero points (value for value
in real arithmetic) as ``MatMulNBits`` with 8-bit activations (``accuracy_level`` 4), every linear
block type included; the rests of centred mins rounded to the codes' width as extra blocks."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import onnx
import pytest
from gguf import GGMLQuantizationType as Q

from rxstream.backends import OnnxModel
from rxstream.backends.convert import convert_gguf
from rxstream.backends.convert._export import MODEL_FILE
from rxstream.backends.convert._graph import A8_LEVEL, NBITS_HEAD_ROWS_A8
from tests.backends.test_backend_gguf import (
    BLOCK_TYPES,
    F32,
    LINEAR_NAMES,
    WRITABLE,
    _nodes,
    assert_generates,
    encode,
    gguf_tensors,
    greedy_steps,
    int4_matrices,
    onnx_weights,
    random_blocks,
    stack_segments,
    tiny_llama,
    write_gguf,
)


def correlation(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(np.ravel(a), np.ravel(b))[0, 1])


def mins_half_steps(model_dir: Path) -> dict[str, F32]:
    """For each weight of ``model.onnx``'s linears (named as ``int4_matrices`` names them): half the
    step of the codes its block's rest of the min was rounded to (the scale of the rest block
    holding it; 0 where the node has no rest blocks)."""
    model = onnx.load(str(model_dir / MODEL_FILE), load_external_data=True)
    arrays = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    by_prefix: dict[str, F32] = {}
    concats = {out for m in _nodes(model.graph) if m.op_type == "Concat" for out in m.output}
    for node in _nodes(model.graph):
        if node.op_type != "MatMulNBits":
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        k, n, size = attrs["K"], attrs["N"], attrs["block_size"]
        prefix = node.input[1].removesuffix(".q8").removesuffix(".q")
        scales = arrays[node.input[2]].reshape(n, -1)
        width = k * size // (size + 1) if node.input[0] in concats else k
        half = np.zeros((n, width // size), np.float32)
        if width != k:  # rest blocks after the weights' blocks, size rests each
            half = np.repeat(scales[:, width // size :], size, axis=1)[:, : width // size] / 2
        by_prefix[prefix] = np.repeat(half, size, axis=1)
    return stack_segments(by_prefix)


@pytest.mark.parametrize("qtype", BLOCK_TYPES, ids=lambda q: q.name)
@pytest.mark.parametrize("untied", [False, True], ids=["tied", "untied"])
def test_int4_a8_keeps_the_gguf_weights_and_rounds_only_activations(
    qtype: Q, untied: bool, tmp_path: Path
) -> None:
    # every linear block type becomes MatMulNBits at accuracy level 4 (4-bit codes for blocks of at
    # most 4 bits, 8-bit codes for wider ones); the matrices they compute are the fp32 build's
    # weights up to float rounding of the centred zero points (s * (c - z) + (m + s * z)) and the
    # 8-bit rounding of each block's rest m + s * z: a whole block moves by at most half its step
    t = tiny_llama(untied=untied, seed=int(qtype))
    tensors = gguf_tensors(t)
    if qtype in WRITABLE:
        encoded = encode(tensors, lambda _name: qtype)
    else:
        encoded = random_blocks(tensors, qtype, seed=int(qtype))
    path = write_gguf(tmp_path / "m.gguf", t, encoded)
    fp32_dir = convert_gguf(path, tmp_path / "fp32", progress=False)
    a8_dir = convert_gguf(path, tmp_path / "a8", quantization="int4-a8", progress=False)
    fp32, a8, half = onnx_weights(fp32_dir), int4_matrices(a8_dir), mins_half_steps(a8_dir)
    names = [f"layers.{i}.{n}" for i in range(t.config.num_layers) for n in LINEAR_NAMES]
    rounded = 0
    for name in [*names, "lm_head"]:
        expected = fp32["lm_head"].T if "lm_head" in fp32 else fp32["embed_tokens"]
        expected = expected if name == "lm_head" else fp32[name].T
        scale = float(np.abs(expected).max())
        moved = np.abs(a8[name] - expected)
        assert (moved <= half[name] * 1.0001 + 2e-6 * scale).all(), name
        block = moved.reshape(moved.shape[0], -1, 16)  # a block's weights move together
        assert (block.max(-1) - block.min(-1) <= 4e-6 * scale).all(), name
        rounded += int((half[name] > 0).any())
    assert rounded > 0 if qtype.name in ("Q4_1", "Q5_1", "Q2_K", "Q4_K", "Q5_K") else rounded == 0
    graph = onnx.load(str(a8_dir / MODEL_FILE), load_external_data=False).graph
    nodes = [n for n in _nodes(graph) if n.op_type == "MatMulNBits"]
    attrs = [{a.name: onnx.helper.get_attribute_value(a) for a in n.attribute} for n in nodes]
    assert len(nodes) == len(names) - t.config.num_layers + 1  # the linears (gate and up: one) and the head
    assert {a["accuracy_level"] for a in attrs} == {A8_LEVEL}
    assert {a["bits"] for a in attrs} == {4 if qtype.name in ("Q4_0", "Q4_1", "Q2_K", "Q3_K", "Q4_K") else 8}
    producers = {out: m.op_type for m in _nodes(graph) for out in m.output}
    fed = [producers.get(n.input[0]) == "Concat" for n in nodes]  # x and its block sums: the mins
    assert sum(fed) >= len(nodes) - 1 if rounded else not any(fed)
    assert not any(n.op_type == "MatMul" and n.input[1].endswith(".mins") for n in _nodes(graph))
    assert not any(n.op_type == "MatMul" and n.input[1] in fp32 for n in _nodes(graph))  # no float weights
    # the model computes what the fp32 build does, with 8-bit activations' error only (random
    # K-quant blocks have scales over the whole fp16 range: logits of 1e4, a looser bound)
    bound = 0.99 if qtype in WRITABLE else 0.9
    ids = [[1, 5, 9, 2, 7, 3, 11, 4]]
    fp32_model, a8_model = OnnxModel.load(fp32_dir), OnnxModel.load(a8_dir)
    assert correlation(fp32_model.forward(ids)[0], a8_model.forward(ids)[0]) > bound
    a = greedy_steps(fp32_model, ids[0], 3)
    b = greedy_steps(a8_model, ids[0], 3, follow=a[0])
    for x, y in zip(a[1], b[1], strict=True):
        assert correlation(x, y) > bound


def test_centred_zero_points_keep_only_the_rest_of_the_mins(tmp_path: Path) -> None:
    # Q4_1 blocks (w = s * c + m): the zero point is the code nearest -m / s and the mins term keeps
    # m + s * z, at most half a step; the exact int4 build has zero point 0 and the whole min
    t = tiny_llama(seed=5)
    path = write_gguf(tmp_path / "m.gguf", t, encode(gguf_tensors(t), lambda _name: Q.Q4_1))
    int4 = onnx_weights(convert_gguf(path, tmp_path / "int4", quantization="int4", progress=False))
    a8 = onnx_weights(convert_gguf(path, tmp_path / "a8", quantization="int4-a8", progress=False))
    name = "layers.0.o"
    zp = a8[f"{name}.zp"]
    low, high = zp & 0x0F, zp >> 4
    assert (int4[f"{name}.zp"] == 0).all() and (low > 0).any() and (high > 0).any()
    n = a8[f"{name}.q"].shape[0]
    blocks = int4[f"{name}.q"].shape[1]
    z = np.stack([low, high], axis=-1).reshape(n, -1)[:, :blocks].astype(np.float32)
    scales = a8[f"{name}.scales"].reshape(n, -1)[:, :blocks]
    mins = int4[f"{name}.mins"].T  # [n, blocks]
    rest = mins + scales * z
    assert (np.abs(rest) <= np.abs(scales) * 0.5 + 1e-6).mean() > 0.99
    # the rests, as one more block of 4-bit codes after the blocks of the weights (one scale
    # and zero point: 0 exactly, so the end of the block past the last rest adds nothing)
    q = a8[f"{name}.q"]
    rest_codes = np.stack([q[:, blocks] & 0x0F, q[:, blocks] >> 4], axis=-1).reshape(n, -1)
    all_zp = np.stack([low, high], axis=-1).reshape(n, -1)
    assert q.shape[1] == blocks + 1 and f"{name}.mins" not in a8
    step = a8[f"{name}.scales"].reshape(n, -1)[:, blocks]
    decoded = (rest_codes.astype(np.float32) - all_zp[:, blocks, None]) * step[:, None]
    assert (np.abs(decoded[:, :blocks] - rest) <= step[:, None] / 2 * 1.0001).all()
    assert (decoded[:, blocks:] == 0).all()
    assert_generates(tmp_path / "a8")


def test_the_a8_head_serves_up_to_its_row_bound(tmp_path: Path) -> None:
    # a tied head as 8-bit-activation MatMulNBits for steps of at most NBITS_HEAD_ROWS_A8 rows, the
    # float MatMul for longer ones: both give the same greedy tokens as the fp32 build
    t = tiny_llama(seed=2)
    path = write_gguf(tmp_path / "m.gguf", t, encode(gguf_tensors(t), lambda _name: Q.Q8_0))
    fp32 = OnnxModel.load(convert_gguf(path, tmp_path / "fp32", progress=False))
    a8 = OnnxModel.load(convert_gguf(path, tmp_path / "a8", quantization="int4-a8", progress=False))
    for rows in (NBITS_HEAD_ROWS_A8, NBITS_HEAD_ROWS_A8 + 1):
        ids = [[(7 * j + 3) % t.config.vocab_size for j in range(rows)]]
        x, y = fp32.forward(ids)[0], a8.forward(ids)[0]
        assert x.shape == y.shape
        assert correlation(x, y) > 0.99
        agree = collections.Counter(bool(v) for v in (x[0].argmax(-1) == y[0].argmax(-1)))
        assert agree[True] >= 0.8 * rows
