"""``Segment``: one event of a routed stream (a channel's open, text, close, or malformed input)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, TypeAlias

__all__ = ["Segment", "SegmentEvent"]

SegmentEvent: TypeAlias = Literal["open", "chunk", "close", "malformed"]

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Segment:
    """One event of a routed stream (SEMANTICS §8).

    The texts of all segments, in order, are the routed text exactly; with aligned input their ids
    are the routed ids exactly, each in one segment.

    Attributes:
        channel: the channel's name (``"reasoning"``, ``"content"``, ``"tool_call"``, ...).
        event: ``"open"`` (a region starts; ``text`` is its opening delimiter), ``"chunk"``
            (``text`` is channel text), ``"close"`` (the region ends; ``text`` is its closing
            delimiter), ``"malformed"`` (``text`` is input that breaks the format: a closing
            delimiter with no region open, or ``""`` for a region still open at the end of the
            stream; ``reason`` says which).
        text: see ``event``.
        ids: the token ids whose text starts in this segment (aligned input), else None.
        logprobs: one per id when the input carried them, else None.
        index: the region's number within its channel (0, 1, ... per stream); 0 for the default
            channel's text outside any region.
        captures: named groups of a regular-expression delimiter (``open``/``close`` events).
        reason: why the input is malformed (``malformed`` events), else ``""``.
    """

    channel: str
    event: SegmentEvent
    text: str = ""
    ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    index: int = 0
    captures: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    reason: str = ""

    def __post_init__(self) -> None:
        if self.logprobs is not None and (self.ids is None or len(self.logprobs) != len(self.ids)):
            raise ValueError("Segment: logprobs need one value per id")
