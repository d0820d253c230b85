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

from collections.abc import Sequence

from .._piece import Piece
from ..text import (
    RegexStop,
    RegexStopMatcher,
    StopMatcher,
    make_stop_matcher,
)
from ._route_output import _RouteOutput, _with_text, merge_chunks
from ._route_rules import _GATE, CompiledRoute, _Rule
from ._segment import EMPTY_CAPTURES, Segment
from ._spec import Region, RouteSpec, SpecialToken

__all__ = ["CompiledRoute", "Router", "merge_chunks", "route_text"]

_new = tuple.__new__


class Router(_RouteOutput):
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
        super().__init__(compiled, aligned)
        self._matcher: StopMatcher | RegexStopMatcher | None = None
        self._state = compiled.state(aligned, -1)
        self._tail = ""  # text fed to the matcher and not released yet
        self._pos = 0  # characters fed
        self._last = ""  # the last character of the last delimiter (the next state's context)
        self._finished = False
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
    def holding(self) -> bool:
        """Whether text is held (cheaper than ``bool(held)``)."""
        return bool(self._gate_text if self._gating else self._tail)

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
        # the text routed so far is the context of the next state's delimiters: ``\A`` and ``^``
        # mean the start of the stream, not of each state
        context = self._last if self._pos > 0 else ""
        self._matcher = (
            None if rules is None else make_stop_matcher(rules, owner=self.compiled.owner, context=context)
        )
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
