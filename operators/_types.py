"""Type variables shared by the operators."""

from __future__ import annotations

from typing import TypeVar

from rxstream._piece import Piece

TextT = TypeVar("TextT", str, Piece)
"""A text item: plain ``str``, or a :class:`~rxstream.Piece` that carries its token ids."""
