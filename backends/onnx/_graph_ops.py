"""The operator types of an ONNX graph's nodes (:func:`graph_ops`) and the ``accuracy_level`` of
its ``MatMulNBits`` nodes (:func:`nbits_accuracy_levels`), read straight from the model file's
protobuf wire format. (Importing the ``onnx`` package for this took about 0.5 s of every model
load, most of it in its dtype tables.)"""

from __future__ import annotations

from pathlib import Path

__all__ = ["graph_ops", "nbits_accuracy_levels"]

_GRAPH = 7  # ModelProto.graph
_NODE = 1  # GraphProto.node
_OP_TYPE = 4  # NodeProto.op_type
_ATTRIBUTE = 5  # NodeProto.attribute
_ATTR_NAME = 1  # AttributeProto.name
_ATTR_INT = 3  # AttributeProto.i


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


def _fields(data: memoryview, ints: dict[int, int] | None = None) -> list[tuple[int, memoryview]]:
    """The length-delimited fields of one message: (field number, its bytes); its varint fields
    go into ``ints`` when given (field number -> the last value)."""
    out: list[tuple[int, memoryview]] = []
    i, n = 0, len(data)
    while i < n:
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            if ints is not None:
                ints[number] = value
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


def _nodes(path: str | Path) -> list[memoryview]:
    """The nodes of the main graph of the ONNX model at ``path`` (external data is not read)."""
    data = memoryview(Path(path).read_bytes())
    try:
        graphs = [body for number, body in _fields(data) if number == _GRAPH]
        if not graphs:
            raise ValueError("no graph")
        return [node for number, node in _fields(graphs[-1]) if number == _NODE]
    except (ValueError, IndexError) as exc:
        raise ValueError(f"{path} is not an ONNX model: {exc}") from None


def graph_ops(path: str | Path) -> frozenset[str]:
    """The ``op_type`` of every node of the main graph of the ONNX model at ``path`` (not of
    subgraphs; external weight data is not read).

    Raises:
        ValueError: the file is not an ONNX model.
    """
    ops: set[str] = set()
    try:
        for node in _nodes(path):
            ops.update(bytes(v).decode() for f, v in _fields(node) if f == _OP_TYPE)
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not an ONNX model: {exc}") from None
    return frozenset(ops)


def nbits_accuracy_levels(path: str | Path) -> frozenset[int]:
    """The ``accuracy_level`` of every ``MatMulNBits`` node of the main graph (0 where it is not
    set); empty without such nodes. Level 4 rounds the activations to 8 bits.

    Raises:
        ValueError: the file is not an ONNX model.
    """
    levels: set[int] = set()
    try:
        for node in _nodes(path):
            fields = _fields(node)
            if not any(f == _OP_TYPE and bytes(v) == b"MatMulNBits" for f, v in fields):
                continue
            level = 0
            for f, attribute in fields:
                if f != _ATTRIBUTE:
                    continue
                ints: dict[int, int] = {}
                parts = _fields(attribute, ints)
                if any(n == _ATTR_NAME and bytes(v) == b"accuracy_level" for n, v in parts):
                    level = ints.get(_ATTR_INT, 0)
            levels.add(level)
    except (ValueError, IndexError) as exc:
        raise ValueError(f"{path} is not an ONNX model: {exc}") from None
    return frozenset(levels)
