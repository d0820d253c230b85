"""The backend reads a graph's op types and writes its KV graphs without the ``onnx`` package:
both agree with ``onnx`` itself, and loading and running a model never imports it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from rxstream.backends.onnx import _onnx_writer as w
from rxstream.backends.onnx._graph_ops import graph_ops


def test_op_types_equal_onnx_s(tiny_dir: Path) -> None:
    for path in sorted(tiny_dir.glob("*.onnx")):
        want = frozenset(n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node)
        assert graph_ops(path) == want and want


def test_not_an_onnx_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.onnx"
    bad.write_bytes(b"\xff\xff\xff")
    with pytest.raises(ValueError, match="is not an ONNX model"):
        graph_ops(bad)


def test_the_writer_equals_onnx_helper() -> None:
    mine = w.model(
        [w.node("Gather", ["x0", "rows"], ["g0"], axis=0), w.node("Identity", ["g0"], ["y0"])],
        "kv_t",
        [w.tensor("x0", w.FLOAT16), w.tensor("rows", w.INT64)],
        [w.tensor("y0", w.FLOAT16)],
    )
    ref = helper.make_model(
        helper.make_graph(
            [
                helper.make_node("Gather", ["x0", "rows"], ["g0"], axis=0),
                helper.make_node("Identity", ["g0"], ["y0"]),
            ],
            "kv_t",
            [
                helper.make_tensor_value_info("x0", TensorProto.FLOAT16, None),
                helper.make_tensor_value_info("rows", TensorProto.INT64, None),
            ],
            [helper.make_tensor_value_info("y0", TensorProto.FLOAT16, None)],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=10,
    )
    assert onnx.load_from_string(mine) == ref


def test_loading_and_generating_never_imports_onnx(tiny_dir: Path) -> None:
    code = (
        "import sys\n"
        "from rxstream.backends import OnnxModel\n"
        "from reactivex import operators as ops\n"
        f"m = OnnxModel.load({str(tiny_dir)!r}, provider='cpu')\n"
        "chat = [{'role': 'user', 'content': 'hi'}]\n"
        "runs = [m.generate(m.encode_chat(chat), max_new_tokens=4) for _ in 'ab']\n"
        "for r in runs: r.pipe(ops.to_list()).run()\n"
        "print('onnx' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "False"
