"""Literal ``Replace`` steps that act on a decoder's fused output, streamed exactly.

A ``tokenizers`` decoder chain such as ``[..., Fuse, Replace("ab", "X")]`` replaces a pattern in
the whole decoded text: a match can span tokens, so no per-id table reproduces it. But the text
before those steps is exactly what the table engine streams, and a literal replacement over a
stream of text is what :class:`rxstream.Replacer` computes, exactly and as early as possible
(leftmost, non-overlapping: the Rust decoder's order for a literal pattern), holding back only
text that could still become a match. :class:`ReplacingEngine` chains the two, one replacer per
step in the chain's order, so such chains keep the exact path (SEMANTICS §4).

Matches do not span the prompt and the generation: the replacers start with the generation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..text import Replacer, replace_rules
from ._table_engine import TableEngine

__all__ = ["ReplacingEngine"]


class ReplacingEngine:
    """A :class:`~._table_engine.TableEngine` whose text goes through streaming replacements."""

    __slots__ = ("_inner", "_replacers")

    def __init__(self, inner: TableEngine, replaces: Sequence[tuple[str, str]]) -> None:
        self._inner = inner
        self._replacers = [Replacer(replace_rules([(a, b)], owner="detokenize")) for a, b in replaces]

    def seed(self, prompt_ids: Sequence[int]) -> None:
        """The prompt sets the table's context; its text is never emitted (nor replaced)."""
        self._inner.seed(prompt_ids)

    def _through(self, text: str) -> str:
        for r in self._replacers:
            if not text:
                return ""
            text = r.feed(text)
        return text

    @property
    def holding(self) -> bool:
        """Whether bytes wait for their character, or text for a replacement's decision."""
        return self._inner.holding or any(r.held for r in self._replacers)

    def push_one(self, i: int) -> str:
        return self._through(self._inner.push_one(i))

    def push_fast(self, i: int) -> str | None:
        return None  # held text may change: every id goes through push_one

    def push_many(self, ids: Iterable[int]) -> str:
        return self._through(self._inner.push_many(ids))

    def finish(self) -> str:
        text = self._inner.finish()
        for r in self._replacers:
            text = r.feed(text) + r.flush() if text else r.flush()
        return text
