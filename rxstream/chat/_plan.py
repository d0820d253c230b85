"""How one chat is prompted and routed: :func:`plan_chat` and its :class:`ChatPlan`.

The tools are rendered by the model's chat template when it can, else by the fallback prompt
(:mod:`._fallback`); a forced tool call (``tool_choice`` ``required`` or named) is opened in the
prompt by the family whose calls the route reads (:func:`tool_opening`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .._generative_model import GenerativeModel
from ..channels import ChannelKind, Router, RouteSpec
from ..families import Family, family
from ..structured import Grammar, OutputFormat, UnsupportedConstraint, compose
from ._choice import ToolChoice
from ._fallback import FALLBACK, fallback_messages, renders_tools

__all__ = ["ChatPlan", "UnsupportedChoice", "plan_chat", "special_ids", "tool_opening"]


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
            prompt of :mod:`._fallback` did).
        skip_special_tokens: what the detokenizer does with special tokens (False for formats
            whose delimiters are special tokens).
        parallel_tool_calls: False: the generation ends when the first tool call is complete.
        logprobs: the generated items are pieces with log-probabilities (the request asks for
            them): the text is routed aligned, and each :class:`TextDelta` carries its tokens.
        grammar: what decoding is constrained to (:func:`~rxstream.structured.compose`: the
            answer's format, forced and strict tool calls, reasoning left free), or None.
        calls_checked: the grammar makes every tool call valid (forced calls, ``strict`` tools):
            a call's arguments may stream as written; otherwise a face that must never send
            part of an invalid call holds each one until it is valid
            (:func:`~rxstream.operators.whole_tool_calls`).
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
    grammar: Grammar | None = None
    calls_checked: bool = False

    def channel(self, kind: ChannelKind) -> str | None:
        """The channel of ``kind`` in the route (None without a route or such a channel)."""
        return None if self.spec is None else self.spec.channel_of(kind)

    @property
    def has_reasoning(self) -> bool:
        """Whether the route has a reasoning channel (then responses carry ``reasoning_content``)."""
        return self.channel("reasoning") is not None


def _tool_spec(
    base: Family | None, tools_active: bool, native: bool
) -> tuple[RouteSpec | None, Family | None]:
    """The route for a chat, and the family whose tool calls it reads: the family's spec; with
    tool calls parsed, a tool-call region of the format the prompt asked for (``native``: the
    family's own, as when the template rendered the tools; else the fallback prompt's,
    :data:`FALLBACK`); without, no tool-call region (text that looks like a call is answer text).
    """
    if base is None:
        return (FALLBACK.spec, FALLBACK) if tools_active else (None, None)
    spec = base.spec
    has_tool_region = spec.channel_of("tool_call") is not None
    if tools_active and native and has_tool_region:
        return base.with_tools(), base
    others = tuple(r for r in spec.regions if spec.kind(r.channel) != "tool_call")
    kinds = dict(spec.kinds)
    if not tools_active:
        if not has_tool_region:
            return spec, None
        return dataclasses.replace(
            spec, regions=others, kinds=MappingProxyType(kinds), tool_format=None
        ), None
    kinds["tool_call"] = "tool_call"
    fallback = FALLBACK.spec
    routed = dataclasses.replace(
        spec,
        regions=(*others, *fallback.regions),
        kinds=MappingProxyType(kinds),
        tool_format=fallback.tool_format,
        name=f"{spec.name}+{FALLBACK.name}",
    )
    return routed, FALLBACK


class UnsupportedChoice(ValueError):
    """A ``tool_choice`` the route's tool format cannot force."""


def tool_opening(family: Family, choice: ToolChoice) -> str:
    """The text that opens a tool call at the start of the answer (``required``), and names its
    function (named choice); ``""`` for ``auto``/``none``. ``family``: whose tool calls the
    route reads (:meth:`~rxstream.families.Family.forced_call`).

    Raises:
        UnsupportedChoice: the family's format cannot open such a call.
    """
    if choice.mode not in ("required", "named"):
        return ""
    opening = family.forced_call(choice.name if choice.mode == "named" else None)
    if opening is None:
        raise UnsupportedChoice(
            f"tool_choice {choice.mode!r} is not supported for the {family.name!r} format"
        )
    return opening


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
    output: OutputFormat | None = None,
    constrain: bool = False,
) -> tuple[list[int], ChatPlan]:
    """The prompt ids of a chat and how to route its generation (blocking: run it off the loop).

    Args:
        model: the served model; its optional ``chat_template`` and ``render_chat`` are used
            when present (see :class:`~rxstream.GenerativeModel`).
        messages: checked chat messages (assistant ``tool_calls`` with decoded arguments,
            ``tool`` messages).
        reasoning_format: a family's name, or None (see :func:`resolve_reasoning_format`).
        tools: the request's tools; tool_choice: what it asks of them (``none`` without tools).
        parse_tool_calls: parse the tool calls the format writes even without ``tools`` (no
            tools in the prompt; calls of any name): what ``rxstream chat`` shows.
        output: what the answer must be (default: text).
        constrain: the model constrains decoding (``generate(..., grammar=...)``): the plan
            carries the grammar of ``output``, and of forced and ``strict`` tool calls, which
            are then forced by the grammar (after any reasoning) rather than opened in the
            prompt. A forced call of a format with no grammar is opened in the prompt as without.

    Raises:
        UnsupportedChoice: a forced tool call the format cannot open.
        UnsupportedConstraint: ``output`` asks for a format the route cannot carry, or a
            constraint of a model that does not constrain decoding.
        Exception: whatever the chat template or the tokenizer raise.
    """
    choice = tool_choice or ToolChoice("none")
    active = tuple(tools) if tools and choice.mode != "none" else ()
    template = getattr(model, "chat_template", None)
    render: Callable[..., str] | None = getattr(model, "render_chat", None)
    own = renders_tools(template if isinstance(template, str) else None) and callable(render)
    native = bool(active) and own
    msgs = [dict(m) for m in messages] if own else fallback_messages(messages, active)
    base = family(reasoning_format) if reasoning_format else None
    parse = bool(active) or (
        parse_tool_calls and base is not None and base.spec.channel_of("tool_call") is not None
    )
    spec, caller = _tool_spec(base, parse, native or not active)
    wanted = output if output is not None else OutputFormat()
    if wanted.constrained and not constrain:
        raise UnsupportedConstraint(
            f"response_format {wanted.kind!r} needs a model that constrains decoding; this one does not"
        )
    if spec is None:
        ids = list(model.encode_chat(msgs, add_generation_prompt=True))
        grammar = compose(None, wanted) if constrain else None
        return ids, ChatPlan(None, grammar=grammar)
    if callable(render):
        text = render(msgs, add_generation_prompt=True, **({"tools": list(active)} if native else {}))
        ids = list(model.encode(text))
    else:
        ids = list(model.encode_chat(msgs, add_generation_prompt=True))
        text = _decode(model.tokenizer, ids)
    grammar = None
    if constrain:
        start = Router(spec, prompt=text if spec.start_anchor else "").channel
        grammar = _grammar(model, spec, start, active, choice, parallel_tool_calls, wanted)
    opening = ""
    if grammar is None or not (active and choice.mode in ("required", "named")):
        opening = tool_opening(caller, choice) if active and caller is not None else ""
    if opening:  # the prompt opens the forced call (encoded with the prompt where it is text)
        ids = list(model.encode(text + opening)) if callable(render) else ids + list(model.encode(opening))
    return ids, ChatPlan(
        spec,
        route_prompt=text if spec.start_anchor else "",
        opening=opening,
        tools=active,
        parse_tools=parse,
        native_tools=native,
        skip_special_tokens=base is None or not base.special_delimiters,
        # a grammar that forces one call ends the generation after it: nothing to cut
        parallel_tool_calls=parallel_tool_calls or (grammar is not None and not opening and bool(active)),
        grammar=grammar,
        calls_checked=grammar is not None and _calls_in_grammar(active, choice),
    )


def _calls_in_grammar(tools: tuple[Mapping[str, Any], ...], choice: ToolChoice) -> bool:
    """Whether a chat's grammar (when it has one) holds its tool calls: forced ones, or the
    model's own choice among ``strict`` tools (:func:`~rxstream.structured.compose`)."""
    if not tools or choice.mode == "none":
        return False
    if choice.mode in ("required", "named"):
        return True
    return any(t.get("function", t).get("strict") for t in tools)


def _grammar(
    model: GenerativeModel,
    spec: RouteSpec,
    start: str,
    tools: tuple[Mapping[str, Any], ...],
    choice: ToolChoice,
    parallel: bool,
    output: OutputFormat,
) -> Grammar | None:
    """The grammar of a chat (see :func:`plan_chat`; ``start``: the route's channel where the
    generation starts); None when nothing is constrained, or when only tool calls are and their
    format has no grammar (a forced one is then opened in the prompt)."""
    try:
        return compose(
            spec,
            output,
            start_channel=start,
            tools=tools,
            choice=choice.mode if tools else "none",
            named=choice.name,
            parallel=parallel,
            special_id=special_ids(model.tokenizer),
        )
    except UnsupportedConstraint:
        if output.constrained:
            raise
        return None


def special_ids(tokenizer: Any) -> Callable[[str], int | None]:
    """The id of a text that is one special token of ``tokenizer`` (a ``tokenizers.Tokenizer``),
    else None."""
    decoder = getattr(tokenizer, "get_added_tokens_decoder", None)
    specials: dict[str, int] = {}
    if callable(decoder):
        specials = {str(t.content): int(i) for i, t in decoder().items() if getattr(t, "special", False)}
    return specials.get
