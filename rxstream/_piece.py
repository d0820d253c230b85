"""A piece of text that remembers the token ids (and per-token data) it came from."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Piece"]


@dataclass(frozen=True, slots=True)
class Piece:
    """Text with the token ids whose text it completes, in order (SEMANTICS §5).

    Attributes:
        text: the text (may be empty only while ids are carried that produce no text yet).
        ids: the token ids whose text this piece completes.
        logprobs: one log-probability per id, or None when the source gives none.
    """

    text: str
    ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.logprobs is not None and len(self.logprobs) != len(self.ids):
            raise ValueError(f"Piece: {len(self.logprobs)} logprobs for {len(self.ids)} ids; need one per id")
