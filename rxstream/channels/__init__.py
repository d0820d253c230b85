"""Channels: splitting one generated stream into reasoning, answer and tool calls, outside Rx.

- :mod:`._segment` -- :class:`Segment`, one event of a routed stream.
- :mod:`._spec` -- :class:`RouteSpec`, :class:`Region`, :class:`SpecialToken`, :func:`route_spec`.

The ``route``, ``channels`` and ``tool_calls`` operators (:mod:`rxstream.operators`) run on
these engines (SEMANTICS §8).
"""

from ._segment import Segment, SegmentEvent
from ._spec import ChannelKind, Delimiter, Region, RouteSpec, SpecialToken, ToolFormat, guess_kind, route_spec

__all__ = [
    "ChannelKind",
    "Delimiter",
    "Region",
    "RouteSpec",
    "Segment",
    "SegmentEvent",
    "SpecialToken",
    "ToolFormat",
    "guess_kind",
    "route_spec",
]
