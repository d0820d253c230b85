"""The KV block copies: on the CPU ``memmove`` between pointers, elsewhere the ``copy`` graph; both
give exactly the bytes a numpy slice assignment gives (hypothesis over slots, heads and lengths)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rxstream.backends import OnnxModel, build_tiny_model
from rxstream.backends.onnx._kv_ops import KVOps
from rxstream.backends.onnx._kvcache import SlotCache


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> object:
    directory: Path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "gqa", seed=0, attention="gqa")
    return OnnxModel.load(directory, provider="cpu")._session


def filled(cache: SlotCache, seed: int) -> list[np.ndarray]:
    """Random contents in every buffer; the numpy views of the same memory."""
    rng = np.random.default_rng(seed)
    views = []
    for value in cache.values:
        view = value.numpy()  # a copy: fill it, then write it back through the pointer
        view[...] = rng.standard_normal(view.shape).astype(view.dtype)
        np.ctypeslib.as_array((np.ctypeslib.ctypes.c_byte * view.nbytes).from_address(value.data_ptr()))[
            ...
        ] = view.view(np.int8).reshape(-1)
        views.append(view)
    return views


@pytest.mark.parametrize("memmove", [True, False], ids=["memmove", "graph"])
@settings(max_examples=25)
@given(data=st.data())
def test_slot_copies_move_exactly_the_positions_asked(
    graph: object, memmove: bool, data: st.DataObject
) -> None:
    ops = KVOps(graph)  # type: ignore[arg-type]
    ops.memmove = memmove
    cache = SlotCache(graph, ops)  # type: ignore[arg-type]
    slots = data.draw(st.integers(2, 4))
    capacity = data.draw(st.sampled_from([64, 128]))
    cache.reserve(slots, capacity, 0)
    before = filled(cache, data.draw(st.integers(0, 2**16)))
    src, dst = data.draw(st.lists(st.integers(0, slots - 1), min_size=2, max_size=2, unique=True))
    length = data.draw(st.integers(0, capacity))
    cache.copy_slot(src, dst, length)
    for value, old in zip(cache.values, before, strict=True):
        expected = old.copy()
        expected[dst, :, :length] = old[src, :, :length]
        if 2 * length >= capacity:  # the whole slot is copied
            expected[dst] = old[src]
        assert np.array_equal(value.numpy(), expected)

    # a prefix taken out of a slot and loaded into another: the same positions again
    slot = data.draw(st.integers(0, slots - 1))
    target = data.draw(st.integers(0, slots - 1))
    held = data.draw(st.integers(1, capacity))
    now = [v.numpy() for v in cache.values]
    taken = cache.extract(slot, held)
    for out, old in zip(taken, now, strict=True):
        assert np.array_equal(out.numpy()[0], old[slot, :, :held])
    length = data.draw(st.integers(0, held))
    cache.load(taken, held, length, target)
    for value, old in zip(cache.values, now, strict=True):
        expected = old.copy()
        expected[target, :, :length] = old[slot, :, :length]
        assert np.array_equal(value.numpy(), expected)
