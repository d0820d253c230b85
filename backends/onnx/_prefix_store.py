"""The batch's prefix store: KV positions of rows that ended, kept for the prompts that follow.

A chat's next turn sends the whole conversation again: the previous prompt, the answer, the new
message. When a row of the batch ends, the :class:`PrefixStore` keeps a copy of the KV positions
it holds (its prompt and the answer tokens fed back), keyed by those token ids; a later prompt
that begins with them copies them into its slot and reads only the rest. The store is bounded in
bytes and drops the least recently used entry first; an entry that another one extends is
dropped (the longer one serves both).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

import onnxruntime as ort

__all__ = ["PrefixStore", "common_prefix"]


def common_prefix(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    """How many leading ids ``a`` and ``b`` share, at most ``limit``."""
    length = 0
    for x, y in zip(a, b, strict=False):
        if length >= limit or x != y:
            break
        length += 1
    return length


class PrefixStore:
    """Token-id prefixes and their KV buffers, least recently used first out, within ``budget``
    bytes (``position_bytes`` per position). Used by the batch's worker thread only."""

    def __init__(self, budget: int, position_bytes: int, min_length: int) -> None:
        self.budget = budget
        self.position_bytes = max(position_bytes, 1)
        self.min_length = min_length
        self._entries: OrderedDict[tuple[int, ...], list[ort.OrtValue]] = OrderedDict()
        self.nbytes = 0
        self.hits = 0
        self.hit_tokens = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def tokens(self) -> int:
        """Positions held, all entries together."""
        return sum(len(k) for k in self._entries)

    def add(self, tokens: tuple[int, ...], values: Callable[[], list[ort.OrtValue]]) -> bool:
        """Keep ``tokens``' KV positions (``values()`` makes the copy, only when it is kept).
        Returns whether the store holds them now."""
        size = len(tokens) * self.position_bytes
        if len(tokens) < self.min_length or size > self.budget:
            return False
        for key in self._entries:
            if key[: len(tokens)] == tokens:  # already held, maybe as part of a longer entry
                self._entries.move_to_end(key)
                return True
        for key in [k for k in self._entries if tokens[: len(k)] == k]:  # the new one extends them
            self._drop(key)
        while self._entries and self.nbytes + size > self.budget:
            self._drop(next(iter(self._entries)))
        self._entries[tokens] = values()
        self.nbytes += size
        return True

    def best(self, prompt: Sequence[int], limit: int) -> tuple[tuple[int, ...] | None, int]:
        """The entry sharing the longest prefix with ``prompt`` (at most ``limit`` ids) and that
        length; ``(None, 0)`` when none shares any."""
        best: tuple[int, ...] | None = None
        length = 0
        for key in self._entries:
            n = common_prefix(prompt, key, limit)
            if n > length:
                best, length = key, n
        return best, length

    def take(self, key: tuple[int, ...], length: int) -> list[ort.OrtValue]:
        """The buffers of ``key`` (marked as used now), to copy ``length`` positions from."""
        self._entries.move_to_end(key)
        self.hits += 1
        self.hit_tokens += length
        return self._entries[key]

    def clear(self) -> None:
        self._entries.clear()
        self.nbytes = 0

    def _drop(self, key: tuple[int, ...]) -> None:
        del self._entries[key]
        self.nbytes -= len(key) * self.position_bytes
