"""Request validation for the OpenAI-compatible server: one parser per field.

:func:`validate_request` turns a decoded JSON body into a :class:`GenerationRequest`, or raises
:class:`~rxstream.server.RequestError` (an HTTP status and an OpenAI-style error body naming the
parameter). Each ``_parse_*`` function reads and checks one field (or one group of fields that
belong together) and nothing else; the messages and prompt are read in ``_request_messages``,
the sampling fields and the budget (from :meth:`SamplingParams.table`) in ``_request_sampling``,
the text rules in ``_request_rules``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._sampling_params import SamplingParams
from ..structured import OutputFormat, OutputFormatError
from ..text import RegexReplaceRules, RegexStopRules, ReplaceRules, StopRules
from ._errors import RequestError
from ._limits import ServerLimits
from ._request_messages import messages_chars, parse_messages, parse_prompt
from ._request_rules import compile_rules, parse_extension
from ._request_sampling import REQUEST_FIELDS, parse_budget, parse_sampling, request_params
from ._token_ids import FIELDS as TOKEN_ID_FIELDS
from ._token_ids import parse_return_token_ids, parse_tokens_as_ids
from ._tools import (
    ToolChoice,
    parse_parallel_tool_calls,
    parse_tool_choice,
    parse_tools,
)

__all__ = ["GenerationRequest", "check_encodable", "validate_request"]


_NO_TOOLS = ToolChoice("none")
_TEXT = OutputFormat()


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """A validated request.

    Attributes:
        chat: whether it came to ``/v1/chat/completions``.
        prompt: the prompt text (completions), or None.
        prompt_ids: the prompt as token ids (completions given ids), or None.
        messages: the chat messages (chat), or None.
        stream: whether to answer with server-sent events.
        include_usage: ``stream_options.include_usage`` (or ``continuous_usage_stats``): a last
            chunk with the usage.
        continuous_usage: ``stream_options.continuous_usage_stats`` (vLLM's): the usage so far
            on every chunk.
        max_tokens: the token budget.
        sampling: the sampling fields the request gave (those of :meth:`SamplingParams.table`
            with a request name, by field name), checked; the model's defaults fill in the rest
            (:meth:`sampling_params`).
        stop: the stop strings (and the extension's ``stop_regex`` rules), checked and compiled once.
        replace: the replace rules of the ``rxstream`` extension (literal and regex), compiled once.
        max_tokens_given: whether the request set ``max_tokens`` itself (when it did not, the
            server may shorten the default budget to what the model's context leaves).
        tools: the chat request's function tools (OpenAI objects, checked).
        tool_choice: what the request asks of tool use (``none`` without tools).
        parallel_tool_calls: False: at most one tool call (the generation ends after it).
        n: how many choices (each a generation of its own; choice ``i`` samples with ``seed + i``).
        logprobs: None for no log-probabilities, else how many alternatives per token (chat:
            ``top_logprobs`` when ``logprobs`` is true; completions: ``logprobs``).
        return_token_ids: completions' ``return_token_ids`` (see ``_token_ids``): each choice
            carries the ids it holds.
        tokens_as_ids: completions' ``return_tokens_as_token_ids``: log-probabilities name their
            tokens ``token_id:N``.
        output: the chat's ``response_format`` (text unless it asks for JSON, a regex or a grammar).
    """

    chat: bool
    prompt: str | None
    prompt_ids: tuple[int, ...] | None
    messages: tuple[dict[str, Any], ...] | None
    stream: bool
    include_usage: bool
    max_tokens: int
    sampling: Mapping[str, Any]
    stop: StopRules | RegexStopRules
    replace: ReplaceRules | RegexReplaceRules
    max_tokens_given: bool = True
    tools: tuple[dict[str, Any], ...] = ()
    tool_choice: ToolChoice = _NO_TOOLS
    parallel_tool_calls: bool = True
    n: int = 1
    logprobs: int | None = None
    continuous_usage: bool = False
    return_token_ids: bool = False
    tokens_as_ids: bool = False
    output: OutputFormat = _TEXT

    def sampling_params(self, defaults: SamplingParams, choice: int = 0) -> SamplingParams:
        """The request's sampling over the served model's ``defaults``, with its budget; choice
        ``i`` of ``n`` samples with ``seed + i`` (as vLLM does), so the choices differ.

        Raises:
            RequestError: a combination the model cannot use, naming the field.
        """
        sampling = dict(self.sampling)
        if choice and sampling.get("seed") is not None:
            sampling["seed"] = (sampling["seed"] + choice) % 2**63
        return request_params(defaults, sampling, self.max_tokens)


# ------------------------------------------------------------------------------------ text check
def _unencodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_encodable(body: Any) -> None:
    """Raise a 400 naming the first field of a decoded JSON body whose text (a key or a value)
    cannot be encoded as UTF-8: JSON can spell a lone surrogate (``"\\\\ud800"``), which would
    otherwise fail later, deep in the tokenizer or while writing the response.

    The walk is iterative, so any nesting depth that the JSON decoder accepted is fine.
    """
    stack: list[tuple[str, Any]] = [("", body)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if _unencodable(value):
                field = path or "body"
                raise RequestError(
                    f"'{field}' contains text that is not valid Unicode (a lone surrogate)", param=field
                )
        elif isinstance(value, Mapping):
            for key, item in reversed(list(value.items())):
                if _unencodable(key):
                    field = path or "body"
                    raise RequestError(
                        f"a key in '{field}' is not valid Unicode (a lone surrogate)", param=field
                    )
                stack.append((f"{path}.{key}" if path else str(key), item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in reversed(list(enumerate(value))))


# ------------------------------------------------------------------------------- scalar parsers
def _int(body: Mapping[str, Any], name: str, default: int | None, lo: int, hi: int) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"'{name}' must be an integer, got {value!r}", param=name)
    if not lo <= value <= hi:
        raise RequestError(f"'{name}' must be between {lo} and {hi}, got {value}", param=name)
    return value


def _bool(body: Mapping[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise RequestError(f"'{name}' must be a boolean, got {value!r}", param=name)
    return value


# -------------------------------------------------------------------------------- field parsers
_COMMON = frozenset({"model", "stream", "stream_options", "stop", "n", "user", "rxstream"}) | REQUEST_FIELDS
"""Fields both endpoints implement (the sampling fields of :meth:`SamplingParams.table` among them;
``user`` is accepted as the end-user id it is, and unused)."""

_FIELDS = {
    True: _COMMON
    | {
        "messages",
        "max_completion_tokens",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "logprobs",
        "top_logprobs",
        "response_format",
    },
    False: _COMMON | {"prompt", "logprobs", "best_of"} | TOKEN_ID_FIELDS,
}
"""Implemented fields of chat (True) and completions (False) requests."""

_NOOP_VALUES: dict[str, tuple[Any, ...]] = {
    "top_logprobs": (None, 0),
    "echo": (None, False),
    "best_of": (None, 1),
    "suffix": (None, ""),
    "tools": (None, []),  # completions requests: chat requests implement the three tool fields
    "functions": (None, []),
    "tool_choice": (None, "none"),
    "function_call": (None, "none"),
    "parallel_tool_calls": (None,),
    "logit_bias": (None, {}),
    "presence_penalty": (None, 0),
    "frequency_penalty": (None, 0),
    "response_format": (None, {"type": "text"}),
    "min_tokens": (None, 0),
    "store": (None, False),
    "metadata": (None, {}),
}
"""OpenAI fields this server does not implement yet: accepted only with a value that asks for
nothing (so a client that sends its defaults works); any other value is a 400 naming the field,
never silently ignored."""


def _same(value: Any, noop: Any) -> bool:
    """``value == noop`` without ``True == 1`` or ``None == 0``; ``0.0`` is the same as ``0``."""
    if value is None or noop is None:
        return value is noop
    return isinstance(value, bool) == isinstance(noop, bool) and value == noop


def _parse_fields(body: Mapping[str, Any], chat: bool) -> None:
    """Every field is implemented, or unimplemented with a value that asks for nothing."""
    for name, value in body.items():
        if name in _FIELDS[chat]:
            continue
        if name in _NOOP_VALUES:
            if any(_same(value, v) for v in _NOOP_VALUES[name]):
                continue
            raise RequestError(f"'{name}' is not supported by this server (got {value!r})"[:300], param=name)
        other = "completions" if chat else "chat completions"
        hint = f" (it belongs to {other} requests)" if name in _FIELDS[not chat] else ""
        raise RequestError(f"unknown field '{name}'{hint}", param=name)
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError(f"'model' must be a string, got {model!r}", param="model")


def _parse_n(body: Mapping[str, Any], chat: bool, limits: ServerLimits) -> int:
    """``n`` (and ``best_of``, which may only repeat it: choosing the best of more is not done)."""
    n = _int(body, "n", 1, 1, limits.max_n)
    assert n is not None
    if not chat:
        best_of = body.get("best_of")
        if best_of is not None and (isinstance(best_of, bool) or best_of != n):
            raise RequestError(
                f"'best_of' is not supported (only best_of equal to n, {n}); got {best_of!r}"[:300],
                param="best_of",
            )
    return n


def _parse_logprobs(body: Mapping[str, Any], chat: bool, limits: ServerLimits) -> int | None:
    """How many alternatives per token, or None for no log-probabilities.

    Chat: ``logprobs`` (bool) and ``top_logprobs`` (0 to the limit; only with ``logprobs``).
    Completions: ``logprobs`` (an int, 0 to the limit).
    """
    top = limits.max_logprobs
    raw = body.get("logprobs")
    if chat:
        if raw is not None and not isinstance(raw, bool):
            raise RequestError(f"'logprobs' must be a boolean, got {raw!r}"[:300], param="logprobs")
        k = _int(body, "top_logprobs", None, 0, top)
        if not raw:
            if k:
                raise RequestError("'top_logprobs' needs 'logprobs': true", param="top_logprobs")
            return None
        return k or 0
    if raw is None or raw is False:
        return None
    return _int(body, "logprobs", None, 0, top)


def _parse_stream_options(body: Mapping[str, Any]) -> tuple[bool, bool]:
    """``stream_options``: ``include_usage`` and vLLM's ``continuous_usage_stats`` (which implies
    it); other keys are ignored."""
    options = body.get("stream_options")
    if options is None:
        return False, False
    if not isinstance(options, Mapping):
        raise RequestError("'stream_options' must be an object", param="stream_options")
    flags = []
    for key in ("include_usage", "continuous_usage_stats"):
        value = options.get(key)
        if value is not None and not isinstance(value, bool):
            raise RequestError(f"'stream_options.{key}' must be a boolean", param="stream_options")
        flags.append(bool(value))
    return flags[0] or flags[1], flags[1]


def _parse_stop(body: Mapping[str, Any], limits: ServerLimits) -> tuple[str, ...]:
    raw = body.get("stop")
    stops: list[Any]
    if raw is None:
        stops = []
    elif isinstance(raw, str):
        stops = [raw]
    elif isinstance(raw, list):
        stops = raw
    else:
        raise RequestError(f"'stop' must be a string or a list of strings, got {raw!r}"[:300], param="stop")
    if len(stops) > limits.max_stop:
        raise RequestError(
            f"at most {limits.max_stop} stop strings are allowed, got {len(stops)}", param="stop"
        )
    for s in stops:
        if not isinstance(s, str) or not s:
            raise RequestError(f"each stop must be a non-empty string, got {s!r}"[:300], param="stop")
        if len(s) > limits.max_stop_chars:
            raise RequestError(
                f"a stop string is longer than {limits.max_stop_chars} characters", param="stop"
            )
    return tuple(stops)


def validate_request(body: Any, *, chat: bool, limits: ServerLimits) -> GenerationRequest:
    """Check a decoded JSON body; return the request or raise :class:`RequestError` (HTTP 400)."""
    if not isinstance(body, Mapping):
        raise RequestError(f"the request body must be a JSON object, got {type(body).__name__}")
    _parse_fields(body, chat)
    stream = _bool(body, "stream")
    include_usage, continuous_usage = _parse_stream_options(body)
    prompt: str | None = None
    prompt_ids: tuple[int, ...] | None = None
    messages: tuple[dict[str, Any], ...] | None = None
    tools: tuple[dict[str, Any], ...] = ()
    choice = _NO_TOOLS
    parallel = True
    output = _TEXT
    if chat:
        output = parse_response_format(body)
        messages = parse_messages(body, limits)
        tools = parse_tools(body, limits)
        choice = parse_tool_choice(body, tools)
        parallel = parse_parallel_tool_calls(body)
        tools_size = len(json.dumps(tools)) if tools else 0
        if tools_size + messages_chars(messages) > limits.max_prompt_chars:
            raise RequestError(
                f"the messages and tools exceed {limits.max_prompt_chars} characters", param="tools"
            )
    else:
        prompt, prompt_ids = parse_prompt(body, limits)
    max_tokens, given = parse_budget(body, chat, limits)
    n = _parse_n(body, chat, limits)
    logprobs = _parse_logprobs(body, chat, limits)
    replace, regex_stops, read = parse_extension(body, limits)
    stop, replace_compiled = compile_rules(_parse_stop(body, limits), replace, regex_stops, limits, read)
    return GenerationRequest(
        chat=chat,
        prompt=prompt,
        prompt_ids=prompt_ids,
        messages=messages,
        stream=stream,
        include_usage=include_usage,
        continuous_usage=continuous_usage,
        max_tokens=max_tokens,
        stop=stop,
        replace=replace_compiled,
        max_tokens_given=given,
        sampling=parse_sampling(body),
        tools=tools,
        tool_choice=choice,
        parallel_tool_calls=parallel,
        n=n,
        logprobs=logprobs,
        return_token_ids=False if chat else parse_return_token_ids(body),
        tokens_as_ids=False if chat else parse_tokens_as_ids(body),
        output=output,
    )


def parse_response_format(body: Mapping[str, Any]) -> OutputFormat:
    """``response_format`` (:meth:`~rxstream.structured.OutputFormat.from_response_format`)."""
    try:
        return OutputFormat.from_response_format(body.get("response_format"))
    except OutputFormatError as exc:
        raise RequestError(str(exc), param=exc.field) from None
