"""The text items of a routed chat: :class:`TextDelta`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from .._piece import Piece
from ..channels._tool_events import ToolCallDelta, ToolCallEnd, ToolCallInvalid, ToolCallStart

__all__ = ["ChatItem", "TextDelta"]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Text of one channel: ``"content"`` (the answer) or ``"reasoning"``.

    ``piece``: with log-probabilities asked (``ChatPlan.logprobs``), the text as an aligned
    :class:`~rxstream.Piece` with the tokens it holds (SEMANTICS §5: after the answer's ``stop``
    and ``replace``; never a delimiter's tokens), else None.
    """

    kind: Literal["content", "reasoning"]
    text: str
    piece: Piece | None = None


ChatItem: TypeAlias = TextDelta | ToolCallStart | ToolCallDelta | ToolCallEnd | ToolCallInvalid
"""An item of a routed chat (:func:`rxstream.operators.chat_pipeline`): answer or reasoning text,
or a tool-call event."""
