"""The exact int4 build's float twin (``model_float.onnx``): the same data file, its ``MatMulNBits``
as float ``MatMul`` over the weights their blocks make, folded by onnxruntime when the session
opens. The batch scheduler runs several-row passes on it (onnxruntime's float-activation 4-bit
kernel dequantizes every block on each call there), so it must compute what the int4 graph
computes, and the fp32 build too: the same weights, value for value."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import reactivex
from gguf import GGMLQuantizationType as Q
from reactivex import operators as ops

from rxstream.backends import OnnxModel, build_tiny_model
from rxstream.backends.convert import convert_gguf
from rxstream.backends.onnx import BatchConfig
from rxstream.backends.onnx._config import FLOAT_MODEL_FILE, MODEL_FILE
from tests.backends.test_backend_gguf import (
    BLOCK_TYPES,
    WRITABLE,
    encode,
    gguf_tensors,
    random_blocks,
    tiny_llama,
    write_gguf,
)


def as_main(directory: Path, tmp: Path) -> OnnxModel:
    """The twin loaded as a model of its own (a copy whose model.onnx is the twin)."""
    copy = tmp / f"{directory.name}-twin"
    shutil.copytree(directory, copy)
    (copy / MODEL_FILE).unlink()
    (copy / FLOAT_MODEL_FILE).rename(copy / MODEL_FILE)
    return OnnxModel.load(copy, provider="cpu", batching=False)


@pytest.mark.parametrize("qtype", BLOCK_TYPES, ids=lambda q: q.name)
def test_the_twin_computes_the_fp32_builds_logits(qtype: Q, tmp_path: Path) -> None:
    # every block type: the twin's folded weights are gguf-py's dequantization (the fp32 build),
    # so its logits are the fp32 build's up to the summation order of the same products
    t = tiny_llama(seed=int(qtype))
    tensors = gguf_tensors(t)
    if qtype in WRITABLE:
        encoded = encode(tensors, lambda _name: qtype)
    else:
        encoded = random_blocks(tensors, qtype, int(qtype))
    path = write_gguf(tmp_path / "m.gguf", t, encoded)
    fp32 = OnnxModel.load(
        convert_gguf(path, tmp_path / "fp32", progress=False), provider="cpu", batching=False
    )
    int4_dir = convert_gguf(path, tmp_path / "int4", quantization="int4", progress=False)
    assert (int4_dir / FLOAT_MODEL_FILE).is_file()
    assert not (tmp_path / "fp32" / FLOAT_MODEL_FILE).exists()
    twin = as_main(int4_dir, tmp_path)
    ids = [[1, 5, 9, 2, 7, 3, 11, 4]]
    a, b = fp32.forward(ids)[0], twin.forward(ids)[0]
    scale = float(np.abs(a).max())
    np.testing.assert_allclose(b, a, rtol=0, atol=2e-5 * max(scale, 1.0))


def test_the_twin_is_small_on_disk_and_folds_to_float_matmuls(tmp_path: Path) -> None:
    directory = build_tiny_model(tmp_path / "int4", seed=0, attention="gqa", quantization="int4")
    assert (directory / FLOAT_MODEL_FILE).stat().st_size < (directory / MODEL_FILE).stat().st_size * 4
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    options.log_severity_level = 3
    ort.InferenceSession(str(directory / FLOAT_MODEL_FILE), options, providers=["CPUExecutionProvider"])
    ops_left = {n.op_type for n in onnx.load(str(tmp_path / "optimized.onnx")).graph.node}
    assert "MatMulNBits" not in ops_left and not {"Floor", "Div", "Concat", "Transpose"} & ops_left
    assert "MatMul" in ops_left


def test_int4_batches_run_on_the_twin_and_equal_the_rows_alone(tmp_path: Path) -> None:
    directory = build_tiny_model(tmp_path / "int4", seed=0, attention="gqa", quantization="int4")
    model = OnnxModel.load(directory, provider="cpu", batching=BatchConfig(draft_tokens=0))
    alone = OnnxModel.load(directory, provider="cpu", batching=False)
    stats = model.batch_stats()
    assert stats is not None and stats["float_graph"] is False  # opened at the first several-row pass
    prompts = [
        model.encode_chat([{"role": "user", "content": t}]) for t in ("hi", "a b c", "what is 2+2", "x")
    ]
    runs = [model.generate(p, max_new_tokens=24, ignore_eos=True).pipe(ops.to_list()) for p in prompts]
    got = reactivex.merge(*[r.pipe(ops.map(lambda ids, i=i: (i, ids))) for i, r in enumerate(runs)])
    results = dict(got.pipe(ops.to_list()).run())
    for i, prompt in enumerate(prompts):
        assert (
            results[i] == alone.generate(prompt, max_new_tokens=24, ignore_eos=True).pipe(ops.to_list()).run()
        )
    stats = model.batch_stats()
    assert stats is not None and stats["float_graph"] is True and stats["peak_rows"] > 1


def test_prepare_batches_opens_the_twin_and_other_builds_have_none(tmp_path: Path) -> None:
    int4 = OnnxModel.load(
        build_tiny_model(tmp_path / "int4", seed=0, attention="gqa", quantization="int4"), provider="cpu"
    )
    int4.prepare_batches()
    assert int4.batch_stats()["float_graph"] is True  # type: ignore[index]
    for quantization in ("fp32", "int4-a8"):
        other = OnnxModel.load(
            build_tiny_model(tmp_path / quantization, seed=0, attention="gqa", quantization=quantization),  # type: ignore[arg-type]
            provider="cpu",
        )
        other.prepare_batches()
        assert other.batch_stats()["float_graph"] is False  # type: ignore[index]
        assert not (other.directory / FLOAT_MODEL_FILE).exists()
