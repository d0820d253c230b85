"""Request limits and validation for the OpenAI-compatible server (:mod:`rxstream.server`).

:func:`validate_request` turns a decoded JSON body into a :class:`GenerationRequest`, or raises
:class:`RequestError` (an HTTP status and an OpenAI-style error body naming the parameter).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.responses import JSONResponse

__all__ = ["GenerationRequest", "RequestError", "ServerLimits", "check_encodable", "validate_request"]


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Limits on what one request may ask for, and on concurrency.

    Attributes:
        max_body_bytes: largest request body.
        max_prompt_chars: largest prompt (or all message contents together), in characters.
        max_prompt_tokens: largest prompt after tokenization (and chat templating).
        max_tokens: the largest ``max_tokens`` a request may ask for.
        default_max_tokens: ``max_tokens`` when a request gives none.
        max_stop: most stop strings per request (OpenAI allows 4).
        max_stop_chars: longest stop string.
        max_replace_rules: most rules in the ``rxstream.replace`` extension.
        max_replace_chars: longest pattern or replacement of a replace rule.
        max_messages: most chat messages.
        max_concurrency: generations running at once.
        max_queued: requests waiting for a generation slot; beyond that: 503.
        max_connections: open connections (idle ones included); beyond that uvicorn answers 503.
        header_timeout: seconds a connection may take to send a request's headers (from when it
            opens, or from the end of the previous response); then it is closed.
        body_timeout: seconds a request may take to send its body; then the answer is 408.
        idle_timeout: seconds a keep-alive connection may wait for its next request.
        send_timeout: seconds a client may read nothing while a response waits to be sent; then
            the connection is closed and its generation cancelled.
    """

    max_body_bytes: int = 1_000_000
    max_prompt_chars: int = 100_000
    max_prompt_tokens: int = 8192
    max_tokens: int = 2048
    default_max_tokens: int = 256
    max_stop: int = 4
    max_stop_chars: int = 128
    max_replace_rules: int = 64
    max_replace_chars: int = 256
    max_messages: int = 256
    max_concurrency: int = 4
    max_queued: int = 256
    max_connections: int = 1024
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    idle_timeout: float = 5.0
    send_timeout: float = 60.0

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name.endswith("_timeout"):
                if (
                    isinstance(value, bool)
                    or not isinstance(value, int | float)
                    or not math.isfinite(value)
                    or value <= 0
                ):
                    raise ValueError(
                        f"ServerLimits: {name} must be a positive number of seconds, got {value!r}"
                    )
            elif (
                isinstance(value, bool)
                or not isinstance(value, int)
                or value < (0 if name == "max_queued" else 1)
            ):
                raise ValueError(f"ServerLimits: {name} must be a positive int, got {value!r}")


class RequestError(Exception):
    """A request that cannot be served: becomes an OpenAI-style error body with ``status``."""

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        status: int = 400,
        kind: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status
        self.kind = kind

    def response(self) -> JSONResponse:
        """The error as a JSON response."""
        body = {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": None}}
        return JSONResponse(body, status_code=self.status)


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
        temperature: sampling temperature (0: greedy).
        top_p: nucleus sampling mass.
        top_k: top-k cut (0: off).
        repetition_penalty: repetition penalty (1: off).
        seed: random seed, or None.
        stop: stop strings.
        replace: replace rules from the ``rxstream`` extension.
        max_tokens_given: whether the request set ``max_tokens`` itself (when it did not, the
            server may shorten the default budget to what the model's context leaves).
    """

    chat: bool
    prompt: str | None
    prompt_ids: tuple[int, ...] | None
    messages: tuple[dict[str, str], ...] | None
    stream: bool
    include_usage: bool
    max_tokens: int
    temperature: float
    top_p: float
    top_k: int
    repetition_penalty: float
    seed: int | None
    stop: tuple[str, ...]
    replace: tuple[tuple[str, str], ...]
    max_tokens_given: bool = True


def _unencodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_encodable(body: Any) -> None:
    """Raise a 400 naming the first field of a decoded JSON body whose text (a key or a value)
    cannot be encoded as UTF-8: JSON can spell a lone surrogate (``"\\ud800"``), which would
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
                sub = f"{path}.{key}" if path else str(key)
                if _unencodable(key):
                    field = path or "body"
                    raise RequestError(
                        f"a key in '{field}' is not valid Unicode (a lone surrogate)", param=field
                    )
                stack.append((sub, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in reversed(list(enumerate(value))))


_UNSUPPORTED = ("logprobs", "top_logprobs", "echo", "best_of", "suffix", "tools", "functions", "logit_bias")


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


def validate_request(body: Any, *, chat: bool, limits: ServerLimits) -> GenerationRequest:
    """Check a decoded JSON body; return the request or raise :class:`RequestError` (HTTP 400)."""
    if not isinstance(body, Mapping):
        raise RequestError(f"the request body must be a JSON object, got {type(body).__name__}")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError(f"'model' must be a string, got {model!r}", param="model")
    for name in _UNSUPPORTED:
        value = body.get(name)
        if value not in (None, False, 0, [], {}):
            raise RequestError(f"'{name}' is not supported by this server", param=name)
    n = _int(body, "n", 1, 1, 1)
    assert n == 1
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError(f"'stream' must be a boolean, got {stream!r}", param="stream")
    options = body.get("stream_options")
    include_usage = False
    if options is not None:
        if not isinstance(options, Mapping) or not isinstance(options.get("include_usage", False), bool):
            raise RequestError("'stream_options' must be {\"include_usage\": bool}", param="stream_options")
        include_usage = bool(options.get("include_usage", False))

    prompt: str | None = None
    prompt_ids: tuple[int, ...] | None = None
    messages: tuple[dict[str, str], ...] | None = None
    if chat:
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            raise RequestError("'messages' must be a non-empty list", param="messages")
        if len(raw) > limits.max_messages:
            raise RequestError(
                f"at most {limits.max_messages} messages are allowed, got {len(raw)}", param="messages"
            )
        parsed: list[dict[str, str]] = []
        for i, msg in enumerate(raw):
            if not isinstance(msg, Mapping):
                raise RequestError(f"messages[{i}] must be an object", param=f"messages[{i}]")
            role = msg.get("role")
            if role not in ("system", "user", "assistant", "developer"):
                raise RequestError(
                    f"messages[{i}].role must be system, user or assistant, got {role!r}",
                    param=f"messages[{i}].role",
                )
            parsed.append(
                {
                    "role": "system" if role == "developer" else role,
                    "content": _content_text(msg.get("content"), i),
                }
            )
        if sum(len(m["content"]) for m in parsed) > limits.max_prompt_chars:
            raise RequestError(f"the messages exceed {limits.max_prompt_chars} characters", param="messages")
        messages = tuple(parsed)
    else:
        raw = body.get("prompt")
        if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], str | list):
            raw = raw[0]  # a batch of one
        if isinstance(raw, str):
            if len(raw) > limits.max_prompt_chars:
                raise RequestError(f"the prompt exceeds {limits.max_prompt_chars} characters", param="prompt")
            prompt = raw
        elif (
            isinstance(raw, list) and raw and all(isinstance(i, int) and not isinstance(i, bool) for i in raw)
        ):
            if len(raw) > limits.max_prompt_tokens:
                raise RequestError(f"the prompt exceeds {limits.max_prompt_tokens} tokens", param="prompt")
            prompt_ids = tuple(raw)
        else:
            raise RequestError(
                "'prompt' must be a string or a non-empty list of token ids (one prompt per request)",
                param="prompt",
            )

    budget_name = (
        "max_completion_tokens" if chat and body.get("max_completion_tokens") is not None else "max_tokens"
    )
    max_tokens = _int(
        body, budget_name, min(limits.default_max_tokens, limits.max_tokens), 1, limits.max_tokens
    )
    assert max_tokens is not None

    raw_stop = body.get("stop")
    stops: list[str]
    if raw_stop is None:
        stops = []
    elif isinstance(raw_stop, str):
        stops = [raw_stop]
    elif isinstance(raw_stop, list):
        stops = raw_stop
    else:
        raise RequestError(
            f"'stop' must be a string or a list of strings, got {raw_stop!r}"[:300], param="stop"
        )
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

    rules: list[tuple[str, str]] = []
    ext = body.get("rxstream")
    if ext is not None:
        if not isinstance(ext, Mapping):
            raise RequestError(
                '\'rxstream\' must be an object like {"replace": {"old": "new"}}', param="rxstream"
            )
        unknown = set(ext) - {"replace"}
        if unknown:
            raise RequestError(f"unknown 'rxstream' fields: {sorted(unknown)}", param="rxstream")
        raw_rules = ext.get("replace")
        if isinstance(raw_rules, Mapping):
            pairs: list[Any] = list(raw_rules.items())
        elif isinstance(raw_rules, list):
            pairs = raw_rules
        elif raw_rules is None:
            pairs = []
        else:
            raise RequestError(
                "'rxstream.replace' must be an object or a list of [old, new] pairs", param="rxstream.replace"
            )
        if len(pairs) > limits.max_replace_rules:
            raise RequestError(
                f"at most {limits.max_replace_rules} replace rules are allowed", param="rxstream.replace"
            )
        for pair in pairs:
            if not (
                isinstance(pair, list | tuple) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
            ):
                raise RequestError(
                    f"a replace rule must be [old, new] strings, got {pair!r}"[:300], param="rxstream.replace"
                )
            old, new = pair
            if not old:
                raise RequestError("a replace pattern must be a non-empty string", param="rxstream.replace")
            if len(old) > limits.max_replace_chars or len(new) > limits.max_replace_chars:
                raise RequestError(
                    f"replace patterns and replacements are limited to {limits.max_replace_chars} characters",
                    param="rxstream.replace",
                )
            rules.append((old, new))

    return GenerationRequest(
        chat=chat,
        prompt=prompt,
        prompt_ids=prompt_ids,
        messages=messages,
        stream=stream,
        include_usage=include_usage,
        max_tokens=max_tokens,
        temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
        top_p=_number(body, "top_p", 1.0, 0.0, 1.0, lo_open=True),
        top_k=max(0, _int(body, "top_k", 0, -1, 1_000_000) or 0),
        repetition_penalty=_number(body, "repetition_penalty", 1.0, 0.0, 10.0, lo_open=True),
        seed=_int(body, "seed", None, 0, 2**63 - 1),
        stop=tuple(stops),
        replace=tuple(rules),
        max_tokens_given=body.get(budget_name) is not None,
    )
