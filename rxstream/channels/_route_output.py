"""The segments a :class:`~._router.Router` emits: the channel and region state they are counted
in, the tokens of aligned input that go with their text, and :func:`merge_chunks`."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from .._piece import Piece, join_tokens
from ._route_rules import CompiledRoute, _captures, _Rule
from ._segment import EMPTY_CAPTURES, Segment, SegmentEvent
from ._spec import SpecialToken

__all__ = ["merge_chunks"]

_new = tuple.__new__


class _RouteOutput:
    """The output side of a router: which channel and region text goes to, how many runs of each
    channel there were, and the queued tokens of aligned input not in a segment yet."""

    def __init__(self, compiled: CompiledRoute, aligned: bool) -> None:
        self.compiled = compiled
        self.spec = compiled.spec
        self.aligned = aligned
        self._region = -1
        self._counts: dict[str, int] = {}
        self._default_runs = 0
        self._out = 0  # characters assigned to segments
        self._pieces: deque[tuple[int, Piece]] = deque()  # (start, piece): tokens not in a segment yet
        self._chan = self.spec.default
        self._index = 0

    def _queue(self, start: int, piece: Piece) -> None:
        if piece.ids or piece.tokens:
            self._pieces.append((start, piece))

    # -- output --------------------------------------------------------------------------------
    def _take_tokens(self, end: int | None, token: Piece | None = None) -> Piece | None:
        """The queued tokens whose text starts before ``end`` (all with None), then ``token``;
        None for text input."""
        if not self.aligned:
            return None
        parts: list[Piece] = []
        pieces = self._pieces
        while pieces and (end is None or pieces[0][0] < end):
            parts.append(pieces.popleft()[1])
        if token is not None:
            parts.append(token)
        return join_tokens("", parts)

    def _emit(
        self,
        out: list[Segment],
        channel: str,
        event: SegmentEvent,
        text: str,
        index: int,
        *,
        captures: MappingProxyType[str, str] | None = None,
        reason: str = "",
        last: bool = False,
        token: Piece | None = None,
    ) -> None:
        self._out += len(text)
        due = self._take_tokens(None if last or token is not None else self._out, token)
        if event == "chunk" and not text and (due is None or not due.size):
            return
        captures = captures if captures is not None else MappingProxyType({})
        if due is None:
            out.append(Segment(channel, event, text, None, None, index, captures, reason))
        else:
            out.append(_segment(channel, event, text, index, due, captures, reason))

    def _chunk(self, text: str, out: list[Segment]) -> None:
        """Channel text (the hot path: one call per routed item)."""
        self._out += len(text)
        if self.aligned:
            due = self._take_tokens(self._out)
            assert due is not None
            if not text and not due.size:
                return
            out.append(_segment(self._chan, "chunk", text, self._index, due))
            return
        out.append(
            _new(
                Segment, (self._chan, "chunk", text, None, None, self._index, EMPTY_CAPTURES, "", None, None)
            )
        )

    def _update_channel(self) -> None:
        if self._region < 0:
            self._chan, self._index = self.spec.default, self._default_runs
        else:
            self._chan = self.spec.regions[self._region].channel
            self._index = self._counts.get(self._chan, 0)

    def _event(self, rule: _Rule, text: str, out: list[Segment], token: Piece | None = None) -> None:
        if text:
            self._last = text[-1]
        spec = self.spec
        if rule.kind == "open":
            region = spec.regions[rule.region]
            self._region = rule.region
            index = self._counts.get(region.channel, 0)
            self._emit(
                out,
                region.channel,
                "open",
                text,
                index,
                captures=_captures(rule.delimiter, text),
                token=token,
            )
        elif rule.kind == "close":
            region = spec.regions[rule.region]
            index = self._counts.get(region.channel, 0)
            self._emit(
                out,
                region.channel,
                "close",
                text,
                index,
                captures=_captures(rule.delimiter, text),
                token=token,
            )
            self._counts[region.channel] = index + 1
            self._region = -1
        elif rule.kind == "default_close":
            self._emit(out, spec.default, "close", text, self._default_runs, token=token)
            self._default_runs += 1
        else:
            channel = spec.regions[rule.region].channel
            self._emit(
                out,
                spec.default,
                "malformed",
                text,
                self._default_runs,
                reason=f"{text!r} closes a {channel!r} region, but none is open",
                token=token,
            )

    def _end_region(self, out: list[Segment]) -> None:
        if self._region < 0:
            if self._pieces:
                self._emit(out, self.spec.default, "chunk", "", self._default_runs, last=True)
            return
        region = self.spec.regions[self._region]
        index = self._counts.get(region.channel, 0)
        if region.close and not region.close_at_end:
            closes = " or ".join(repr(d.text if isinstance(d, SpecialToken) else d) for d in region.close[:3])
            reason = f"the {region.channel!r} region is not closed: no {closes} before the end"
            self._emit(out, region.channel, "malformed", "", index, reason=reason, last=True)
        else:
            self._emit(out, region.channel, "close", "", index, last=True)
        self._counts[region.channel] = index + 1
        self._region = -1


def merge_chunks(segments: Sequence[Segment]) -> list[Segment]:
    """Merge adjacent ``chunk`` segments of one channel and region (texts and ids joined)."""
    out: list[Segment] = []
    for s in segments:
        if out and s.event == "chunk":
            p = out[-1]
            if p.event == "chunk" and p.channel == s.channel and p.region == s.region:
                if p.ids is None or s.ids is None:
                    out[-1] = Segment(p.channel, "chunk", p.text + s.text, None, None, p.region)
                else:
                    joined = join_tokens("", [_segment_tokens(p), _segment_tokens(s)], logprobs_default=True)
                    out[-1] = _segment(p.channel, "chunk", p.text + s.text, p.region, joined)
                continue
        out.append(s)
    return out


def _with_text(text: str, tokens: Piece) -> Piece:
    return Piece(text, tokens.ids, tokens.logprobs, tokens.top_logprobs, tokens.tokens)


def _segment(
    channel: str,
    event: SegmentEvent,
    text: str,
    index: int,
    due: Piece,
    captures: Mapping[str, str] = EMPTY_CAPTURES,
    reason: str = "",
) -> Segment:
    """A segment of aligned input carrying the tokens of ``due`` (logprobs only when it has tokens)."""
    lps = due.logprobs if due.size else None
    fields = (channel, event, text, due.ids, lps, index, captures, reason, due.top_logprobs, due.tokens)
    return _new(Segment, fields)


def _segment_tokens(seg: Segment) -> Piece:
    return Piece("", seg.ids or (), seg.logprobs, seg.top_logprobs, seg.tokens)
