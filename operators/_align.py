"""Token alignment for :class:`~rxstream.Piece` streams (SEMANTICS §5).

Text operators see the text of each piece; :class:`Aligner` remembers where each input piece's
text ends, so that when the operator has resolved its input up to some position it can hand out
exactly the tokens (ids, logprobs, top logprobs) whose text is complete there.
"""

from __future__ import annotations

from collections import deque

from rxstream._piece import Piece, join_tokens

__all__ = ["Aligner"]


class Aligner:
    """Queue of ``(end position, piece)`` for the input pieces whose tokens are not handed out yet."""

    __slots__ = ("_logprobs", "_pending", "_pos")

    def __init__(self) -> None:
        self._pending: deque[tuple[int, Piece]] = deque()
        self._pos = 0
        self._logprobs = True  # False once a piece with tokens comes without logprobs

    def add(self, piece: Piece) -> None:
        """Record an input piece (its text is fed to the operator right after)."""
        self._pos += len(piece.text)
        if piece.ids or piece.tokens:
            self._pending.append((self._pos, piece))
            if piece.logprobs is None:
                self._logprobs = False

    def _due(self, upto: int) -> Piece | None:
        """The tokens of the pieces whose text ends at or before ``upto`` (the text of the piece
        returned means nothing); None when none is due."""
        pending = self._pending
        if not pending or pending[0][0] > upto:
            return None
        if len(pending) == 1 or pending[1][0] > upto:
            return pending.popleft()[1]
        parts: list[Piece] = []
        while pending and pending[0][0] <= upto:
            parts.append(pending.popleft()[1])
        return join_tokens("", parts)

    def take(self, upto: int) -> Piece:
        """The tokens of the pieces whose text ends at or before ``upto``, as a piece with no text.

        Its logprobs are None when the stream carries none (``()`` when it does but no token is due).
        """
        due = self._due(upto)
        if due is None:
            return Piece("", (), () if self._logprobs else None)
        return Piece("", due.ids, due.logprobs, due.top_logprobs, due.tokens)

    def rest(self) -> Piece:
        """All tokens not handed out yet."""
        return self.take(self._pos)

    def piece(self, text: str, upto: int) -> Piece | None:
        """A piece with ``text`` and the tokens complete at ``upto``; None when both are empty."""
        due = self._due(upto)
        if due is None:
            return Piece(text, (), () if self._logprobs else None) if text else None
        return Piece(text, due.ids, due.logprobs, due.top_logprobs, due.tokens)
