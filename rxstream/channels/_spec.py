"""What ``route`` splits on: regions, their delimiters, and the channel outside them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from ..text import RegexRule, is_regex_rule, rx
from ._tool_formats import ToolCallFormat, ToolFormat, tool_format

__all__ = [
    "ChannelKind",
    "Delimiter",
    "Region",
    "RouteSpec",
    "SpecialToken",
    "ToolFormat",
    "route_spec",
]

ChannelKind: TypeAlias = Literal["reasoning", "content", "tool_call", "other"]
"""What a channel holds, for the faces (server, CLI): reasoning, answer, tool calls, or framing."""


@dataclass(frozen=True)
class SpecialToken:
    """A delimiter that is one token id (a special token), not text the model could spell out.

    On aligned input (``Piece`` items) it matches only that id; ``text`` is what the detokenizer
    shows for it (``""`` when special tokens are skipped). On plain text it matches ``text``
    (which must then be non-empty).
    """

    id: int
    text: str = ""


Delimiter: TypeAlias = str | RegexRule | SpecialToken


def _delims(value: Any, where: str) -> tuple[Delimiter, ...]:
    items = (
        [value]
        if isinstance(value, (str, SpecialToken)) or is_regex_rule(value)
        else list(value)
        if isinstance(value, Iterable)
        else None
    )
    if items is None:
        raise TypeError(
            f"route: {where}: a delimiter is a str, rx(...) rule, re.Pattern or SpecialToken "
            f"(or a list of them), got {type(value).__name__}: {value!r}"
        )
    out: list[Delimiter] = []
    for item in items:
        if isinstance(item, str):
            if not item:
                raise ValueError(f"route: {where}: a delimiter cannot be empty")
            out.append(item)
        elif isinstance(item, SpecialToken):
            if isinstance(item.id, bool) or not isinstance(item.id, int) or item.id < 0:
                raise ValueError(f"route: {where}: SpecialToken id must be an int >= 0, got {item.id!r}")
            out.append(item)
        elif isinstance(item, RegexRule):
            out.append(item)
        elif is_regex_rule(item):
            out.append(rx(item))
        else:
            raise TypeError(
                f"route: {where}: a delimiter is a str, rx(...) rule, re.Pattern or SpecialToken, "
                f"got {type(item).__name__}: {item!r}"
            )
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class Region:
    """A span of the stream that belongs to ``channel``: from one of ``open`` to one of ``close``.

    ``close`` empty: the region runs to the end of the stream (then it closes without a
    delimiter; that is not malformed). ``close_at_end``: the end of the stream is a proper close
    too (its closing delimiters are end-of-sequence tokens, which a generator stops at without
    emitting them: an ``</s>`` or ``<|return|>``).
    """

    channel: str
    open: tuple[Delimiter, ...]
    close: tuple[Delimiter, ...] = ()
    close_at_end: bool = False


@dataclass(frozen=True)
class RouteSpec:
    """The regions ``route`` recognises, and the channel for text outside them.

    Attributes:
        regions: the regions, in priority order (on a tie between two opening delimiters at the
            same position and of the same length, the first region wins).
        default: the channel of text outside every region.
        default_close: delimiters that end a run of default text (an end-of-turn marker, say):
            a ``close`` event of the default channel; text after one starts a new run.
        start_anchor: where the assistant's message starts in a prompt: ``route(prompt=...)``
            reads the prompt from after the last of these (the whole prompt if none is found).
        kinds: what each channel holds (``"reasoning"``, ``"content"``, ``"tool_call"``,
            ``"other"``); channels not named are ``"content"``.
        tool_format: how the tool-call regions are written (a :class:`~._tool_formats.ToolCallFormat`
            or a known format's name), or None.
        name: a name for messages (a preset's name).
        initial: the channel of a region that is open at the start of the stream (the start
            of the prompt after its anchor, or of the text), as if an empty opening delimiter
            matched there -- unless the text begins with another region's opening delimiter
            or a ``default_close`` delimiter, which then wins as usual (that region's own
            opening delimiters are not looked for at the start). None: the stream starts
            outside every region.
    """

    regions: tuple[Region, ...]
    default: str = "content"
    default_close: tuple[Delimiter, ...] = ()
    start_anchor: tuple[str, ...] = ()
    kinds: Mapping[str, ChannelKind] = field(default_factory=lambda: MappingProxyType({}))
    tool_format: ToolFormat | None = None
    name: str = ""
    initial: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.default, str) or not self.default:
            raise ValueError(f"route: the default channel must be a non-empty str, got {self.default!r}")
        for region in self.regions:
            if not region.open:
                raise ValueError(f"route: region {region.channel!r} needs an opening delimiter")
        for channel, kind in self.kinds.items():
            if kind not in ("reasoning", "content", "tool_call", "other"):
                raise ValueError(f"route: channel {channel!r}: unknown kind {kind!r}")
        if self.tool_format is not None and not isinstance(self.tool_format, ToolCallFormat):
            tool_format(self.tool_format, "route")  # a name: known (else the ValueError lists them)
        if self.initial is not None and self.initial not in (r.channel for r in self.regions):
            raise ValueError(f"route: initial {self.initial!r} is not the channel of a region")

    @property
    def channels(self) -> tuple[str, ...]:
        """Every channel a routed stream can name: the default first, then each region's."""
        return tuple(dict.fromkeys([self.default, *(r.channel for r in self.regions)]))

    def kind(self, channel: str) -> ChannelKind:
        """What ``channel`` holds (``"content"`` unless :attr:`kinds` says otherwise)."""
        return self.kinds.get(channel, "content")

    def channel_of(self, kind: ChannelKind) -> str | None:
        """The first channel of ``kind``, or None."""
        for channel in self.channels:
            if self.kind(channel) == kind:
                return channel
        return None


_GUESS: tuple[tuple[str, ChannelKind], ...] = (
    ("think", "reasoning"),
    ("reason", "reasoning"),
    ("analysis", "reasoning"),
    ("tool", "tool_call"),
    ("function", "tool_call"),
)


def guess_kind(channel: str) -> ChannelKind:
    """``"reasoning"`` / ``"tool_call"`` / ``"content"`` from a channel's name."""
    low = channel.lower()
    for word, kind in _GUESS:
        if word in low:
            return kind
    return "content"


def route_spec(
    regions: Mapping[str, Any],
    *,
    default: str = "content",
    default_close: Any = (),
    start_anchor: str | Iterable[str] = (),
    kinds: Mapping[str, ChannelKind] | None = None,
    tool_format: ToolFormat | None = None,
    name: str = "",
    initial: str | None = None,
) -> RouteSpec:
    """A :class:`RouteSpec` from a plain mapping ``{channel: (open, close)}``.

    ``open`` and ``close`` are delimiters (a str, an ``rx(...)`` rule or ``re.Pattern``, a
    :class:`SpecialToken`) or lists of them; ``close`` may be None (the region runs to the end).
    A channel may also map to a list of such pairs (several kinds of region, one channel).
    ``initial``: a channel whose region is open at the start of the stream (see
    :attr:`RouteSpec.initial`).

    >>> spec = route_spec(
    ...     {"reasoning": ("<think>", "</think>"), "tool_call": ("<tool_call>", "</tool_call>"),}
    ... )
    >>> spec.channels, spec.kind("reasoning"), spec.kind("tool_call")
    (('content', 'reasoning', 'tool_call'), 'reasoning', 'tool_call')
    """
    if not isinstance(regions, Mapping):
        raise TypeError(
            f"route: the spec must be a mapping of channel -> (open, close), got {type(regions).__name__}"
        )
    built: list[Region] = []
    for channel, value in regions.items():
        if not isinstance(channel, str) or not channel:
            raise ValueError(f"route: a channel name must be a non-empty str, got {channel!r}")
        pairs = value if isinstance(value, list) and value and isinstance(value[0], tuple) else [value]
        for pair in pairs:
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise ValueError(f"route: channel {channel!r}: expected (open, close), got {pair!r}")
            open_, close = pair
            built.append(
                Region(
                    channel,
                    _delims(open_, f"channel {channel!r} open"),
                    () if close is None else _delims(close, f"channel {channel!r} close"),
                )
            )
    anchors = (start_anchor,) if isinstance(start_anchor, str) else tuple(start_anchor)
    all_kinds = {c: guess_kind(c) for c in [default, *regions]}
    all_kinds.update(kinds or {})
    return RouteSpec(
        tuple(built),
        default,
        _delims(default_close, "default_close") if default_close else (),
        anchors,
        MappingProxyType(all_kinds),
        tool_format,
        name,
        initial,
    )
