"""Channels: splitting one generated stream into reasoning, answer and tool calls, outside Rx.

- :mod:`._segment` -- :class:`Segment`, one event of a routed stream.
- :mod:`._spec` -- :class:`RouteSpec`, :class:`Region`, :class:`SpecialToken`, :func:`route_spec`.
- :mod:`._presets` -- :data:`PRESETS` and :func:`preset`: the route specs of the model families
  (:mod:`rxstream.families`), by name.
- :mod:`._router` -- :class:`Router`, the streaming engine; :func:`route_text`, its batch
  reference; :func:`merge_chunks`.
- :mod:`._template` -- :func:`load_response_template`: a transformers ``response_template`` as
  a :class:`ResponseTemplate` (a :class:`RouteSpec` plus per-field :class:`FieldRule`);
  :mod:`._content` -- its content parsers and transforms; :mod:`._message` --
  :class:`MessageBuilder` (segments -> the message dict) and :func:`parse_message`.
- :mod:`._tool_parser` -- :class:`ToolCallParser`; its events (:class:`ToolCallStart`, ...) in
  :mod:`._tool_events`; :class:`Tool` and :func:`compile_tools` in :mod:`._tools`.
- :mod:`._tool_formats` -- :class:`ToolCallFormat` and the formats by name
  (:func:`tool_format`); the generic ones: :class:`JsonCallFormat` (:mod:`._tool_json`),
  :class:`XmlCallFormat` (:mod:`._tool_xml`), each region's reader on :mod:`._tool_region`,
  :mod:`._json_stream` (incremental JSON) and :mod:`._json_schema` (incremental schema checks).

The ``route``, ``channels`` and ``tool_calls`` operators (:mod:`rxstream.operators`) run on
these engines (SEMANTICS §8).
"""

from ._message import MessageBuilder, parse_message
from ._presets import PRESETS, preset
from ._router import CompiledRoute, Router, merge_chunks, route_text
from ._segment import Segment, SegmentEvent
from ._spec import ChannelKind, Delimiter, Region, RouteSpec, SpecialToken, guess_kind, route_spec
from ._template import FieldRule, ResponseTemplate, load_response_template
from ._tool_formats import ToolCallFormat, ToolFormat, tool_format, tool_format_names
from ._tool_json import JsonCallFormat
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
from ._tool_pythonic import PythonicCallFormat
from ._tool_xml import XmlCallFormat

__all__ = [
    "PRESETS",
    "ChannelKind",
    "CompiledRoute",
    "Delimiter",
    "FieldRule",
    "JsonCallFormat",
    "MessageBuilder",
    "PythonicCallFormat",
    "Region",
    "ResponseTemplate",
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
    "ToolCallFormat",
    "ToolCallInvalid",
    "ToolCallParser",
    "ToolCallStart",
    "ToolCallValue",
    "ToolFormat",
    "XmlCallFormat",
    "compile_tools",
    "guess_kind",
    "load_response_template",
    "merge_chunks",
    "parse_message",
    "preset",
    "route_spec",
    "route_text",
    "tool_format",
    "tool_format_names",
]
