"""Channels in the faces: a chat's reasoning, answer and tool calls, split from one generation.

The server's chat completions and ``rxstream chat`` both build their pipeline here::

    ids -> detokenize -> route(spec, prompt=...) -> channels -> answer: stop -> replace
                                                             -> reasoning
                                                             -> tool calls: tool_calls(tools)

- :func:`resolve_reasoning_format` -- the ``--reasoning-format`` option: ``auto`` (detected
  from the chat template), ``none``, or a preset name (:data:`rxstream.channels.PRESETS`).
- :func:`plan_chat` -- the prompt of a chat request and how its output is routed
  (:class:`ChatPlan`): tools rendered by the model's template, or the fallback prompt; a forced
  tool call opened in the prompt.
- :func:`channel_stream` -- the items of one generation: :class:`TextDelta` (answer or
  reasoning text; with ``ChatPlan.logprobs``, with the tokens it holds) and the tool-call
  events of :func:`rxstream.operators.tool_calls`.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

import reactivex
from reactivex import operators as ops

from .._finish import FinishCallback
from .._generative_model import GenerativeModel
from .._piece import Piece, join_tokens
from ..channels import PRESETS, ChannelKind, Region, RouteSpec, Segment, preset
from ..text import RegexReplaceRules, RegexStopRules, ReplaceRules, StopRules
from ._tool_prompt import fallback_messages, renders_tools
from ._tools import ToolChoice

__all__ = [
    "REASONING_FORMATS",
    "ChatPlan",
    "TextDelta",
    "UnsupportedChoice",
    "channel_stream",
    "check_reasoning_format",
    "detect_reasoning_format",
    "plan_chat",
    "resolve_reasoning_format",
    "tool_opening",
]

REASONING_FORMATS: tuple[str, ...] = ("auto", "none", *sorted(PRESETS))
"""The values of ``--reasoning-format`` (preset aliases such as ``gpt-oss`` are accepted too)."""

_SPECIAL_DELIMITERS = frozenset({"mistral", "harmony", "llama3"})
"""Formats whose delimiters are special tokens (``[THINK]``, ``<|channel|>``, ``<|python_tag|>``):
their text is kept by the detokenizer (``skip_special_tokens=False``) so the router can see it."""

_HERMES_TOOL = Region("tool_call", ("<tool_call>",), ("</tool_call>",))


def detect_reasoning_format(template: str | None) -> str | None:
    """The preset a chat template's source points to, or None.

    ``<|channel|>`` -> ``harmony``; ``[THINK]`` or ``[TOOL_CALLS]`` -> ``mistral``; ``<think>``
    -> ``qwen3-coder`` (with ``<function=``), ``qwen3`` (with ``<tool_call>``), else
    ``deepseek-r1``; ``<tool_call>`` alone -> ``hermes`` (``qwen3-coder`` with ``<function=``);
    ``<|python_tag|>`` -> ``llama3``.
    """
    if not template:
        return None
    if "<|channel|>" in template:
        return "harmony"
    if "[THINK]" in template or "[TOOL_CALLS]" in template:
        return "mistral"
    tool_call = "<tool_call>" in template
    if tool_call and "<function=" in template:
        return "qwen3-coder"
    if "<think>" in template:
        return "qwen3" if tool_call else "deepseek-r1"
    if tool_call:
        return "hermes"
    if "<|python_tag|>" in template:
        return "llama3"
    return None


def resolve_reasoning_format(
    option: str | None, model: Any, *, owner: str = "--reasoning-format"
) -> str | None:
    """The preset name to route a chat with, or None (no channels).

    ``option``: ``"auto"`` (or None): detected from the model's ``chat_template``; ``"none"``;
    a preset name or alias.

    Raises:
        ValueError: an unknown value (a one-line message naming ``owner`` and the choices).
    """
    if option is None or option == "auto":
        template = getattr(model, "chat_template", None)
        return detect_reasoning_format(template if isinstance(template, str) else None)
    if option == "none":
        return None
    return check_reasoning_format(option, owner=owner)


def check_reasoning_format(option: str, *, owner: str = "--reasoning-format") -> str:
    """``option`` checked: ``auto``, ``none``, or a preset's canonical name.

    Raises:
        ValueError: an unknown value (one line, with the choices).
    """
    if option in ("auto", "none"):
        return option
    try:
        return preset(option).name
    except (ValueError, TypeError):
        raise ValueError(f"{owner} must be one of {', '.join(REASONING_FORMATS)}, got {option!r}") from None


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Text of one channel: ``"content"`` (the answer) or ``"reasoning"``.

    ``piece``: with log-probabilities asked (``ChatPlan.logprobs``), the text as an aligned
    :class:`~rxstream.Piece` with the tokens it holds (SEMANTICS §5: after the answer's ``stop``
    and ``replace``; never a delimiter's tokens), else None.
    """

    kind: Literal["content", "reasoning"]
    text: str
    piece: Piece | None = None


@dataclass(frozen=True)
class ChatPlan:
    """How one chat's output is routed.

    Attributes:
        spec: the route; None: no channels (the plain text pipeline, as before channels existed).
        route_prompt: the prompt text the router starts from (its state at the end is the initial
            state: a template that opens ``<think>`` starts in the reasoning channel).
        opening: text appended to the generation prompt that opens a tool call
            (``tool_choice`` ``required`` or named); it is fed to the router ahead of the
            generated text, so the tool-call parser sees the whole call.
        tools: the tools calls are checked against (empty: any name, no schema).
        parse_tools: whether tool calls are parsed (with tools given, or for ``rxstream chat``
            when the format has a tool-call region).
        native_tools: whether the model's chat template rendered the tools (else the fallback
            prompt of :mod:`._tool_prompt` did).
        skip_special_tokens: what the detokenizer does with special tokens (False for formats
            whose delimiters are special tokens).
        parallel_tool_calls: False: the generation ends when the first tool call is complete.
        logprobs: the generated items are pieces with log-probabilities (the request asks for
            them): the text is routed aligned, and each :class:`TextDelta` carries its tokens.
    """

    spec: RouteSpec | None
    route_prompt: str = ""
    opening: str = ""
    tools: tuple[Mapping[str, Any], ...] = ()
    parse_tools: bool = False
    native_tools: bool = False
    skip_special_tokens: bool = True
    parallel_tool_calls: bool = True
    logprobs: bool = False

    def channel(self, kind: ChannelKind) -> str | None:
        """The channel of ``kind`` in the route (None without a route or such a channel)."""
        return None if self.spec is None else self.spec.channel_of(kind)

    @property
    def has_reasoning(self) -> bool:
        """Whether the route has a reasoning channel (then responses carry ``reasoning_content``)."""
        return self.channel("reasoning") is not None


def _tool_spec(base: RouteSpec | None, tools_active: bool, native: bool) -> RouteSpec | None:
    """The route for a chat: the format's preset; with tool calls parsed, a tool-call region of
    the format the prompt asked for (``native``: the preset's own, as when the template rendered
    the tools; else Hermes, as the fallback prompt asks); without, no tool-call region (text that
    looks like a call is answer text)."""
    kinds: dict[str, ChannelKind]
    if base is None:
        if not tools_active:
            return None
        kinds = {"content": "content", "tool_call": "tool_call"}
        return RouteSpec((_HERMES_TOOL,), kinds=MappingProxyType(kinds), tool_format="json", name="tools")
    has_tool_region = base.channel_of("tool_call") is not None
    if tools_active and native and has_tool_region:
        return base
    others = tuple(r for r in base.regions if base.kind(r.channel) != "tool_call")
    kinds = dict(base.kinds)
    if not tools_active:
        if not has_tool_region:
            return base
        return RouteSpec(
            others,
            base.default,
            base.default_close,
            base.start_anchor,
            MappingProxyType(kinds),
            None,
            base.name,
        )
    kinds["tool_call"] = "tool_call"
    return RouteSpec(
        (*others, _HERMES_TOOL),
        base.default,
        base.default_close,
        base.start_anchor,
        MappingProxyType(kinds),
        "json",
        f"{base.name}+hermes",
    )


class UnsupportedChoice(ValueError):
    """A ``tool_choice`` the route's tool format cannot force."""


def tool_opening(spec: RouteSpec, choice: ToolChoice) -> str:
    """The text that opens a tool call at the start of the answer (``required``), and names its
    function (named choice); ``""`` for ``auto``/``none``.

    Raises:
        UnsupportedChoice: the format's tool-call region has no literal opening delimiter.
    """
    if choice.mode not in ("required", "named"):
        return ""
    fmt = spec.tool_format or "json"
    named = choice.mode == "named"
    name = choice.name or ""
    if fmt == "harmony":
        head = "<|channel|>commentary to=functions."
        return head + (f"{name} <|constrain|>json<|message|>" if named else "")
    channel = spec.channel_of("tool_call")
    region = next(r for r in spec.regions if r.channel == channel)
    opener = next((d for d in region.open if isinstance(d, str)), None)
    if opener is None:
        raise UnsupportedChoice(f"tool_choice {choice.mode!r} is not supported for the {spec.name!r} format")
    head = opener + ("\n" if opener == "<tool_call>" else "")
    if not named:
        return head
    quoted = json.dumps(name)
    prefix = {
        "json": f'{{"name": {quoted}, "arguments": ',
        "json-list": f'[{{"name": {quoted}, "arguments": ',
        "llama3": f'{{"name": {quoted}, "parameters": ',
        "xml": f"<function={name}>\n",
    }[fmt]
    return head + prefix


def _decode(tokenizer: Any, ids: Sequence[int]) -> str:
    try:
        return str(tokenizer.decode(list(ids), skip_special_tokens=False))
    except TypeError:  # a tokenizer whose decode takes the ids only (tiktoken)
        return str(tokenizer.decode(list(ids)))


def plan_chat(
    model: GenerativeModel,
    messages: Sequence[Mapping[str, Any]],
    *,
    reasoning_format: str | None,
    tools: Sequence[Mapping[str, Any]] = (),
    tool_choice: ToolChoice | None = None,
    parallel_tool_calls: bool = True,
    parse_tool_calls: bool = False,
) -> tuple[list[int], ChatPlan]:
    """The prompt ids of a chat and how to route its generation (blocking: run it off the loop).

    Args:
        model: the served model; its optional ``chat_template`` and ``render_chat`` are used
            when present (see :class:`~rxstream.GenerativeModel`).
        messages: checked chat messages (assistant ``tool_calls`` with decoded arguments,
            ``tool`` messages).
        reasoning_format: a preset name, or None (see :func:`resolve_reasoning_format`).
        tools: the request's tools; tool_choice: what it asks of them (``none`` without tools).
        parse_tool_calls: parse the tool calls the format writes even without ``tools`` (no
            tools in the prompt; calls of any name): what ``rxstream chat`` shows.

    Raises:
        UnsupportedChoice: a forced tool call the format cannot open.
        Exception: whatever the chat template or the tokenizer raise.
    """
    choice = tool_choice or ToolChoice("none")
    active = tuple(tools) if tools and choice.mode != "none" else ()
    template = getattr(model, "chat_template", None)
    render: Callable[..., str] | None = getattr(model, "render_chat", None)
    own = renders_tools(template if isinstance(template, str) else None) and callable(render)
    native = bool(active) and own
    msgs = [dict(m) for m in messages] if own else fallback_messages(messages, active)
    base = preset(reasoning_format) if reasoning_format else None
    parse = bool(active) or (
        parse_tool_calls and base is not None and base.channel_of("tool_call") is not None
    )
    spec = _tool_spec(base, parse, native or not active)
    if spec is None:
        return list(model.encode_chat(msgs, add_generation_prompt=True)), ChatPlan(None)
    opening = tool_opening(spec, choice) if active else ""
    if callable(render):
        text = render(msgs, add_generation_prompt=True, **({"tools": list(active)} if native else {}))
        ids = list(model.encode(text + opening))
    else:
        ids = list(model.encode_chat(msgs, add_generation_prompt=True))
        text = _decode(model.tokenizer, ids)
        if opening:
            ids += list(model.encode(opening))
    name = reasoning_format or ""
    return ids, ChatPlan(
        spec,
        route_prompt=text if spec.start_anchor else "",
        opening=opening,
        tools=active,
        parse_tools=parse,
        native_tools=native,
        skip_special_tokens=name not in _SPECIAL_DELIMITERS,
        parallel_tool_calls=parallel_tool_calls,
    )


class _Spans:
    """Where the text of each routed piece lies in the routed text (one subscription's)."""

    __slots__ = ("pieces", "pos", "taken")

    def __init__(self) -> None:
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


def _trim_after_regions(
    content: str, spans: _Spans | None = None
) -> Callable[[reactivex.Observable[Segment]], reactivex.Observable[Segment]]:
    """Drop the whitespace that separates a reasoning or tool-call region from the answer text
    after it (``</think>\n\n``, the line breaks between and after tool calls): it is the format's
    framing, not part of the answer. Answer text that follows keeps everything from its first
    other character on.

    With ``spans`` (aligned input, recorded as it went into the router), each text segment keeps
    only the tokens whose text it holds whole (see :meth:`_Spans.whole`)."""

    def apply(source: reactivex.Observable[Segment]) -> reactivex.Observable[Segment]:
        def per_subscription(_scheduler: Any) -> reactivex.Observable[Segment]:
            trimming = False

            def step(seg: Segment) -> Segment | None:
                nonlocal trimming
                cut = 0
                if seg.channel != content:
                    if seg.event in ("close", "malformed"):
                        trimming = True
                elif trimming and seg.event == "chunk":
                    cut = len(seg.text) - len(seg.text.lstrip())
                    if cut < len(seg.text):
                        trimming = False
                if spans is not None:
                    seg = spans.whole(seg, cut)
                elif cut:
                    seg = seg._replace(text=seg.text[cut:])
                if cut and not seg.text:
                    return None
                return seg

            def kept(seg: Segment | None) -> bool:
                return seg is not None

            mapped: reactivex.Observable[Segment | None] = source.pipe(ops.map(step))
            trimmed: reactivex.Observable[Segment] = mapped.pipe(ops.filter(kept))  # type: ignore[arg-type]
            return trimmed

        return reactivex.defer(per_subscription)

    return apply


def _routed(
    text: reactivex.Observable[Any], spec: RouteSpec, prompt: str, content: str, aligned: bool
) -> reactivex.Observable[Segment]:
    """``text`` routed by ``spec``, the answer's framing whitespace dropped (aligned: each text
    segment with the tokens it holds whole)."""
    from rxstream.operators import route

    def per_subscription(_scheduler: Any) -> reactivex.Observable[Segment]:
        spans = _Spans() if aligned else None
        source = text.pipe(ops.map(spans.record)) if spans is not None else text
        return source.pipe(route(spec, prompt=prompt), _trim_after_regions(content, spans))

    return reactivex.defer(per_subscription)


def _delta(kind: Literal["content", "reasoning"]) -> Callable[[str | Piece], TextDelta]:
    """A channel's text items (a ``str``, or an aligned piece) as :class:`TextDelta` values."""

    def make(item: str | Piece) -> TextDelta:
        if isinstance(item, Piece):
            return TextDelta(kind, item.text, item)
        return TextDelta(kind, item)

    return make


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


def channel_stream(
    ids: reactivex.Observable[int],
    tokenizer: Any,
    prompt_ids: Sequence[int],
    plan: ChatPlan,
    *,
    stop: StopRules | RegexStopRules | Sequence[Any] = (),
    replace: ReplaceRules | RegexReplaceRules | Sequence[Any] = (),
    on_finish: FinishCallback | None = None,
) -> reactivex.Observable[Any]:
    """The items of one chat generation routed by ``plan`` (which must have a route):
    :class:`TextDelta` items and, with tools, the tool-call events (``ToolCallStart``,
    ``ToolCallDelta``, ``ToolCallEnd``, ``ToolCallInvalid``).

    ``stop`` and ``replace`` apply to the answer only: a stop string inside the reasoning or a
    tool call does not cut the answer; a stop in the answer ends the whole generation (the
    upstream is disposed, which cancels it). ``on_finish`` gets the answer's ``stop`` report.

    With ``plan.logprobs`` the ids are :class:`~rxstream.Piece` items (``generate(...,
    logprobs=k)``) and each :class:`TextDelta` carries the tokens of its text (``piece``): the
    answer's after ``stop`` and ``replace`` (a token a stop cuts, even in part, is in none), the
    reasoning's as routed. The tokens of delimiters (``<think>``, ``</think>``, ...), of tool
    calls and of the whitespace dropped after a region are in no delta.
    """
    from rxstream.operators import channels, detokenize
    from rxstream.operators import replace as replace_op
    from rxstream.operators import stop as stop_op
    from rxstream.text import replace_rules_any, stop_rules_any

    spec = plan.spec
    if spec is None:
        raise ValueError("channel_stream: the plan has no route")
    stops = stop_rules_any(stop, owner="stop")
    rules = replace_rules_any(replace, owner="replace")
    aligned = plan.logprobs
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
    views = _routed(text, spec, plan.route_prompt, content_channel, aligned).pipe(channels(*names))
    answer: reactivex.Observable[Any] = (
        _channel_pieces(views.segments(content_channel)) if aligned else views[content_channel]
    )
    if stops.strings:
        answer = answer.pipe(stop_op(stops, on_finish=on_finish))
    if rules.pairs:
        answer = answer.pipe(replace_op(rules))
    streams: list[reactivex.Observable[Any]] = [answer.pipe(ops.map(_delta("content")))]
    if reasoning_channel is not None:
        thoughts: reactivex.Observable[Any] = (
            _channel_pieces(views.segments(reasoning_channel)) if aligned else views[reasoning_channel]
        )
        streams.append(thoughts.pipe(ops.map(_delta("reasoning"))))
    if tool_channel is not None:
        from rxstream.channels import ToolCallDelta, ToolCallEnd, ToolCallInvalid, ToolCallStart
        from rxstream.operators import tool_calls

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
