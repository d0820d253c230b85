"""The events of a tool-call stream (:class:`ToolCallStart`, ... :class:`ToolCallInvalid`) and
:class:`ToolCallError` (SEMANTICS §9)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = [
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallError",
    "ToolCallEvent",
    "ToolCallInvalid",
    "ToolCallStart",
    "ToolCallValue",
]


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """A call begins: its tool's name is known. ``index`` numbers the calls of a stream from 0."""

    index: int
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """More of call ``index``'s arguments text (the deltas of a call, joined, are its
    ``arguments_text``)."""

    index: int
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallValue:
    """A settled value of call ``index``'s arguments: ``path`` is its keys and list indices
    from the arguments object (``("cities", 0)``)."""

    index: int
    path: tuple[str | int, ...]
    value: Any


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    """Call ``index`` is complete: ``arguments`` is ``json.loads(arguments_text)``."""

    index: int
    id: str
    name: str
    arguments: dict[str, Any]
    arguments_text: str


@dataclass(frozen=True, slots=True)
class ToolCallInvalid:
    """A tool call that cannot be valid.

    Attributes:
        index: the call's index (for a call whose start was never emitted, the index the next
            call will get).
        error: what is wrong (invalid JSON, a schema violation, an unknown tool name, a region
            that ended too early).
        position: the first character after which no continuation could be valid, as an index
            into the region's text (the text after its opening delimiter; its length when the
            region ended too early; 0 for a bad name in an opening delimiter that names the tool).
        raw: the region's text with its delimiters, as received (up to the deciding segment
            when the stream is cancelled there), so that nothing is lost.
    """

    index: int
    error: str
    position: int
    raw: str


ToolCallEvent: TypeAlias = ToolCallStart | ToolCallDelta | ToolCallValue | ToolCallEnd | ToolCallInvalid


class ToolCallError(ValueError):
    """An invalid tool call, as an error (``tool_calls(on_invalid="error")``): ``event`` says why."""

    def __init__(self, event: ToolCallInvalid) -> None:
        super().__init__(f"invalid tool call {event.index} at {event.position}: {event.error}")
        self.event = event
