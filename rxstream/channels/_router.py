"""``Router``: split a stream of text (or aligned pieces) into channel segments, outside Rx.

How it decides (SEMANTICS §8): outside every region it looks for the regions' opening
delimiters (and the default channel's closing ones, and stray closing delimiters); inside a
region only for that region's closing delimiters. The first match in the stream wins (earliest
start, then longest; on a tie the earlier rule: opens in region order, then default closes,
then stray closes). The search runs on the stop-string engines (:mod:`rxstream.text`), so text
goes out the moment no delimiter can still claim it, and the text held is at most the longest
literal delimiter that could still be under way (minus one character).

With ``spec.initial`` the stream starts inside that region, unless it begins with another
region's opening delimiter or a default closing one: until that is decided (a *start gate*), the
text is held and matched against those delimiters only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from .._piece import Piece, join_tokens
from ..text import (
    RegexRule,
    RegexStop,
    RegexStopMatcher,
    RegexStopRules,
    StopMatcher,
    make_stop_matcher,
    stop_rules_any,
)
from ..text._rules import StopRules
from ._segment import EMPTY_CAPTURES, Segment, SegmentEvent
from ._spec import Delimiter, Region, RouteSpec, SpecialToken

__all__ = ["CompiledRoute", "Router", "route_text"]

_new = tuple.__new__

_Kind = Literal["open", "default_close", "close", "stray"]
_GATE = -2  # the key of the start gate's state


@dataclass(frozen=True)
class _Rule:
    kind: _Kind
    region: int  # index into spec.regions; -1 for the default channel
    delimiter: Delimiter


class _State:
    """The delimiters watched in one state (outside regions, or inside region ``i``)."""

    __slots__ = ("by_id", "by_text", "rules")

    def __init__(self, rules: list[_Rule], aligned: bool, owner: str) -> None:
        by_text: dict[str | RegexRule, _Rule] = {}
        self.by_id: dict[int, _Rule] = {}
        for rule in rules:
            d = rule.delimiter
            if isinstance(d, SpecialToken):
                if aligned:
                    self.by_id.setdefault(d.id, rule)
                    continue
                if not d.text:
                    continue  # an unnamed special token cannot be seen in plain text
                by_text.setdefault(d.text, rule)
            else:
                by_text.setdefault(d, rule)
        self.by_text = by_text
        self.rules: StopRules | RegexStopRules | None = (
            stop_rules_any(list(by_text), owner=owner, what="delimiter") if by_text else None
        )

    def lookup(self, stop: str | RegexStop) -> _Rule:
        if isinstance(stop, str):
            return self.by_text[stop]
        for key, rule in self.by_text.items():
            if isinstance(key, RegexRule) and key.source == stop.rule:
                return rule
        raise LookupError(stop)  # pragma: no cover - the engines only report our rules


class CompiledRoute:
    """A :class:`RouteSpec` compiled once (for text and for aligned input); share it."""

    def __init__(self, spec: RouteSpec, *, owner: str = "route") -> None:
        if not isinstance(spec, RouteSpec):
            raise TypeError(f"{owner}: spec must be a RouteSpec, got {type(spec).__name__}")
        self.spec = spec
        self.owner = owner
        self._states: dict[tuple[bool, int], _State] = {}
        for aligned in (False, True):
            self._states[(aligned, -1)] = _State(self._outside_rules(), aligned, owner)
            for i, region in enumerate(spec.regions):
                rules = [_Rule("close", i, d) for d in region.close]
                self._states[(aligned, i)] = _State(rules, aligned, owner)
        self.initial = -1
        """The index of the region open at the start (``spec.initial``), or -1."""
        if spec.initial is not None:
            self.initial = next(i for i, r in enumerate(spec.regions) if r.channel == spec.initial)
            gate = [r for r in self._outside_rules() if r.kind == "default_close" or r.kind == "open"]
            gate = [r for r in gate if r.region != self.initial]
            for aligned in (False, True):
                self._states[(aligned, _GATE)] = _State(gate, aligned, owner)

    def _outside_rules(self) -> list[_Rule]:
        spec = self.spec
        rules = [_Rule("open", i, d) for i, r in enumerate(spec.regions) for d in r.open]
        rules += [_Rule("default_close", -1, d) for d in spec.default_close]
        rules += [_Rule("stray", i, d) for i, r in enumerate(spec.regions) for d in r.close]
        return rules

    def state(self, aligned: bool, region: int) -> _State:
        return self._states[(aligned, region)]


def _captures(delimiter: Delimiter, text: str) -> MappingProxyType[str, str]:
    if isinstance(delimiter, RegexRule) and delimiter.pattern.groupindex:
        m = delimiter.pattern.fullmatch(text)
        if m is not None:
            return MappingProxyType({k: v for k, v in m.groupdict().items() if v is not None})
    return MappingProxyType({})


class Router:
    """Splits one stream into :class:`Segment` items (see the module docstring).

    Args:
        spec: a :class:`RouteSpec` or a :class:`CompiledRoute`.
        prompt: the prompt the stream continues (text). It is read from after the last of the
            spec's ``start_anchor`` strings; the state at its end is the initial state (a
            prompt that ends inside ``<think>`` starts in the reasoning channel).
        aligned: the input is aligned pieces (ids known): :class:`SpecialToken` delimiters
            match by id. With plain text they match their ``text``.

    ``feed(text)`` / ``feed_piece(piece)`` return the segments decided so far, ``finish()``
    the rest. The texts of all segments are the input text exactly; with aligned input every
    id is in exactly one segment: the one where its piece's text starts (a piece with no text
    goes with the next character's segment, or with the last segment at the end).
    """

    def __init__(self, spec: RouteSpec | CompiledRoute, *, prompt: str = "", aligned: bool = False) -> None:
        compiled = spec if isinstance(spec, CompiledRoute) else CompiledRoute(spec)
        self.compiled = compiled
        self.spec = compiled.spec
        self.aligned = aligned
        self._region = -1
        self._counts: dict[str, int] = {}
        self._default_runs = 0
        self._matcher: StopMatcher | RegexStopMatcher | None = None
        self._state = compiled.state(aligned, -1)
        self._tail = ""  # text fed to the matcher and not released yet
        self._pos = 0  # characters fed
        self._out = 0  # characters assigned to segments
        self._pieces: deque[tuple[int, Piece]] = deque()  # (start, piece): tokens not in a segment yet
        self._finished = False
        self._chan = self.spec.default
        self._index = 0
        self._gating = compiled.initial >= 0  # the start gate is open (see the module docstring)
        self._gate: StopMatcher | RegexStopMatcher | None = None
        self._gate_text = ""
        if not isinstance(prompt, str):
            raise TypeError(f"{compiled.owner}: prompt must be a str, got {type(prompt).__name__}")
        if prompt:
            self._enter_prompt_state(prompt)
        self._reset_matcher()
        if self._gating:
            rules = compiled.state(aligned, _GATE).rules
            self._gate = None if rules is None else make_stop_matcher(rules, owner=compiled.owner)

    # -- state ---------------------------------------------------------------------------------
    @property
    def channel(self) -> str:
        """The channel text is routed to now."""
        return self.spec.default if self._region < 0 else self.spec.regions[self._region].channel

    @property
    def region(self) -> Region | None:
        """The region open now, or None outside every region."""
        return None if self._region < 0 else self.spec.regions[self._region]

    @property
    def held(self) -> str:
        """Text received and not yet routed (a delimiter may still start in it)."""
        return self._gate_text if self._gating else self._tail

    def take_held(self) -> tuple[int, ...]:
        """Remove and return the ids not yet in a segment (their text is held)."""
        ids = tuple(i for _, piece in self._pieces for i in piece.ids)
        self._pieces.clear()
        return ids

    def _enter_prompt_state(self, prompt: str) -> None:
        cut = 0
        for anchor in self.spec.start_anchor:
            at = prompt.rfind(anchor)
            if at >= 0:
                cut = max(cut, at + len(anchor))
        if not prompt[cut:]:
            return  # the generation starts the message (a start gate stays open)
        probe = Router(self.compiled, aligned=False)
        probe.feed(prompt[cut:])
        if probe._gating and probe._gate is not None:  # undecided when the prompt ends
            probe._gate.flush()
            probe._gate_decide(probe._gate_match(probe._gate), [])
        elif probe._gating:
            probe._gate_decide(None, [])
        self._region = probe._region
        self._gating = False

    def _reset_matcher(self) -> None:
        self._update_channel()
        self._state = self.compiled.state(self.aligned, self._region)
        rules = self._state.rules
        self._matcher = None if rules is None else make_stop_matcher(rules, owner=self.compiled.owner)
        self._tail = ""

    # -- input ---------------------------------------------------------------------------------
    def feed(self, text: str) -> list[Segment]:
        """Route more text; return the segments now decided."""
        if self._finished:
            raise ValueError(f"{self.compiled.owner}: the router has finished")
        out: list[Segment] = []
        if self._gating:
            if text:
                self._gate_feed(text, out)
            return out
        if text:
            m = self._matcher
            if m is not None and not self._tail and not self.aligned:
                # the hot path, inlined: nothing held before this text
                released = m.feed(text)
                self._pos += len(text)
                if released is text:  # nothing held or matched now: all of it is channel text
                    self._out += len(text)
                    seg = (self._chan, "chunk", text, None, None, self._index, EMPTY_CAPTURES, "", None, None)
                    out.append(_new(Segment, seg))
                    return out
                self._tail = text
                rest = self._settle(m, released, out)
                if rest:
                    self._pos -= len(rest)
                    self._route(rest, out)
                return out
            self._route(text, out)
        return out

    def feed_piece(self, piece: Piece) -> list[Segment]:
        """Route an aligned piece (text with the ids whose text it completes)."""
        if self._finished:
            raise ValueError(f"{self.compiled.owner}: the router has finished")
        out: list[Segment] = []
        if self._gating:
            gate = self.compiled.state(True, _GATE).by_id
            if piece.ids and piece.ids[0] in gate and not self._gate_text:
                self._gating = False  # a token delimiter starts the stream: routed below
                self._gate = None
                self._reset_matcher()
            elif any(t in gate or t in self._state.by_id for t in piece.ids):
                self._gate_decide(None, out)  # a token after the start: the initial region
            else:
                self._queue(self._pos + len(self._gate_text), piece)
                if piece.text:
                    self._gate_feed(piece.text, out)
                return out
        by_id = self._state.by_id
        if by_id:
            for k, tid in enumerate(piece.ids):
                rule = by_id.get(tid)
                if rule is not None:
                    self._split_at_token(piece, k, rule, out)
                    return out
        self._queue(self._pos, piece)
        if piece.text:
            self._route(piece.text, out)
        return out

    def finish(self) -> list[Segment]:
        """End of the stream: route what is held; close (or report) the open region."""
        if self._finished:
            return []
        self._finished = True
        out: list[Segment] = []
        if self._gating:
            gate = self._gate
            if gate is not None:
                gate.flush()
            self._gate_decide(self._gate_match(gate), out)
        while self._matcher is not None:
            released = self._matcher.flush()
            stop = self._matcher.stop_string
            if stop is None:
                if released:
                    self._chunk(released, out)
                break
            # a match decided only at the end (a longest literal, \Z): route the rest after it
            rest = self._matched(stop, released, out)
            if rest:
                self._pos -= len(rest)
                self._route(rest, out)
        self._tail = ""
        self._end_region(out)
        return out

    # -- the start gate ------------------------------------------------------------------------
    def _gate_match(self, gate: StopMatcher | RegexStopMatcher | None) -> tuple[_Rule, int] | None:
        """The gate's delimiter and its length if one matched at the start, else None."""
        if gate is None or not gate.stopped or gate.stop_position != 0:
            return None
        stop = gate.stop_string
        assert stop is not None
        rule = self.compiled.state(self.aligned, _GATE).lookup(stop)
        return rule, len(stop) if isinstance(stop, str) else len(stop.text)

    def _gate_feed(self, text: str, out: list[Segment]) -> None:
        self._gate_text += text
        gate = self._gate
        if gate is None:
            self._gate_decide(None, out)
        elif gate.feed(text) or gate.stopped:  # the start is decided
            self._gate_decide(self._gate_match(gate), out)

    def _gate_decide(self, match: tuple[_Rule, int] | None, out: list[Segment]) -> None:
        """End the start gate: a delimiter matched at the start, or (None) the initial region opens."""
        self._gating = False
        self._gate = None
        text, self._gate_text = self._gate_text, ""
        if match is None:
            self._region = self.compiled.initial
            self._update_channel()
            self._emit(out, self._chan, "open", "", self._index)
        else:
            rule, length = match
            self._pos += length
            self._event(rule, text[:length], out)
            text = text[length:]
        self._reset_matcher()
        if text:
            self._route(text, out)

    # -- routing -------------------------------------------------------------------------------
    def _queue(self, start: int, piece: Piece) -> None:
        if piece.ids or piece.tokens:
            self._pieces.append((start, piece))

    def _route(self, text: str, out: list[Segment]) -> None:
        while True:
            m = self._matcher
            self._pos += len(text)
            if m is None:
                self._chunk(text, out)
                return
            if self._tail:
                self._tail += text
                released = m.feed(text)
            else:
                released = m.feed(text)
                if released is text:  # the engines' fast path: nothing held, nothing matched
                    self._chunk(text, out)
                    return
                self._tail = text
            text = self._settle(m, released, out)
            if not text:
                return
            self._pos -= len(text)  # re-fed in the new state

    def _settle(self, m: StopMatcher | RegexStopMatcher, released: str, out: list[Segment]) -> str:
        """After ``m.feed`` (``_tail`` holds what it has not released): emit the released text
        and, on a match, the event; return the text after the match (to route again)."""
        stop = m.stop_string
        if stop is None:
            if released:
                self._tail = self._tail[len(released) :]
                self._chunk(released, out)
            return ""
        return self._matched(stop, released, out)

    def _matched(self, stop: str | RegexStop, released: str, out: list[Segment]) -> str:
        """A delimiter matched: emit the text before it and the event; return the text after it."""
        tail = self._tail
        if released:
            self._chunk(released, out)
        start = len(released)
        length = len(stop) if isinstance(stop, str) else len(stop.text)
        delim_text = tail[start : start + length]
        rest = tail[start + length :]
        rule = self._state.lookup(stop)
        self._event(rule, delim_text, out)
        self._reset_matcher()
        return rest

    def _split_at_token(self, piece: Piece, k: int, rule: _Rule, out: list[Segment]) -> None:
        """A piece holding a delimiter token: text before it, the token's event, then the rest."""
        d = rule.delimiter
        assert isinstance(d, SpecialToken)
        text = piece.text
        ids_before, ids_after = piece.ids[:k], piece.ids[k + 1 :]
        at = text.find(d.text) if d.text else -1
        if at >= 0:
            before, token_text, after = text[:at], d.text, text[at + len(d.text) :]
        elif ids_before and not ids_after:
            before, token_text, after = text, "", ""
        else:
            before, token_text, after = "", "", text
        if ids_before or before:
            out.extend(self.feed_piece(_with_text(before, piece.tokens_slice(0, k))))
        # the token is a hard boundary: what is held before it is text of the current channel
        if self._matcher is not None:
            released = self._matcher.flush()
            if released:
                self._chunk(released, out)
        self._tail = ""
        self._pos += len(token_text)
        self._event(rule, token_text, out, token=piece.tokens_slice(k, k + 1))
        self._reset_matcher()
        if ids_after or after:
            out.extend(self.feed_piece(_with_text(after, piece.tokens_slice(k + 1))))

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


def route_text(
    text: str | Sequence[str], spec: RouteSpec | CompiledRoute, *, prompt: str = ""
) -> list[Segment]:
    """Route a whole text (or its chunks) at once: the batch reference of :class:`Router`.

    Adjacent chunks of one channel are merged, so the result does not depend on the chunking.
    """
    router = Router(spec, prompt=prompt)
    segs: list[Segment] = []
    for chunk in [text] if isinstance(text, str) else text:
        segs += router.feed(chunk)
    segs += router.finish()
    return merge_chunks(segs)


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
