"""Request validation for the OpenAI-compatible server: one parser per field.

:func:`validate_request` turns a decoded JSON body into a :class:`GenerationRequest`, or raises
:class:`~rxstream.server.RequestError` (an HTTP status and an OpenAI-style error body naming the
parameter). Each ``_parse_*`` function reads and checks one field (or one group of fields that
belong together) and nothing else.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._sampling_params import SamplingParams, SamplingParamsError
from ..text import RegexReplaceRules, RegexStopRules, ReplaceRules, StopRules
from ._errors import RequestError
from ._limits import ServerLimits
from ._request_rules import compile_rules, parse_extension
from ._tools import (
    ToolChoice,
    parse_assistant_tool_calls,
    parse_parallel_tool_calls,
    parse_tool_choice,
    parse_tools,
)

__all__ = ["GenerationRequest", "check_encodable", "validate_request"]


_NO_TOOLS = ToolChoice("none")


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """A validated request.

    Attributes:
        chat: whether it came to ``/v1/chat/completions``.
        prompt: the prompt text (completions), or None.
        prompt_ids: the prompt as token ids (completions given ids), or None.
        messages: the chat messages (chat), or None.
        stream: whether to answer with server-sent events.
        include_usage: ``stream_options.include_usage``.
        max_tokens: the token budget.
        sampling: the sampling fields the request gave (``temperature``, ``top_p``, ``top_k``,
            ``repetition_penalty``, ``seed``), checked; the model's defaults fill in the rest
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

    def sampling_params(self, defaults: SamplingParams, choice: int = 0) -> SamplingParams:
        """The request's sampling over the served model's ``defaults``, with its budget; choice
        ``i`` of ``n`` samples with ``seed + i`` (as vLLM does), so the choices differ.

        Raises:
            RequestError: a combination the model cannot use, naming the field.
        """
        sampling = dict(self.sampling)
        if choice and sampling.get("seed") is not None:
            sampling["seed"] = (sampling["seed"] + choice) % 2**63
        try:
            return defaults.replace(**sampling, max_new_tokens=self.max_tokens)
        except SamplingParamsError as exc:
            raise RequestError(f"'{exc.field}' {exc.reason}", param=exc.field) from None


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
def _number(
    body: Mapping[str, Any], name: str, default: float, lo: float, hi: float, *, lo_open: bool = False
) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RequestError(f"'{name}' must be a number, got {value!r}", param=name)
    if value > hi or value < lo or (lo_open and value == lo):
        bound = f"({lo}, {hi}]" if lo_open else f"[{lo}, {hi}]"
        raise RequestError(f"'{name}' must be in {bound}, got {value!r}", param=name)
    return float(value)


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
_COMMON = frozenset(
    {
        "model", "stream", "stream_options", "max_tokens", "temperature", "top_p", "top_k",
        "repetition_penalty", "seed", "stop", "n", "user", "rxstream",
    }
)  # fmt: skip
"""Fields both endpoints implement (``user`` is accepted as the end-user id it is, and unused)."""

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
    },
    False: _COMMON | {"prompt", "logprobs", "best_of"},
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


def _parse_stream_options(body: Mapping[str, Any]) -> bool:
    """``stream_options.include_usage``."""
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, Mapping) or not isinstance(options.get("include_usage", False), bool):
        raise RequestError("'stream_options' must be {\"include_usage\": bool}", param="stream_options")
    return bool(options.get("include_usage", False))


def _content_text(content: Any, index: int) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if not (
                isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)
            ):
                raise RequestError(
                    f"messages[{index}].content: only text parts are supported, got {part!r}"[:300],
                    param=f"messages[{index}].content",
                )
            parts.append(part["text"])
        return "".join(parts)
    raise RequestError(
        f"messages[{index}].content must be a string or a list of text parts, got {type(content).__name__}",
        param=f"messages[{index}].content",
    )


def _messages_chars(messages: Sequence[Mapping[str, Any]]) -> int:
    """The characters of the messages' contents and tool calls."""
    total = 0
    for m in messages:
        total += len(m["content"] or "")
        for call in m.get("tool_calls", ()):
            total += len(call["function"]["name"]) + len(json.dumps(call["function"]["arguments"]))
    return total


def _parse_messages(body: Mapping[str, Any], limits: ServerLimits) -> tuple[dict[str, Any], ...]:
    """The chat messages: ``system``/``developer``, ``user``, ``assistant`` (text, or ``tool_calls``
    with ``content`` null) and ``tool`` (a result, with the ``tool_call_id`` of a call of the
    assistant message before it)."""
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise RequestError("'messages' must be a non-empty list", param="messages")
    if len(raw) > limits.max_messages:
        raise RequestError(
            f"at most {limits.max_messages} messages are allowed, got {len(raw)}", param="messages"
        )
    parsed: list[dict[str, Any]] = []
    open_calls: set[str] = set()  # ids of the latest assistant message's calls
    for i, msg in enumerate(raw):
        if not isinstance(msg, Mapping):
            raise RequestError(f"messages[{i}] must be an object", param=f"messages[{i}]")
        role = msg.get("role")
        if role not in ("system", "user", "assistant", "developer", "tool"):
            raise RequestError(
                f"messages[{i}].role must be system, user, assistant or tool, got {role!r}"[:300],
                param=f"messages[{i}].role",
            )
        name = msg.get("name")
        if name is not None and not isinstance(name, str):
            raise RequestError(f"messages[{i}].name must be a string", param=f"messages[{i}].name")
        entry: dict[str, Any] = {"role": "system" if role == "developer" else role}
        for field, owner in (("tool_calls", "assistant"), ("tool_call_id", "tool")):
            if msg.get(field) is not None and role != owner:
                raise RequestError(
                    f"messages[{i}].{field} belongs to {owner} messages, not {role}",
                    param=f"messages[{i}].{field}",
                )
        if role == "assistant" and msg.get("tool_calls") is not None:
            calls = parse_assistant_tool_calls(msg.get("tool_calls"), i)
            content = msg.get("content")
            entry["content"] = None if content is None else _content_text(content, i)
            entry["tool_calls"] = calls
            open_calls = {c["id"] for c in calls}
        else:
            entry["content"] = _content_text(msg.get("content"), i)
            if role == "tool":
                call_id = msg.get("tool_call_id")
                if not isinstance(call_id, str) or not call_id:
                    raise RequestError(
                        f"messages[{i}].tool_call_id must be a non-empty string (the id of the call "
                        "this message answers)",
                        param=f"messages[{i}].tool_call_id",
                    )
                if call_id not in open_calls:
                    raise RequestError(
                        f"messages[{i}].tool_call_id {call_id!r} answers no tool call of the assistant "
                        "message before it"[:300],
                        param=f"messages[{i}].tool_call_id",
                    )
                entry["tool_call_id"] = call_id
            else:
                open_calls = set()
        if name is not None:
            entry["name"] = name
        parsed.append(entry)
    if _messages_chars(parsed) > limits.max_prompt_chars:
        raise RequestError(f"the messages exceed {limits.max_prompt_chars} characters", param="messages")
    return tuple(parsed)


def _parse_prompt(body: Mapping[str, Any], limits: ServerLimits) -> tuple[str | None, tuple[int, ...] | None]:
    """A completions prompt: ``(text, None)`` or ``(None, token ids)``."""
    raw = body.get("prompt")
    if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], str | list):
        raw = raw[0]  # a batch of one
    if isinstance(raw, str):
        if len(raw) > limits.max_prompt_chars:
            raise RequestError(f"the prompt exceeds {limits.max_prompt_chars} characters", param="prompt")
        return raw, None
    if isinstance(raw, list) and raw and all(isinstance(i, int) and not isinstance(i, bool) for i in raw):
        if len(raw) > limits.max_prompt_tokens:
            raise RequestError(f"the prompt exceeds {limits.max_prompt_tokens} tokens", param="prompt")
        return None, tuple(raw)
    raise RequestError(
        "'prompt' must be a string or a non-empty list of token ids (one prompt per request)", param="prompt"
    )


def _parse_budget(body: Mapping[str, Any], chat: bool, limits: ServerLimits) -> tuple[int, bool]:
    """``max_tokens`` (or chat's ``max_completion_tokens``) and whether the request gave it."""
    name = "max_completion_tokens" if chat and body.get("max_completion_tokens") is not None else "max_tokens"
    value = _int(body, name, min(limits.default_max_tokens, limits.max_tokens), 1, limits.max_tokens)
    assert value is not None
    return value, body.get(name) is not None


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


def _parse_sampling(body: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling fields the request gives (absent or null: the model's default)."""
    given = {
        "temperature": _number(body, "temperature", math.nan, 0.0, 2.0),
        "top_p": _number(body, "top_p", math.nan, 0.0, 1.0, lo_open=True),
        "top_k": _int(body, "top_k", None, -1, 1_000_000),
        "repetition_penalty": _number(body, "repetition_penalty", math.nan, 0.0, 10.0, lo_open=True),
        "seed": _int(body, "seed", None, 0, 2**63 - 1),
    }
    if given["top_k"] == -1:  # vLLM's spelling of "off"
        given["top_k"] = 0
    return {k: v for k, v in given.items() if body.get(k) is not None}


def validate_request(body: Any, *, chat: bool, limits: ServerLimits) -> GenerationRequest:
    """Check a decoded JSON body; return the request or raise :class:`RequestError` (HTTP 400)."""
    if not isinstance(body, Mapping):
        raise RequestError(f"the request body must be a JSON object, got {type(body).__name__}")
    _parse_fields(body, chat)
    stream = _bool(body, "stream")
    include_usage = _parse_stream_options(body)
    prompt: str | None = None
    prompt_ids: tuple[int, ...] | None = None
    messages: tuple[dict[str, Any], ...] | None = None
    tools: tuple[dict[str, Any], ...] = ()
    choice = _NO_TOOLS
    parallel = True
    if chat:
        messages = _parse_messages(body, limits)
        tools = parse_tools(body, limits)
        choice = parse_tool_choice(body, tools)
        parallel = parse_parallel_tool_calls(body)
        tools_size = len(json.dumps(tools)) if tools else 0
        if tools_size + _messages_chars(messages) > limits.max_prompt_chars:
            raise RequestError(
                f"the messages and tools exceed {limits.max_prompt_chars} characters", param="tools"
            )
    else:
        prompt, prompt_ids = _parse_prompt(body, limits)
    max_tokens, given = _parse_budget(body, chat, limits)
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
        max_tokens=max_tokens,
        stop=stop,
        replace=replace_compiled,
        max_tokens_given=given,
        sampling=_parse_sampling(body),
        tools=tools,
        tool_choice=choice,
        parallel_tool_calls=parallel,
        n=n,
        logprobs=logprobs,
    )
