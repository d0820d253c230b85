"""The batch's prefix store (backends/onnx/_prefix_store.py): bounded, least recently used out, no
entry that another extends, and the longest shared prefix found."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rxstream.backends.onnx._prefix_store import PrefixStore, common_prefix

sequences = st.lists(st.integers(0, 3), min_size=0, max_size=12).map(tuple)


def brute_common(a: tuple[int, ...], b: tuple[int, ...], limit: int) -> int:
    n = 0
    while n < min(len(a), len(b), limit) and a[n] == b[n]:
        n += 1
    return n


@given(a=sequences, b=sequences, limit=st.integers(0, 14))
def test_common_prefix_is_the_shared_leading_run(a: tuple[int, ...], b: tuple[int, ...], limit: int) -> None:
    assert common_prefix(a, b, limit) == brute_common(a, b, limit)


@settings(max_examples=300)
@given(
    adds=st.lists(sequences, max_size=30),
    budget_positions=st.integers(0, 40),
    queries=st.lists(sequences, max_size=5),
)
def test_the_store_stays_within_its_budget_and_finds_the_longest_prefix(
    adds: list[tuple[int, ...]], budget_positions: int, queries: list[tuple[int, ...]]
) -> None:
    per_position = 8
    store = PrefixStore(budget_positions * per_position, per_position, min_length=2)
    made: list[tuple[int, ...]] = []
    for tokens in adds:

        def values(tokens: tuple[int, ...] = tokens) -> list[Any]:
            made.append(tokens)
            return []

        kept = store.add(tokens, values)
        keys = list(store._entries)
        # within budget, bytes accounted exactly
        assert store.nbytes == sum(len(k) for k in keys) * per_position <= store.budget
        # no entry is a prefix of another (the longer one serves both)
        assert not any(a != b and b[: len(a)] == a for a in keys for b in keys)
        if len(tokens) < 2 or len(tokens) > budget_positions:
            assert not kept
        else:  # held now, alone or inside a longer entry, and the most recently used
            assert kept and any(k[: len(tokens)] == tokens for k in keys)
            assert keys[-1][: len(tokens)] == tokens
    assert len(made) <= len(adds)  # a copy is made only for what is kept
    for query in queries:
        limit = max(len(query) - 1, 0)
        key, length = store.best(query, limit)
        want = max((brute_common(query, k, limit) for k in store._entries), default=0)
        assert length == want
        assert (key is None) == (want == 0)


def test_least_recently_used_goes_first() -> None:
    store = PrefixStore(budget=10, position_bytes=1, min_length=1)
    a, b, c = (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)
    store.add(a, list)
    store.add(b, list)
    store.take(a, 3)  # a is used: b is now the oldest
    store.add(c, list)
    assert list(store._entries) == [a, c]
    assert store.hits == 1 and store.hit_tokens == 3
