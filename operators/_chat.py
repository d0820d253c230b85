"""The ``chat_pipeline`` operator: a chat generation's token ids to its answer, reasoning and tool
calls, routed by a :class:`~rxstream.chat.ChatPlan` (what ``rxstream serve`` and ``rxstream chat``
run)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Literal

import reactivex
from reactivex import Observable
from reactivex import operators as ops

from rxstream._finish import FinishCallback
from rxstream._piece import Piece, join_tokens
from rxstream.channels import (
    Router,
    RouteSpec,
    Segment,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallInvalid,
    ToolCallStart,
)
from rxstream.chat import Bucket, ChatItem, ChatPlan, TextDelta, TokenUsage
from rxstream.text import (
    RegexReplaceRules,
    RegexStopRules,
    ReplaceRules,
    StopRules,
    replace_rules_any,
    stop_rules_any,
)

from ._channels import channels
from ._chat_usage import UsageCounter, reporting_usage
from ._detokenize import detokenize
from ._replace import replace
from ._route import route
from ._sink import building, done_building, register_state, stage_being_built
from ._stop import stop
from ._token_ids import TokenItem
from ._tool_calls import tool_calls

__all__ = ["chat_pipeline"]


class _Spans:
    """Where the text of each routed piece lies in the routed text (one subscription's)."""

    __slots__ = ("counter", "pieces", "pos", "taken")

    def __init__(self, counter: UsageCounter | None = None) -> None:
        self.counter = counter  # counts each segment's ids in a bucket (usage asked)
        self.pieces: deque[tuple[int, int, Piece]] = deque()  # (start, end, piece) with tokens
        self.pos = 0  # characters fed to the router
        self.taken = 0  # characters of the segments out of it

    def record(self, piece: Piece) -> Piece:
        end = self.pos + len(piece.text)
        if piece.size:
            self.pieces.append((self.pos, end, piece))
        self.pos = end
        return piece

    def whole(self, seg: Segment, cut: int) -> Segment:
        """``seg`` (its text less ``cut`` leading characters) with only the tokens whose text it
        holds whole: a token whose text runs into a delimiter, or starts in whitespace dropped
        after a region, is left out (SEMANTICS §5: as a token a stop cuts)."""
        start = self.taken
        self.taken += len(seg.text)
        n = len(seg.ids) if seg.ids else (len(seg.tokens) if seg.tokens is not None else 0)
        parts: list[tuple[int, int, Piece]] = []
        while n > 0 and self.pieces:  # the router keeps every piece's tokens together, in order
            parts.append(self.pieces.popleft())
            n -= parts[-1][2].size
        text = seg.text[cut:]
        if self.counter is not None:  # ids whose text starts in the dropped whitespace: framing
            lo = start + cut
            self.counter.segment(seg, sum(p.size for a, _, p in parts if a < lo) if cut else 0)
        if not parts:
            return seg if not cut else seg._replace(text=text)
        lo, hi = start + cut, self.taken
        kept = [p for a, b, p in parts if lo <= a and b <= hi]
        if len(kept) == len(parts):
            return seg if not cut else seg._replace(text=text)
        tokens = join_tokens(text, kept)
        return seg._replace(
            text=text,
            ids=tokens.ids,
            logprobs=tokens.logprobs if tokens.size else None,
            top_logprobs=tokens.top_logprobs if tokens.size else None,
            tokens=tokens.tokens if tokens.size else None,
        )


class _Trim:
    """Whether the answer's framing whitespace is being dropped now (one subscription's)."""

    __slots__ = ("content", "spans", "trimming")

    def __init__(self, content: str, spans: _Spans | None) -> None:
        self.content = content
        self.spans = spans
        self.trimming = False

    def step(self, seg: Segment) -> Segment | None:
        cut = 0
        if seg.channel != self.content:
            if seg.event in ("close", "malformed"):
                self.trimming = True
        elif self.trimming and seg.event == "chunk":
            cut = len(seg.text) - len(seg.text.lstrip())
            if cut < len(seg.text):
                self.trimming = False
        if self.spans is not None:
            seg = self.spans.whole(seg, cut)
        elif cut:
            seg = seg._replace(text=seg.text[cut:])
        if cut and not seg.text:
            return None
        return seg


def _kept(seg: Segment | None) -> bool:
    return seg is not None


def _trim_after_regions(
    content: str, spans: _Spans | None = None
) -> Callable[[reactivex.Observable[Segment]], reactivex.Observable[Segment]]:
    """Drop the whitespace that separates a reasoning or tool-call region from the answer text
    after it (``</think>\n\n``, the line breaks between and after tool calls): it is the format's
    framing, not part of the answer. Answer text that follows keeps everything from its first
    other character on.

    With ``spans`` (aligned input, recorded as it went into the router), each text segment keeps
    only the tokens whose text it holds whole (see :meth:`_Spans.whole`)."""
    joins = stage_being_built()  # a checkpoint's snapshot holds each subscription's _Trim

    def apply(source: reactivex.Observable[Segment]) -> reactivex.Observable[Segment]:
        def per_subscription(_scheduler: Any) -> reactivex.Observable[Segment]:
            trim = _Trim(content, spans)
            register_state(trim, per_subscription, joins)
            mapped: reactivex.Observable[Segment | None] = source.pipe(ops.map(trim.step))
            trimmed: reactivex.Observable[Segment] = mapped.pipe(ops.filter(_kept))  # type: ignore[arg-type]
            return trimmed

        return reactivex.defer(per_subscription)

    return apply


def _routed(
    text: reactivex.Observable[Any],
    spec: RouteSpec,
    prompt: str,
    content: str,
    aligned: bool,
    counter: UsageCounter | None = None,
) -> reactivex.Observable[Segment]:
    """``text`` routed by ``spec``, the answer's framing whitespace dropped (aligned: each text
    segment with the tokens it holds whole; with ``counter``, each segment's ids counted)."""

    joins = stage_being_built()  # the route and the spans of each subscription join this stage

    def per_subscription(_scheduler: Any) -> reactivex.Observable[Segment]:
        token = building(joins)
        try:
            spans = _Spans(counter) if aligned else None
            if spans is not None:
                register_state(spans, per_subscription, joins)
            source = text.pipe(ops.map(spans.record)) if spans is not None else text
            return source.pipe(route(spec, prompt=prompt), _trim_after_regions(content, spans))
        finally:
            done_building(token)

    return reactivex.defer(per_subscription)


def _delta(kind: Literal["content", "reasoning"]) -> Callable[[str | Piece], TextDelta]:
    """A channel's text items (a ``str``, or an aligned piece) as :class:`TextDelta` values."""

    def make(item: str | Piece) -> TextDelta:
        if isinstance(item, Piece):
            return TextDelta(kind, item.text, item)
        return TextDelta(kind, item)

    return make


def _deltas(
    kind: Literal["content", "reasoning"], pieces: bool
) -> Callable[[Observable[Any]], Observable[TextDelta]]:
    """A channel's text items as :class:`TextDelta` values; without ``pieces`` (aligned only to
    count the tokens), the text alone, as the unaligned pipeline gives it (no empty deltas)."""
    if pieces:
        return ops.map(_delta(kind))

    def text_of(item: str | Piece) -> str:
        return item.text if isinstance(item, Piece) else item

    def apply(items: Observable[Any]) -> Observable[TextDelta]:
        texts: Observable[str] = items.pipe(ops.map(text_of), ops.filter(bool))
        return texts.pipe(ops.map(_delta(kind)))

    return apply


def _chunk_piece(seg: Segment) -> Piece | None:
    """A channel's text with its tokens (aligned input): ``chunk`` segments only. The tokens of a
    delimiter (``open``, ``close``, ``malformed``) are left out: their text is no channel's text."""
    if seg.event != "chunk":
        return None
    if not seg.text and not seg.ids and not seg.tokens:
        return None
    return Piece(seg.text, seg.ids or (), seg.logprobs, seg.top_logprobs, seg.tokens)


def _channel_pieces(segments: reactivex.Observable[Segment]) -> reactivex.Observable[Piece]:
    """The aligned text of one channel's segments (see :func:`_chunk_piece`)."""

    def kept(piece: Piece | None) -> bool:
        return piece is not None

    mapped: reactivex.Observable[Piece | None] = segments.pipe(ops.map(_chunk_piece))
    pieces: reactivex.Observable[Piece] = mapped.pipe(ops.filter(kept))  # type: ignore[arg-type]
    return pieces


def chat_pipeline(
    tokenizer: Any,
    plan: ChatPlan,
    *,
    prompt_ids: Sequence[int] = (),
    stop: StopRules | RegexStopRules | Sequence[Any] = (),
    replace: ReplaceRules | RegexReplaceRules | Sequence[Any] = (),
    on_finish: FinishCallback | None = None,
    usage: Callable[[TokenUsage], None] | None = None,
) -> Callable[[Observable[TokenItem]], Observable[ChatItem]]:
    """The routed counterpart of :func:`text_pipeline`: the token ids of one chat generation to
    its items, routed by ``plan`` (:func:`rxstream.chat.plan_chat`; it must have a route) --
    :class:`~rxstream.chat.TextDelta` items (the answer, the reasoning) and, with tools, the
    tool-call events (``ToolCallStart``, ``ToolCallDelta``, ``ToolCallEnd``, ``ToolCallInvalid``)::

        ids -> detokenize -> route(plan.spec, prompt=...) -> channels -> answer: stop -> replace
                                                                      -> reasoning
                                                                      -> tool calls: tool_calls

    ``stop`` and ``replace`` apply to the answer only: a stop string inside the reasoning or a
    tool call does not cut the answer; a stop in the answer ends the whole generation (the
    upstream is disposed, which cancels it). ``on_finish`` gets the answer's ``stop`` report.

    With ``plan.logprobs`` the ids are :class:`~rxstream.Piece` items (``generate(...,
    logprobs=k)``) and each :class:`TextDelta` carries the tokens of its text (``piece``): the
    answer's after ``stop`` and ``replace`` (a token a stop cuts, even in part, is in none), the
    reasoning's as routed. The tokens of delimiters (``<think>``, ``</think>``, ...), of tool
    calls and of the whitespace dropped after a region are in no delta.

    ``usage`` is called once per subscription with a :class:`~rxstream.chat.TokenUsage`: every id
    the pipeline received, in exactly one bucket (answer, reasoning, tool calls, delimiters;
    SEMANTICS §10), before the completion or the error is passed on, or when the subscription is
    disposed. Counting routes the text aligned; without ``plan.logprobs`` the items stay the
    same as without ``usage`` (text deltas without pieces), only their cuts may differ.

    Marble diagram, with a byte-level tokenizer whose id ``n`` is the byte ``n`` and a route with
    ``<t>...</t>`` reasoning (the answer waits at ``<`` until ``</t>`` or other text decides)::

        source:   -a-b-c-|    a=[60, 116, 62, 104, 109], b=[60, 47, 116, 62, 72], c=[105]
        operator: chat_pipeline(tokenizer, ChatPlan(route_spec({"reasoning": ("<t>", "</t>")})))
        result:   -a-b-c-|    a=TextDelta("reasoning", "hm"), b=TextDelta("content", "H")
        ...                   c=TextDelta("content", "i")

    Raises:
        ValueError: the plan has no route; bad ``stop`` or ``replace`` rules.
        TypeError: ``usage`` is not callable.
    """
    spec = plan.spec
    if spec is None:
        raise ValueError("chat_pipeline: the plan has no route")
    stops = stop_rules_any(stop, owner="stop")
    rules = replace_rules_any(replace, owner="replace")
    if usage is not None and not callable(usage):
        raise TypeError(f"chat_pipeline: usage must be callable, got {type(usage).__name__}")
    report = usage
    buckets = _buckets(plan, spec)
    initial = spec.initial if spec.initial is not None and not plan.route_prompt else spec.default
    if report is not None and plan.route_prompt:  # the state at the prompt's end
        initial = Router(spec, prompt=plan.route_prompt).channel

    def _chat_pipeline(ids: Observable[TokenItem]) -> Observable[ChatItem]:
        if report is None:
            return _routed_chat(ids, tokenizer, prompt_ids, plan, spec, stops, rules, on_finish)

        def build(counter: UsageCounter) -> Observable[ChatItem]:
            return _routed_chat(ids, tokenizer, prompt_ids, plan, spec, stops, rules, on_finish, counter)

        return reporting_usage(build, lambda: UsageCounter(buckets, spec.default, initial), report)

    return _chat_pipeline


def _buckets(plan: ChatPlan, spec: RouteSpec) -> dict[str, Bucket]:
    """The bucket of each channel the pipeline shows (the others' text counts as delimiters)."""
    out: dict[str, Bucket] = {}
    if plan.parse_tools and (tool := plan.channel("tool_call")) is not None:
        out[tool] = "tool_calls"
    if (reasoning := plan.channel("reasoning")) is not None:
        out[reasoning] = "reasoning"
    out[plan.channel("content") or spec.default] = "content"
    return out


def _routed_chat(
    ids: Observable[TokenItem],
    tokenizer: Any,
    prompt_ids: Sequence[int],
    plan: ChatPlan,
    spec: RouteSpec,
    stops: StopRules | RegexStopRules,
    rules: ReplaceRules | RegexReplaceRules,
    on_finish: FinishCallback | None,
    counter: UsageCounter | None = None,
) -> Observable[ChatItem]:
    aligned = plan.logprobs or counter is not None
    if counter is not None:
        ids = ids.pipe(ops.do_action(on_next=counter.enter))
    text: reactivex.Observable[Any] = ids.pipe(
        detokenize(
            tokenizer,
            prompt_ids=list(prompt_ids),
            skip_special_tokens=plan.skip_special_tokens,
            aligned=aligned,
        )
    )
    if plan.opening:
        text = text.pipe(ops.start_with(Piece(plan.opening) if aligned else plan.opening))
    content_channel = plan.channel("content") or spec.default
    reasoning_channel = plan.channel("reasoning")
    tool_channel = plan.channel("tool_call") if plan.parse_tools else None
    names = [c for c in (content_channel, reasoning_channel, tool_channel) if c is not None]
    views = _routed(text, spec, plan.route_prompt, content_channel, aligned, counter).pipe(channels(*names))
    answer: reactivex.Observable[Any] = (
        _channel_pieces(views.segments(content_channel)) if aligned else views[content_channel]
    )
    if stops.strings:
        answer = answer.pipe(stop(stops, on_finish=on_finish))
    if rules.pairs:
        answer = answer.pipe(replace(rules))
    streams: list[reactivex.Observable[Any]] = [answer.pipe(_deltas("content", plan.logprobs))]
    if reasoning_channel is not None:
        thoughts: reactivex.Observable[Any] = (
            _channel_pieces(views.segments(reasoning_channel)) if aligned else views[reasoning_channel]
        )
        streams.append(thoughts.pipe(_deltas("reasoning", plan.logprobs)))
    if tool_channel is not None:
        wanted = (ToolCallStart, ToolCallDelta, ToolCallEnd, ToolCallInvalid)
        calls = views.segments(tool_channel).pipe(
            tool_calls(list(plan.tools) or None, format=spec.tool_format or "json", channel=tool_channel),
            ops.filter(lambda item: isinstance(item, wanted)),
        )
        streams.append(calls)
        merged = reactivex.merge(*streams)
        if not plan.parallel_tool_calls:
            merged = merged.pipe(
                ops.take_while(lambda item: not isinstance(item, ToolCallEnd), inclusive=True)
            )
        return merged
    return reactivex.merge(*streams)
