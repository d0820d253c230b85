"""How a tool-call region is written: :class:`ToolCallFormat`, and the formats known by name.

A format makes the reader of one region (:meth:`ToolCallFormat.region`) and says how a prompt
opens a call of a named tool (:meth:`ToolCallFormat.call_prefix`). The generic formats are here
(``json``, ``json-list``, ``xml``: :func:`tool_format_names`); a model family with a syntax of its
own declares its format in its module (:mod:`rxstream.families`), and :func:`tool_format` finds
it there by name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from ._segment import Segment
    from ._tool_parser import ToolCallParser
    from ._tool_region import Region

__all__ = ["ToolCallFormat", "ToolFormat", "tool_format", "tool_format_names"]


class ToolCallFormat(ABC):
    """A way of writing tool calls inside a tool-call region. Subclasses are frozen dataclasses
    with a ``name`` field."""

    name: str

    @abstractmethod
    def region(self, parser: ToolCallParser, segment: Segment | None) -> Region:
        """The reader of one region (``segment``: its ``open`` segment, None when the region
        started without one)."""

    @abstractmethod
    def call_prefix(self, name: str) -> str | None:
        """The text after the region's opening delimiter that starts a call of ``name`` (a
        forced tool call is opened with it in the prompt); None when the format cannot."""


ToolFormat: TypeAlias = "str | ToolCallFormat"
"""A tool-call format: a :class:`ToolCallFormat`, or the name of one (:func:`tool_format_names`)."""


def _generic() -> dict[str, ToolCallFormat]:
    from ._tool_json import JsonCallFormat
    from ._tool_xml import XmlCallFormat

    return {
        # one {"name": ..., "arguments": {...}} object per call, several one after another
        # (whitespace or a comma between them)
        "json": JsonCallFormat("json", separators=","),
        # one JSON list of such objects per region
        "json-list": JsonCallFormat("json-list", listed=True, multiple=False),
        # <function=NAME><parameter=KEY>VALUE</parameter>...</function>
        "xml": XmlCallFormat("xml"),
    }


_GENERIC: dict[str, ToolCallFormat] = {}
_KNOWN: dict[str, ToolCallFormat] = {}


def _generic_formats() -> dict[str, ToolCallFormat]:
    if not _GENERIC:
        _GENERIC.update(_generic())
    return _GENERIC


def _known() -> dict[str, ToolCallFormat]:
    """The generic formats and every family's own (the families are read on the first call)."""
    if not _KNOWN:
        from ..families import families

        found = dict(_generic_formats())
        for family in families():
            fmt = family.spec.tool_format
            if isinstance(fmt, ToolCallFormat):
                found.setdefault(fmt.name, fmt)
        _KNOWN.update(found)
    return _KNOWN


def tool_format_names() -> tuple[str, ...]:
    """The names :func:`tool_format` knows: the generic formats and each family's own."""
    return tuple(sorted(_known()))


def tool_format(value: object, owner: str = "tool_calls") -> ToolCallFormat:
    """``value`` as a :class:`ToolCallFormat` (a format, or a known format's name).

    Raises:
        ValueError: an unknown name (the message lists the known ones); TypeError: another type.
    """
    if isinstance(value, ToolCallFormat):
        return value
    if not isinstance(value, str):
        raise TypeError(f"{owner}: format must be a str or a ToolCallFormat, got {type(value).__name__}")
    generic = _generic_formats()
    if value in generic:
        return generic[value]
    known = _known()
    if value not in known:
        raise ValueError(f"{owner}: unknown format {value!r} (known: {', '.join(sorted(known))})")
    return known[value]
