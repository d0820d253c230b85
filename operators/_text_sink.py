"""The sink shared by the text operators (``replace``, ``hold_back``, ``stop``).

A text operator feeds the text of each item to an engine from :mod:`rxstream.text` and emits what
the engine returns. Items are ``str`` or :class:`~rxstream.Piece`: :class:`TextSink` does that
dispatch once for all of them, and for pieces keeps an :class:`~._align.Aligner` so that each
output piece carries exactly the token ids whose text it completes (SEMANTICS §5).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import ClassVar, TypeVar, cast

from reactivex import abc

from rxstream._finish import FinishCallback
from rxstream._piece import Piece

from ._align import Aligner
from ._sink import OperatorSink, describe

__all__ = ["TextItem", "TextSink"]

TextItem = TypeVar("TextItem", bound="str | Piece")
"""The item kind of one text stream (``str`` or :class:`~rxstream.Piece`, in and out)."""

_ALL = 2**62
"""A position past any text: everything resolved."""


class TextSink(OperatorSink[TextItem, TextItem]):
    """One subscription of a text operator: ``str`` or :class:`~rxstream.Piece` items, one engine.

    Subclasses give the engine's ``feed`` (text in, output text that can no longer change out) and
    implement :meth:`position` and :meth:`holding`; the first item decides whether the stream is
    one of ``str`` or of pieces (mixing them is a ``TypeError``); the output items are of the same
    kind (``TextSink[str]`` or ``TextSink[Piece]``). A sink whose engine can end the
    stream sets :attr:`checks_end` and implements :meth:`check_end`, called after each item's output.
    """

    __slots__ = ("aligner", "feed")

    checks_end: ClassVar[bool] = False
    """Whether :meth:`check_end` runs after each item (a class flag: no call for the others)."""

    def __init__(
        self,
        name: str,
        observer: abc.ObserverBase[TextItem],
        feed: Callable[[str], str],
        on_finish: FinishCallback | None = None,
    ) -> None:
        super().__init__(name, observer, on_finish)
        self.feed = feed
        self.aligner: Aligner | None = None

    @abstractmethod
    def position(self) -> int:
        """How many input characters the output accounts for (the ids up to there are due)."""

    @abstractmethod
    def holding(self) -> bool:
        """Whether the engine holds input text not accounted for yet."""

    def check_end(self) -> None:
        """End the stream if the engine decided so (only called when :attr:`checks_end` is set)."""

    def on_next(self, value: TextItem) -> None:
        if type(value) is str and self.aligner is None:
            out = self.feed(cast(str, value))
            if out:
                self.emit_text(out)
        elif isinstance(value, Piece):
            aligner = self.aligner
            if aligner is None:
                if self.position() or self.holding():
                    raise TypeError(f"{self.name}: a Piece after str items; got {describe(value)}")
                aligner = self.aligner = Aligner()
            aligner.add(value)
            out = self.feed(value.text)
            if out:
                self.emit_piece(aligner.piece(out, self.position()))
        else:
            raise TypeError(f"{self.name}: expected str or Piece items, got {describe(value)}")
        if self.checks_end:
            self.check_end()

    def emit_text(self, out: str) -> None:
        """Emit text of a stream of ``str`` (only then: the item kind follows the input's)."""
        self.observer.on_next(cast(TextItem, out))

    def emit_piece(self, piece: Piece | None) -> None:
        """Emit a piece of a stream of pieces (only then), unless it is None."""
        if piece is not None:
            self.observer.on_next(cast(TextItem, piece))

    def emit_out(self, out: str, upto: int) -> None:
        """Emit ``out``: as it is for a stream of ``str``, else with the ids due up to ``upto``."""
        if self.aligner is None:
            self.emit_text(out)
        else:
            self.emit_piece(self.aligner.piece(out, upto))

    def emit_rest(self, out: str) -> None:
        """Emit the last output (at completion) with every id not handed out yet."""
        if self.aligner is not None:
            self.emit_piece(self.aligner.piece(out, _ALL))
        elif out:
            self.emit_text(out)

    def take_held(self) -> tuple[int, ...]:
        return self.aligner.rest().ids if self.aligner is not None else ()
