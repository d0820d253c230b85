"""Reading an OpenAI-compatible event stream: server-sent event framing, finish reasons, and
the token ids and log-probabilities a choice carries."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rxstream._finish import Finish, FinishReason

__all__ = ["ids_and_logprobs", "map_finish", "sse_events"]


def sse_events(lines: Iterator[str]) -> Iterator[str]:
    """Yield the ``data`` of each server-sent event (multi-line data joined with newlines)."""
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
    if data:
        yield "\n".join(data)


def map_finish(reason: str | None, stop_reason: object) -> Finish:
    """The :class:`Finish` for an OpenAI ``finish_reason`` (and vLLM-style ``stop_reason``)."""
    if reason == "length":
        return Finish(FinishReason.LENGTH)
    if reason == "stop" and isinstance(stop_reason, str | int) and not isinstance(stop_reason, bool):
        return Finish(FinishReason.STOP, stop=stop_reason)
    return Finish(FinishReason.EOS)


def ids_and_logprobs(choice: Mapping[str, Any]) -> tuple[tuple[int, ...], tuple[float, ...] | None]:
    """Token ids and log-probabilities carried by one streamed choice, as far as they pair up."""
    raw_ids = choice.get("token_ids")
    ids: list[int] | None = None
    if isinstance(raw_ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in raw_ids):
        ids = list(raw_ids)
    tokens: list[object] = []
    values: list[object] = []
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, Mapping):
        if isinstance(logprobs.get("content"), list):  # chat format
            for entry in logprobs["content"]:
                if isinstance(entry, Mapping):
                    tokens.append(entry.get("token"))
                    values.append(entry.get("logprob"))
        elif isinstance(logprobs.get("token_logprobs"), list):  # completions format
            values = list(logprobs["token_logprobs"])
            raw_tokens = logprobs.get("tokens")
            tokens = list(raw_tokens) if isinstance(raw_tokens, list) else [None] * len(values)
    if ids is None and tokens:
        parsed: list[int] = []
        for tok in tokens:
            if isinstance(tok, str) and tok.startswith("token_id:") and tok[9:].lstrip("-").isdigit():
                parsed.append(int(tok[9:]))
            else:
                break
        else:
            ids = parsed
    if ids is None:
        return (), None
    if values and len(values) == len(ids) and all(isinstance(v, int | float) for v in values):
        return tuple(ids), tuple(float(v) for v in values)  # type: ignore[arg-type]
    return tuple(ids), None
