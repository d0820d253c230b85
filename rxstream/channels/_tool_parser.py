"""``ToolCallParser``: tool-call regions (``Segment`` items) to tool-call events, as they stream.

One parser reads one stream: the segments of its tool-call channel, region after region
(SEMANTICS §9). For each call it emits

- :class:`ToolCallStart` once the tool's name is known (and allowed);
- :class:`ToolCallDelta` pieces of the arguments' JSON text: joined, exactly
  ``ToolCallEnd.arguments_text``. For the JSON formats that is the model's own text of the
  arguments value, as written (sent as it arrives, up to the last character known to be valid);
  for XML calls it is JSON generated from the parameters;
- :class:`ToolCallValue` for each value once settled (SEMANTICS §9: a string at its closing
  quote, a number at the character after it, ``true``/``false``/``null`` at their last letter,
  an object or array at its closing bracket): every scalar at any depth, and every argument
  (a key of the arguments object) whatever its type. Each comes after the deltas that hold its
  text;
- :class:`ToolCallEnd` with the parsed arguments when the call is complete;
- :class:`ToolCallInvalid` for invalid JSON, a schema violation, an unknown tool name or a
  region that ends too early, with the position of the first character after which no
  continuation could be valid. The rest of that region is skipped (other calls in it included);
  the next region starts afresh.

Formats (:mod:`._tool_formats`): a :class:`~._tool_formats.ToolCallFormat` or a known
format's name -- the generic ``json`` (:mod:`._tool_json`), ``json-list`` and ``xml``
(:mod:`._tool_xml`), and each model family's own (:mod:`rxstream.families`).

Call ids are ``call_`` and 24 hex digits from :mod:`secrets`, or ``id_factory(index)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from ._segment import Segment
from ._tool_events import (
    ToolCallDelta,
    ToolCallEnd,
    ToolCallError,
    ToolCallEvent,
    ToolCallInvalid,
    ToolCallStart,
    ToolCallValue,
)
from ._tool_formats import ToolFormat, tool_format
from ._tool_region import Region, default_id
from ._tools import Tool, compile_tools

__all__ = [
    "Tool",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallError",
    "ToolCallEvent",
    "ToolCallInvalid",
    "ToolCallParser",
    "ToolCallStart",
    "ToolCallValue",
    "compile_tools",
]


class ToolCallParser:
    """Tool-call events from the segments of one tool-call channel (see the module docstring).

    Args:
        format: how the regions are written: a :class:`~._tool_formats.ToolCallFormat` or its name.
        tools: the tools a call may name (an OpenAI tools list, or :func:`compile_tools`'
            result); None: any name, arguments not checked.
        id_factory: ``index -> id`` for the calls (default: ``call_`` + 24 random hex digits).
        invalid_at: when a :class:`ToolCallInvalid` goes out: ``"region_end"`` (when its region
            ends, with the region's whole text in ``raw``) or ``"decision"`` (at the segment
            that decides it, with the text so far).

    :meth:`feed` takes the channel's segments (``open``, ``chunk``, ``close``, ``malformed``);
    :meth:`finish` ends the stream (a region still open is unclosed). A ``close`` or
    ``malformed`` segment with no region open is returned as it is.
    """

    __slots__ = ("_format", "_id_factory", "_invalid_at", "_region", "next_index", "tools")

    def __init__(
        self,
        format: ToolFormat = "json",
        tools: Iterable[Any] | Mapping[str, Tool] | None = None,
        *,
        id_factory: Callable[[int], str] | None = None,
        invalid_at: Literal["region_end", "decision"] = "region_end",
    ) -> None:
        if invalid_at not in ("region_end", "decision"):
            raise ValueError(f"ToolCallParser: invalid_at is 'region_end' or 'decision', got {invalid_at!r}")
        if id_factory is not None and not callable(id_factory):
            raise TypeError(f"ToolCallParser: id_factory must be callable, got {type(id_factory).__name__}")
        self._format = tool_format(format, "ToolCallParser")
        self.tools: dict[str, Tool] | None = (
            dict(tools)
            if isinstance(tools, Mapping) and all(isinstance(t, Tool) for t in tools.values())
            else compile_tools(tools, "ToolCallParser")
        )
        self._id_factory = id_factory or default_id
        self._invalid_at = invalid_at
        self._region: Region | None = None
        self.next_index = 0

    @property
    def in_region(self) -> bool:
        """Whether a region is open."""
        return self._region is not None

    def new_id(self, index: int) -> str:
        call_id = self._id_factory(index)
        if not isinstance(call_id, str):
            raise TypeError(f"tool_calls: id_factory must return a str, got {type(call_id).__name__}")
        return call_id

    @property
    def report_at_decision(self) -> bool:
        return self._invalid_at == "decision"

    def feed(self, segment: Segment) -> list[ToolCallEvent | Segment]:
        """Read one segment of the tool-call channel; return the events it settles."""
        event = segment.event
        region = self._region
        if event == "chunk":
            if region is None:
                region = self._region = self._new_region(None)
                out = region.begin()
            else:
                out = []
            out.extend(region.feed_text(segment.text))
            return out
        if event == "open":
            out = self._close("a new tool call region opened first", "") if region is not None else []
            region = self._region = self._new_region(segment)
            out.extend(region.begin())
            return out
        if region is None:  # a close or malformed segment with nothing open
            return [segment]
        if event == "close":
            return self._close(None, segment.text)
        return self._close(segment.reason or "malformed input", segment.text)

    def finish(self) -> list[ToolCallEvent | Segment]:
        """The stream ended: close a region still open (unclosed)."""
        if self._region is None:
            return []
        return self._close("the stream ended inside a tool call region", "")

    def _close(self, reason: str | None, text: str) -> list[ToolCallEvent | Segment]:
        region = self._region
        assert region is not None
        self._region = None
        return list(region.close(text, reason))

    def _new_region(self, segment: Segment | None) -> Region:
        return self._format.region(self, segment)
