"""One generation's grammar from the route that splits its stream: :func:`compose`.

The constraint applies where it should and nowhere else (SEMANTICS §15):

- reasoning is free: the grammar lets the family's reasoning region through unconstrained (to
  its closing delimiter, lazily), and starts at the first answer character after it; a prompt
  that already opened the reasoning (a template that ends with ``<think>``) starts the grammar inside it;
- the answer (the route's content channel) follows the :class:`~._format.OutputFormat`;
- a tool call's arguments follow the tool's schema: forced calls (``tool_choice`` ``required`` or
  a named function) make the answer one or more calls, and ``strict`` tools make any call the
  model chooses to write well-formed, with free text allowed around none of them but before.

Delimiters that are special tokens are matched as those tokens (``<[id]>``), others as text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..channels import Region, RouteSpec, SpecialToken, tool_format
from ..channels._tool_json import JsonCallFormat
from ._engine import Grammar
from ._format import OutputFormat

__all__ = ["MAX_CALLS", "UnsupportedConstraint", "call_schema", "compose"]

MAX_CALLS = 8
"""The most tool calls a constrained answer holds (parallel calls)."""

_SPECIALS = set("\\.+*?()|[]{}^$#&-~/")

_JSON_OPTIONS = {
    "whitespace_flexible": False,
    "item_separator": ", ",
    "key_separator": ": ",
    "lenient": True,
}

_GAP = r"/[ \t\r\n]{0,4}/"
"""Whitespace allowed between the reasoning and the answer, and around a call's JSON (bounded:
a model must not be able to loop on newlines)."""


class UnsupportedConstraint(ValueError):
    """The route's format cannot be constrained that way (a delimiter that is a regular
    expression, a tool-call format with no grammar here)."""


def _rx_escape(text: str) -> str:
    return "".join("\\" + c if c in _SPECIALS else c for c in text)


SpecialId = Callable[[str], "int | None"]
"""The id of a delimiter's text when it is one special token of the tokenizer, else None."""


def _delim(d: Any, special_id: SpecialId) -> tuple[str, int | None]:
    """A delimiter as (text, special id or None)."""
    if isinstance(d, SpecialToken):
        return d.text, d.id
    if isinstance(d, str):
        return d, special_id(d)
    raise UnsupportedConstraint("a delimiter that is a regular expression cannot be constrained")


def _first_delim(delims: Sequence[Any], special_id: SpecialId) -> tuple[str, int | None] | None:
    """The first delimiter that is text or a special token (what a forced call opens with)."""
    for d in delims:
        if isinstance(d, str | SpecialToken):
            return _delim(d, special_id)
    return None


def _symbol(text: str, tid: int | None) -> str:
    return f"<[{tid}]>" if tid is not None else json.dumps(text, ensure_ascii=False)


def _reasoning_rules(region: Region, inside: bool, special_id: SpecialId) -> tuple[str, list[str]]:
    """The Lark rules that let a reasoning region through, unconstrained (``inside``: the prompt
    opened it). Any of its closing delimiters closes it.

    Raises:
        UnsupportedConstraint: a delimiter that is a regular expression, or no closing one.
    """
    if any(not isinstance(d, str | SpecialToken) for d in (*region.open, *region.close)):
        raise UnsupportedConstraint(
            "a reasoning delimiter that is a regular expression cannot be constrained around"
        )
    if not region.close:
        raise UnsupportedConstraint("a reasoning region that never closes leaves no answer to constrain")
    closers = [_delim(d, special_id) for d in region.close]
    texts = [t for t, tid in closers if tid is None]
    specials = [tid for _t, tid in closers if tid is not None]
    body: list[str] = []
    ends: list[str] = []
    if texts:
        alternatives = "|".join(_rx_escape(t) for t in texts)
        body.append(f"think_body[lazy]: /(?s:.*)({alternatives})/")
        ends.append("think_body")
    if specials:
        body.append("THINK_TEXT: /(?s:.*)/")
        ends += [f"THINK_TEXT <[{tid}]>" for tid in specials]
    tail = f"({' | '.join(ends)})" if len(ends) > 1 else ends[0]
    if inside:
        return f"lead: {tail} GAP", body
    openers = " | ".join(_symbol(*_delim(d, special_id)) for d in region.open)
    return f"lead: (({openers}) {tail} GAP)?", body


def call_schema(tool: Mapping[str, Any], key: str = "arguments") -> dict[str, Any]:
    """The JSON Schema of one call object of ``tool`` (an OpenAI function tool):
    ``{"name": <its name>, key: <its parameters>}``."""
    fn = tool.get("function", tool)
    params = fn.get("parameters") or {"type": "object"}
    return {
        "type": "object",
        "properties": {"name": {"const": fn["name"]}, key: params},
        "required": ["name", key],
        "additionalProperties": False,
    }


def _calls_rules(
    spec: RouteSpec, tools: Sequence[Mapping[str, Any]], parallel: bool, special_id: SpecialId
) -> tuple[list[str], dict[str, Any], str | None] | None:
    """Rules for tool calls in the route's format, or None when the format has no grammar here:
    (the rules ``calls`` and ``call_tail`` -- a call after its opening delimiter -- and ``more``,
    the calls after the first; the calls' sub-grammar; the opener's text, None when it is a
    special token)."""
    channel = spec.channel_of("tool_call")
    region = next((r for r in spec.regions if r.channel == channel), None)
    if region is None or spec.tool_format is None:
        return None
    fmt = tool_format(spec.tool_format)
    if not isinstance(fmt, JsonCallFormat) or fmt.name_capture is not None or fmt.opening_json:
        return None
    opener = _first_delim(region.open, special_id)
    closer = _first_delim(region.close, special_id)
    if opener is None:
        return None
    one = {"anyOf": [call_schema(t, fmt.forced_key) for t in tools]} if tools else {"type": "object"}
    several = parallel and fmt.multiple
    if fmt.listed:
        body: dict[str, Any] = {"type": "array", "items": one, "minItems": 1}
        body["maxItems"] = MAX_CALLS if parallel else 1
        several = False
    else:
        body = one
    close = f" GAP {_symbol(*closer)}" if closer is not None else ""
    rules = [
        "calls: call more",
        f"call: {_symbol(*opener)} call_tail",
        f"call_tail: GAP @call{close}",
        f"more: (GAP call){{0,{MAX_CALLS - 1}}} GAP" if several else "more: GAP",
    ]
    sub = {"name": "call", "json_schema": {**body, "x-guidance": _JSON_OPTIONS}}
    return rules, sub, opener[0] if opener[1] is None else None


def compose(
    spec: RouteSpec | None,
    output: OutputFormat,
    *,
    start_channel: str | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    choice: str = "none",
    named: str | None = None,
    parallel: bool = True,
    special_id: SpecialId = lambda _text: None,
) -> Grammar | None:
    """The grammar of a whole generation, or None when nothing is constrained.

    Args:
        spec: the route of the generation (None: the whole output is the answer).
        output: what the answer must be.
        start_channel: the route's channel where the generation starts (the prompt's state:
            the reasoning channel when the prompt opened the reasoning).
        tools: the tools of the request; choice: ``none``, ``auto``, ``required`` or ``named``
            (``named``: the function); parallel: several calls allowed.
        special_id: the special-token id of a delimiter's text (see :data:`SpecialId`).

    Raises:
        UnsupportedConstraint: the route cannot carry the constraint.
    """
    forced = choice in ("required", "named") and bool(tools)
    strict_tools = choice == "auto" and any(t.get("function", t).get("strict") for t in tools)
    if not forced and not strict_tools and not output.constrained:
        return None
    chosen = list(tools)
    if choice == "named":  # one call, of that function
        chosen = [t for t in tools if t.get("function", t).get("name") == named]
        parallel = False
    rules: list[str] = []
    grammars: list[dict[str, Any]] = []
    lead = ""
    words = []
    if spec is not None:
        reasoning = spec.channel_of("reasoning")
        region = next((r for r in spec.regions if r.channel == reasoning), None)
        if region is not None:
            rule, body = _reasoning_rules(region, start_channel == reasoning, special_id)
            rules += [rule, *body]
            lead = "lead "
            words.append("after free reasoning")
        content = spec.channel_of("content")
        if content is not None and content != spec.default:
            raise UnsupportedConstraint(
                f"the {spec.name or 'route'!r} format writes its answer in a region; its answer "
                "cannot be constrained yet"
            )
    calls = None
    if forced or strict_tools:
        if spec is None:
            raise UnsupportedConstraint("tool calls need a route with a tool-call region")
        calls = _calls_rules(spec, chosen if forced else tools, parallel, special_id)
        if calls is None:
            raise UnsupportedConstraint(
                f"tool calls of the {spec.name or 'route'!r} format cannot be constrained yet"
            )
        rules += calls[0]
        grammars.append(calls[1])
    if forced:
        answer = "calls"
        words.insert(0, f"answer: tool call{'s' if parallel else ''} ({choice})")
    elif calls is not None:  # strict tools, the model's choice
        opener = calls[2]
        if output.constrained:
            answer = "@answer | calls"
        elif opener is None:
            raise UnsupportedConstraint("strict tools need a tool-call delimiter written as text")
        else:  # free text that holds no opener, or text up to the opener and the calls
            answer = "TEXT | pre call_tail more"
            rules += [
                f"pre[lazy]: /(?s:.*){_rx_escape(opener)}/",
                f"TEXT: /(?s:.+)/ & ~/(?s:.*{_rx_escape(opener)}.*)/",
            ]
        words.insert(0, "strict tool calls checked")
    else:
        answer = "@answer"
    if output.constrained and not forced:
        entry = output.subgrammar()
        grammars.append({"name": "answer", **entry})
        words.insert(0, f"answer: {output.kind}" + (f" {output.name!r}" if output.name else ""))
    rules.insert(0, f"start: {lead}{answer}")
    if lead or calls:
        rules.append(f"GAP: {_GAP}")
    top = {"lark_grammar": "\n".join(rules)}
    return Grammar.of([top, *grammars], ", ".join(words))
