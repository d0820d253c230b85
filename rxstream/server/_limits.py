"""What one request may ask of ``rxstream serve``, and how many connections and generations it
takes at once (:class:`ServerLimits`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["ServerLimits", "ServerLimitsError"]


class ServerLimitsError(ValueError):
    """A bad limit; ``field`` names it (the CLI names its option instead)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"ServerLimits: {field} {reason}")
        self.field = field
        self.reason = reason


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
        max_regex_rules: most regex rules (``rxstream.stop_regex`` and regex ``rxstream.replace``
            rules together).
        max_regex_chars: longest regex pattern.
        max_regex_hold: the largest (and the default) ``max_hold`` of a regex rule: the most text
            one rule may hold back, in characters.
        max_regex_nodes: the most automaton nodes a request's regex rules may make together
            (counted repeats are expanded: ``{1,250}`` is 250 copies); more is refused (400).
        max_regex_states: the most DFA states a request's regex rules may build while its text
            streams (states the shared, cached automaton already has cost nothing); past it the
            request fails with an error naming its rules.
        max_regex_seconds: the most CPU time a request's regex rules may spend building those
            states; likewise.
        max_messages: most chat messages.
        max_tools: most ``tools`` in a chat request (OpenAI allows 128).
        max_n: the largest ``n`` (choices per request; each is a generation of its own).
        max_logprobs: the most alternatives per token (``top_logprobs`` for chat, ``logprobs``
            for completions); at most 20, the most the ONNX backend reports.
        max_concurrency: generations running at once (the batch size when the model batches).
        max_queued: requests waiting for a generation slot; beyond that: 503.
        max_connections: open connections (idle ones included); beyond that uvicorn answers 503.
        header_timeout: seconds a connection may take to send a request's headers (from when it
            opens, or from the end of the previous response); then it is closed.
        body_timeout: seconds a request may take to send its body; then the answer is 408.
        idle_timeout: seconds a keep-alive connection may wait for its next request.
        send_timeout: seconds a client may read nothing while a response waits to be sent; then
            the connection is closed and its generation cancelled.
        keepalive_interval: seconds a stream may stay silent (its request waiting for a
            generation slot, the prompt being read, a slow token) before a ``: keep-alive``
            comment is sent, so that proxies do not close an idle stream.
        resume_grace: seconds a streamed generation goes on after its last client left, so that
            a client may come back with ``Last-Event-ID`` (0: cancel at once); a finished stream
            stays resumable as long.
        resume_buffer_bytes: the replay buffer of one stream (its events, in bytes).
        resume_total_bytes: all replay buffers together.
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
    max_regex_rules: int = 16
    max_regex_chars: int = 256
    max_regex_hold: int = 256
    max_regex_nodes: int = 4096
    max_regex_states: int = 1000
    max_regex_seconds: float = 0.025
    max_messages: int = 256
    max_tools: int = 128
    max_n: int = 8
    max_logprobs: int = 20
    max_concurrency: int = 16
    max_queued: int = 256
    max_connections: int = 1024
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    idle_timeout: float = 5.0
    send_timeout: float = 60.0
    keepalive_interval: float = 15.0
    resume_grace: float = 5.0
    resume_buffer_bytes: int = 2 << 20
    resume_total_bytes: int = 256 << 20

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name == "resume_grace":
                if (
                    isinstance(value, bool)
                    or not isinstance(value, int | float)
                    or not math.isfinite(value)
                    or value < 0
                ):
                    raise ServerLimitsError(name, f"must be 0 or a positive number of seconds, got {value!r}")
            elif name.endswith(("_timeout", "_interval", "_seconds")):
                if (
                    isinstance(value, bool)
                    or not isinstance(value, int | float)
                    or not math.isfinite(value)
                    or value <= 0
                ):
                    raise ServerLimitsError(name, f"must be a positive number of seconds, got {value!r}")
            elif (
                isinstance(value, bool)
                or not isinstance(value, int)
                or value < (0 if name == "max_queued" else 1)
            ):
                least = "an int >= 0" if name == "max_queued" else "a positive int"
                raise ServerLimitsError(name, f"must be {least}, got {value!r}")
        if self.max_logprobs > 20:
            raise ServerLimitsError("max_logprobs", f"must be at most 20, got {self.max_logprobs}")
