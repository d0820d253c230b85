"""Token alignment for :class:`~rxstream.Piece` streams (SEMANTICS §5).

Text operators see the text of each piece; :class:`Aligner` remembers where each input piece's
text ends, so that when the operator has resolved its input up to some position it can hand out
exactly the ids (and logprobs) whose text is complete there.
"""

from __future__ import annotations

from collections import deque

from rxstream._piece import Piece

__all__ = ["Aligner"]


class Aligner:
    """Queue of ``(end position, ids, logprobs)`` for the input pieces not yet handed out."""

    __slots__ = ("_logprobs", "_pending", "_pos")

    def __init__(self) -> None:
        self._pending: deque[tuple[int, tuple[int, ...], tuple[float, ...] | None]] = deque()
        self._pos = 0
        self._logprobs = True  # False once a piece with ids comes without logprobs

    def add(self, piece: Piece) -> None:
        """Record an input piece (its text is fed to the operator right after)."""
        self._pos += len(piece.text)
        if piece.ids:
            self._pending.append((self._pos, piece.ids, piece.logprobs))
            if piece.logprobs is None:
                self._logprobs = False

    def take(self, upto: int) -> tuple[tuple[int, ...], tuple[float, ...] | None]:
        """The ids (and logprobs) of the pieces whose text ends at or before ``upto``.

        Logprobs are None when the stream carries none (``()`` when it does but no id is due).
        """
        pending = self._pending
        if not pending or pending[0][0] > upto:
            return (), (() if self._logprobs else None)
        ids: list[int] = []
        lps: list[float] | None = []
        while pending and pending[0][0] <= upto:
            _, piece_ids, piece_lps = pending.popleft()
            ids.extend(piece_ids)
            if lps is not None and piece_lps is not None:
                lps.extend(piece_lps)
            else:
                lps = None
        return tuple(ids), (tuple(lps) if lps is not None else None)

    def rest(self) -> tuple[tuple[int, ...], tuple[float, ...] | None]:
        """All ids not handed out yet."""
        return self.take(self._pos)

    def piece(self, text: str, upto: int) -> Piece | None:
        """A piece with ``text`` and the ids complete at ``upto``; None when both are empty."""
        ids, lps = self.take(upto)
        if not text and not ids:
            return None
        return Piece(text, ids, lps)
