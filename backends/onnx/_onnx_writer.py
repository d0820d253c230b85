"""Small ONNX graphs written straight to protobuf bytes (:func:`node`, :func:`model`), for the KV
block graphs the backend builds at run time: the ``onnx`` package is not imported when a model is
loaded and run (it took about 0.5 s of every start, most of it in its dtype tables; it stays the
converter's)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["FLOAT", "FLOAT16", "INT64", "model", "node", "tensor"]

FLOAT = 1
"""``TensorProto.FLOAT``."""
FLOAT16 = 10
"""``TensorProto.FLOAT16``."""
INT64 = 7
"""``TensorProto.INT64``."""

_INT_ATTRIBUTE = 2  # AttributeProto.INT


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _text(number: int, value: str) -> bytes:
    return _field(number, value.encode())


def tensor(name: str, elem_type: int) -> bytes:
    """A ``ValueInfoProto``: a tensor of ``elem_type`` and any shape."""
    tensor_type = _int(1, elem_type)  # TypeProto.Tensor.elem_type
    return _text(1, name) + _field(2, _field(1, tensor_type))


def node(op_type: str, inputs: Sequence[str], outputs: Sequence[str], **ints: int) -> bytes:
    """A ``NodeProto`` with integer attributes (``axis=0``)."""
    out = b"".join(_text(1, i) for i in inputs) + b"".join(_text(2, o) for o in outputs)
    out += _text(4, op_type)
    for key, value in ints.items():
        out += _field(5, _text(1, key) + _int(3, value) + _int(20, _INT_ATTRIBUTE))
    return out


def model(
    nodes: Sequence[bytes],
    name: str,
    inputs: Sequence[bytes],
    outputs: Sequence[bytes],
    *,
    opset: int = 17,
    ir_version: int = 10,
) -> bytes:
    """A serialized ``ModelProto`` of one graph (the default domain at ``opset``)."""
    graph = b"".join(_field(1, n) for n in nodes) + _text(2, name)
    graph += b"".join(_field(11, i) for i in inputs) + b"".join(_field(12, o) for o in outputs)
    opset_id = _text(1, "") + _int(2, opset)
    return _int(1, ir_version) + _field(7, graph) + _field(8, opset_id)
