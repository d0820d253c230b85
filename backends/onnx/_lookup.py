"""Prompt lookup: draft tokens for speculative decoding from the generation's own context.

A model often writes again what it has read or written already (a summary quotes its source, an
edit repeats the text around the change, code repeats names). :class:`PromptLookup` keeps an index
of the n-grams of a row's ids (prompt, then each id it emits) and, when the last ``n`` ids occurred
before, proposes the ids that followed them then as a draft. The scheduler feeds the last id and
the draft through the model in one pass and keeps the draft's ids only as long as the row's own
sampler picks them from the logits of that pass (see :mod:`._scheduler`): what is emitted is
exactly what plain decoding emits, and a draft that misses costs one wider pass.

Drafting is bounded and backs off: at most ``max_draft`` ids, matches of at least
:data:`MIN_MATCH` ids (the longest of up to :data:`MAX_MATCH` wins, the latest occurrence first),
and after a draft of which no id was kept the row drafts again only after 1, 2, 4, ... up to
:data:`MAX_BACKOFF` steps, so text that does not repeat itself pays a wider pass rarely.
:attr:`PromptLookup.expected` (ids kept per draft, a moving average) lets the scheduler skip drafts
that would not pay for their wider pass on a model where one costs much more than a plain step.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["MAX_BACKOFF", "MAX_MATCH", "MIN_MATCH", "PromptLookup"]

MIN_MATCH = 3
"""The shortest run of ids at the end of the context that may be looked up."""
MAX_MATCH = 5
"""The longest run tried first."""
MAX_BACKOFF = 32
"""Steps without a draft, at most, after drafts of which nothing was kept."""
EXPECTED_WEIGHT = 0.3
"""The weight of the newest draft in :attr:`PromptLookup.expected`."""
MAX_INDEXED = 1 << 16
"""Ids indexed at most per row (a longer context keeps its first ones indexed)."""


class PromptLookup:
    """The n-gram index of one row's ids and its drafting state (see the module documentation)."""

    __slots__ = ("_backoff", "_ids", "_index", "_wait", "accepted", "drafted", "expected", "max_draft")

    def __init__(self, prompt: Sequence[int], max_draft: int) -> None:
        if max_draft < 1:
            raise ValueError(f"PromptLookup: max_draft must be at least 1, got {max_draft}")
        self.max_draft = max_draft
        self._ids: list[int] = []
        self._index: dict[tuple[int, ...], int] = {}
        """n-gram -> the position just after its latest occurrence (before the context's end)."""
        self._wait = 0
        self._backoff = 0
        self.drafted = 0
        """Draft ids proposed so far (statistics)."""
        self.accepted = 0
        """Draft ids kept so far."""
        self.expected = float(max_draft)
        """Draft ids kept per draft, a moving average (optimistic at first)."""
        self.extend(prompt)

    def extend(self, ids: Sequence[int]) -> None:
        """Append ``ids`` to the context."""
        for token in ids:
            self.append(token)

    def append(self, token: int) -> None:
        """Append one id: index the n-grams that end just before it (so a lookup never finds
        the context's own end)."""
        ids = self._ids
        end = len(ids)
        if end < MAX_INDEXED:
            for n in range(MIN_MATCH, MAX_MATCH + 1):
                if end >= n:
                    self._index[tuple(ids[end - n : end])] = end
        ids.append(token)

    def draft(self, limit: int) -> list[int]:
        """Up to ``min(limit, max_draft)`` ids that followed the longest earlier occurrence of the
        context's last ids; none while backing off or without a match."""
        limit = min(limit, self.max_draft)
        if limit < 1:
            return []
        if self._wait > 0:
            self._wait -= 1
            return []
        ids = self._ids
        for n in range(MAX_MATCH, MIN_MATCH - 1, -1):
            if len(ids) <= n:
                continue
            start = self._index.get(tuple(ids[-n:]))
            if start is not None:
                out = ids[start : start + limit]
                self.drafted += len(out)
                return out
        return []

    def kept(self, count: int) -> None:
        """``count`` ids of the last draft were kept: a miss doubles the wait before the next one."""
        self.accepted += count
        self.expected += EXPECTED_WEIGHT * (count - self.expected)
        if count:
            self._backoff = 0
        else:
            self.skip()

    def skip(self) -> None:
        """Back off as after a miss (a draft that would not pay was not read)."""
        self._backoff = min(MAX_BACKOFF, max(1, 2 * self._backoff))
        self._wait = self._backoff
