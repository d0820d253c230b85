"""What rxstream knows of one model family: :class:`Family`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from ..channels._spec import Region, RouteSpec
from ..channels._tool_formats import tool_format

__all__ = ["Family"]


@dataclass(frozen=True)
class Family:
    """A model family's output format, in one place (one module of :mod:`rxstream.families`).

    Attributes:
        name: the family's name (``route(name)``, ``--reasoning-format name``).
        spec: how its output is routed (reasoning, answer, tool-call regions) and how its tool
            calls are written (``spec.tool_format``).
        aliases: other names for it.
        signature: whether a chat template's source points to this family (None: never
            detected; it is chosen by name).
        rank: the order families are asked in when a template is detected (lower first: a
            signature that another's implies asks earlier).
        special_delimiters: its delimiters are special tokens (``[THINK]``, ``<|channel|>``): the
            detokenizer keeps their text (``skip_special_tokens=False``) so the router sees it.
        call_opening: what follows the tool-call region's opening delimiter before a call's text
            (``"\\n"`` after ``<tool_call>``), when a forced call is opened in the prompt.
        bare_calls: tool-call regions for calls written without their tag (a JSON call as the
            whole answer): routed only when the chat has tools (:meth:`with_tools`), since
            without tools such text is an answer.
        open_call: the family's own text that opens a forced call (``name``: the tool, None for
            any); by default the region's literal opening delimiter, ``call_opening`` and the
            format's :meth:`~rxstream.channels.ToolCallFormat.call_prefix`.
    """

    name: str
    spec: RouteSpec
    aliases: tuple[str, ...] = ()
    signature: Callable[[str], bool] | None = None
    rank: int = 100
    special_delimiters: bool = False
    call_opening: str = ""
    bare_calls: tuple[Region, ...] = ()
    open_call: Callable[[str | None], str | None] | None = None

    def __post_init__(self) -> None:
        if not self.name or self.spec.name != self.name:
            raise ValueError(
                f"family {self.name!r}: its spec must be named {self.name!r}, got {self.spec.name!r}"
            )

    def with_tools(self) -> RouteSpec:
        """The spec for a chat that has tools: :attr:`spec` with the :attr:`bare_calls` regions
        (after the tagged ones: a tag wins a tie)."""
        if not self.bare_calls:
            return self.spec
        return dataclasses.replace(self.spec, regions=(*self.spec.regions, *self.bare_calls))

    def detects(self, template: str) -> bool:
        """Whether ``template`` (a chat template's source) points to this family."""
        return self.signature is not None and self.signature(template)

    def forced_call(self, name: str | None) -> str | None:
        """The text that opens a tool call at the start of the answer, naming ``name`` (None: any
        tool); None when the format cannot be forced that way."""
        if self.open_call is not None:
            return self.open_call(name)
        spec = self.spec
        channel = spec.channel_of("tool_call")
        region = next((r for r in spec.regions if r.channel == channel), None)
        opener = None if region is None else next((d for d in region.open if isinstance(d, str)), None)
        if opener is None or spec.tool_format is None:
            return None
        head = opener + self.call_opening
        if name is None:
            return head
        prefix = tool_format(spec.tool_format).call_prefix(name)
        return None if prefix is None else head + prefix
