"""Channels: splitting one generated stream into reasoning, answer and tool calls, outside Rx.

- :mod:`._segment` -- :class:`Segment`, one event of a routed stream.
- :mod:`._spec` -- :class:`RouteSpec`, :class:`Region`, :class:`SpecialToken`, :func:`route_spec`.
- :mod:`._presets` -- :data:`PRESETS` for the common model families, :func:`preset`.
- :mod:`._router` -- :class:`Router`, the streaming engine; :func:`route_text`, its batch
  reference; :func:`merge_chunks`.
- :mod:`._tool_parser` -- :class:`ToolCallParser` and its events (:class:`ToolCallStart`, ...),
  on :mod:`._json_stream` (incremental JSON) and :mod:`._json_schema` (incremental schema checks).

The ``route``, ``channels`` and ``tool_calls`` operators (:mod:`rxstream.operators`) run on
these engines (SEMANTICS §8).
"""

from ._presets import PRESETS, preset
from ._router import CompiledRoute, Router, merge_chunks, route_text
from ._segment import Segment, SegmentEvent
from ._spec import ChannelKind, Delimiter, Region, RouteSpec, SpecialToken, ToolFormat, guess_kind, route_spec
from ._tool_parser import (
    Tool,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallError,
    ToolCallEvent,
    ToolCallInvalid,
    ToolCallParser,
    ToolCallStart,
    ToolCallValue,
    compile_tools,
)

__all__ = [
    "PRESETS",
    "ChannelKind",
    "CompiledRoute",
    "Delimiter",
    "Region",
    "RouteSpec",
    "Router",
    "Segment",
    "SegmentEvent",
    "SpecialToken",
    "Tool",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallError",
    "ToolCallEvent",
    "ToolCallInvalid",
    "ToolCallParser",
    "ToolCallStart",
    "ToolCallValue",
    "ToolFormat",
    "compile_tools",
    "guess_kind",
    "merge_chunks",
    "preset",
    "route_spec",
    "route_text",
]
