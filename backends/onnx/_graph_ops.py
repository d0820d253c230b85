"""The operator types of an ONNX graph's nodes, read straight from the model file's protobuf wire
format: :func:`graph_ops`. (Importing the ``onnx`` package for this took about 0.5 s of every
model load, most of it in its dtype tables.)"""

from __future__ import annotations

from pathlib import Path

__all__ = ["graph_ops"]

_GRAPH = 7  # ModelProto.graph
_NODE = 1  # GraphProto.node
_OP_TYPE = 4  # NodeProto.op_type


def _varint(data: bytes | memoryview, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise ValueError("a varint longer than 64 bits")


def _fields(data: memoryview) -> list[tuple[int, memoryview]]:
    """The length-delimited fields of one message: (field number, its bytes)."""
    out: list[tuple[int, memoryview]] = []
    i, n = 0, len(data)
    while i < n:
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _varint(data, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            size, i = _varint(data, i)
            out.append((number, data[i : i + size]))
            i += size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    if i != n:
        raise ValueError("a truncated protobuf message")
    return out


def graph_ops(path: str | Path) -> frozenset[str]:
    """The ``op_type`` of every node of the main graph of the ONNX model at ``path`` (not of
    subgraphs; external weight data is not read).

    Raises:
        ValueError: the file is not an ONNX model.
    """
    data = memoryview(Path(path).read_bytes())
    try:
        graphs = [body for number, body in _fields(data) if number == _GRAPH]
        if not graphs:
            raise ValueError("no graph")
        ops: set[str] = set()
        for number, node in _fields(graphs[-1]):
            if number == _NODE:
                ops.update(bytes(v).decode() for f, v in _fields(node) if f == _OP_TYPE)
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not an ONNX model: {exc}") from None
    return frozenset(ops)
