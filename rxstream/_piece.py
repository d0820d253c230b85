"""A piece of text that remembers the token ids (and per-token data) it came from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

__all__ = ["Piece", "TopLogprobs", "join_tokens"]

TopLogprobs: TypeAlias = tuple[tuple[int | str, float], ...]
"""The most likely tokens at one position, best first: ``(id, logprob)`` pairs (``(token text,
logprob)`` where a source names tokens only by their text)."""


@dataclass(frozen=True, slots=True)
class Piece:
    """Text with the tokens whose text it completes, in order (SEMANTICS §5).

    A token is named by its id; a source that knows only the tokens' text (a remote server that
    sends no ids) names them in ``tokens`` instead. Every per-token field has one entry per token.

    Attributes:
        text: the text (may be empty only while tokens are carried that produce no text yet).
        ids: the token ids whose text this piece completes.
        logprobs: one log-probability per token, or None when the source gives none.
        top_logprobs: per token, the alternatives the source reported, best first (``(id,
            logprob)``, or ``(token text, logprob)`` when the source gives no ids); None when the
            source gives none.
        tokens: per token, its text as the source spelled it, when the source names tokens by
            text (then ``ids`` may be empty); None otherwise.
    """

    text: str
    ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] | None = None
    top_logprobs: tuple[TopLogprobs, ...] | None = None
    tokens: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        n = len(self.ids)
        if self.tokens is not None and self.ids and len(self.tokens) != n:
            raise ValueError(f"Piece: {len(self.tokens)} tokens for {n} ids; need one per id")
        if not n and self.tokens is not None:
            n = len(self.tokens)
        if self.logprobs is not None and len(self.logprobs) != n:
            raise ValueError(f"Piece: {len(self.logprobs)} logprobs for {n} tokens; need one per token")
        if self.top_logprobs is not None and len(self.top_logprobs) != n:
            raise ValueError(
                f"Piece: {len(self.top_logprobs)} top_logprobs for {n} tokens; need one per token"
            )

    @property
    def size(self) -> int:
        """How many tokens the piece carries (its ids, else its ``tokens``)."""
        if self.ids:
            return len(self.ids)
        return len(self.tokens) if self.tokens is not None else 0

    def tokens_slice(self, start: int, stop: int | None = None) -> Piece:
        """The tokens ``start:stop`` of this piece, with every per-token field, and no text."""
        cut = slice(start, stop)
        return Piece(
            "",
            self.ids[cut],
            None if self.logprobs is None else self.logprobs[cut],
            None if self.top_logprobs is None else self.top_logprobs[cut],
            None if self.tokens is None else self.tokens[cut],
        )


def join_tokens(text: str, parts: Sequence[Piece], *, logprobs_default: bool = False) -> Piece:
    """A piece with ``text`` and the tokens of ``parts`` joined in order (their text is ignored).

    A per-token field is joined when every part that carries tokens has it, else it is None
    (also when no part carries tokens; with ``logprobs_default`` then ``logprobs`` is ``()``, the
    value of a stream that carries logprobs when no token is due).
    """
    if len(parts) == 1 and parts[0].size:
        p = parts[0]
        return Piece(text, p.ids, p.logprobs, p.top_logprobs, p.tokens)
    ids: list[int] = []
    lps: list[float] | None = []
    tops: list[TopLogprobs] | None = []
    toks: list[str] | None = []
    sized = named = False
    for p in parts:
        if not p.size:
            continue
        sized = True
        if not p.ids:
            named = True
        ids.extend(p.ids)
        if lps is not None:
            if p.logprobs is None:
                lps = None
            else:
                lps.extend(p.logprobs)
        if tops is not None:
            if p.top_logprobs is None:
                tops = None
            else:
                tops.extend(p.top_logprobs)
        if toks is not None:
            if p.tokens is None:
                toks = None
            else:
                toks.extend(p.tokens)
    if not sized:
        return Piece(text, (), () if logprobs_default else None)
    if ids and named:  # parts named by id and parts named only by text: keep the ids alone
        return Piece(text, tuple(ids))
    return Piece(
        text,
        tuple(ids),
        None if lps is None else tuple(lps),
        None if tops is None else tuple(tops),
        None if toks is None else tuple(toks),
    )
