"""``Segment``: one event of a routed stream (a channel's open, text, close, or malformed input)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal, NamedTuple, TypeAlias

from .._piece import TopLogprobs

__all__ = ["Segment", "SegmentEvent"]

SegmentEvent: TypeAlias = Literal["open", "chunk", "close", "malformed"]

EMPTY_CAPTURES: Mapping[str, str] = MappingProxyType({})

_EVENTS = frozenset(("open", "chunk", "close", "malformed"))


class _SegmentFields(NamedTuple):
    channel: str
    event: SegmentEvent
    text: str = ""
    ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    region: int = 0
    captures: Mapping[str, str] = EMPTY_CAPTURES
    reason: str = ""
    top_logprobs: tuple[TopLogprobs, ...] | None = None
    tokens: tuple[str, ...] | None = None


class Segment(_SegmentFields):
    """One event of a routed stream (SEMANTICS §8); an immutable record (a named tuple).

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
        logprobs: one per token when the input carried them, else None.
        region: the region's number within its channel (0, 1, ... per stream); for the default
            channel, the number of its runs ended by a ``default_close`` delimiter before it.
        captures: named groups of a regular-expression delimiter (``open``/``close`` events).
        reason: why the input is malformed (``malformed`` events), else ``""``.
        top_logprobs: per token, its alternatives when the input carried them, else None.
        tokens: per token, its text when the input named tokens by text (no ids), else None.

    >>> s = Segment("reasoning", "chunk", "why")
    >>> s.channel, s.event, s.text, s.ids
    ('reasoning', 'chunk', 'why', None)
    """

    __slots__ = ()

    def __new__(
        cls,
        channel: str,
        event: SegmentEvent,
        text: str = "",
        ids: tuple[int, ...] | None = None,
        logprobs: tuple[float, ...] | None = None,
        region: int = 0,
        captures: Mapping[str, str] = EMPTY_CAPTURES,
        reason: str = "",
        top_logprobs: tuple[TopLogprobs, ...] | None = None,
        tokens: tuple[str, ...] | None = None,
    ) -> Segment:
        if event not in _EVENTS:
            raise ValueError(f"Segment: event must be open, chunk, close or malformed, got {event!r}")
        n = len(ids) if ids else (len(tokens) if tokens is not None else 0)
        if ids and tokens is not None and len(tokens) != n:
            raise ValueError("Segment: tokens need one value per id")
        if logprobs is not None and ((ids is None and tokens is None) or len(logprobs) != n):
            raise ValueError("Segment: logprobs need one value per token")
        if top_logprobs is not None and len(top_logprobs) != n:
            raise ValueError("Segment: top_logprobs need one value per token")
        fields = (channel, event, text, ids, logprobs, region, captures, reason, top_logprobs, tokens)
        return tuple.__new__(cls, fields)

    def __repr__(self) -> str:
        return (
            f"Segment(channel={self.channel!r}, event={self.event!r}, text={self.text!r}, ids={self.ids!r}, "
            f"logprobs={self.logprobs!r}, region={self.region!r}, captures={dict(self.captures)!r}, "
            f"reason={self.reason!r}, top_logprobs={self.top_logprobs!r}, tokens={self.tokens!r})"
        )
