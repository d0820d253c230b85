"""Serving engines that give text only (``rxstream serve --upstream URL --upstream-mode text``:
a :class:`~rxstream.backends.GatewayModel` with ``mode="text"``, in front of OpenAI's API,
Ollama, or any OpenAI-compatible server that returns no token ids).

A chat's messages go to the engine's own chat endpoint (the engine applies its template), a
completion's prompt text to its completions endpoint; the engine's text deltas then run through
the request's ``stop`` (strings and ``stop_regex``) and ``replace`` rules here, as a local
model's text does after detokenize. ``completion_tokens`` is the engine's count (its usage
chunk), or, when the stream was cut before it (a stop here, a client that left), the local
tokenizer's count of the text received. What needs the generated ids is refused before anything
is sent, with a one-line 400 naming the field (:func:`check_text_request`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import reactivex
from reactivex import abc
from reactivex import operators as ops

from .._finish import Finish
from .._generative_model import GenerativeModel
from ..face import model_defaults
from ._errors import RequestError
from ._requests import GenerationRequest
from ._shutdown import cut_at_shutdown

__all__ = ["TextCount", "build_remote_text", "check_text_request", "text_mode"]

_ENGINE = "the upstream engine gives text only (--upstream-mode text)"


def text_mode(model: GenerativeModel) -> bool:
    """Whether ``model`` is a gateway in text mode (its engines give text, not token ids)."""
    return getattr(model, "mode", None) == "text" and callable(getattr(model, "text", None))


def check_text_request(request: GenerationRequest) -> None:
    """Refuse what a text-only engine cannot serve: a 400 naming the field, in one line."""

    def needs_ids(what: str, param: str) -> RequestError:
        return RequestError(f"{what}, and {_ENGINE}: serve it with --upstream-mode ids", param=param)

    if request.logprobs is not None:
        raise needs_ids("log-probabilities are per token id", "logprobs")
    if request.return_token_ids or request.tokens_as_ids:
        raise needs_ids("token ids are asked for", "return_token_ids")
    if request.prompt_ids is not None:
        raise needs_ids("the prompt is token ids", "prompt")
    if request.tools:
        raise needs_ids("tool calls are parsed from the model's own text, delimiters included", "tools")
    if request.sampling.get("stop_token_ids"):
        raise needs_ids("stop_token_ids stops on token ids", "stop_token_ids")


class TextCount:
    """A text-mode generation's ``completion_tokens``: the engine's usage, else the local
    tokenizer's count of the text received (the stream was cut before the usage chunk)."""

    __slots__ = ("_count", "_encode", "_parts", "reported")

    def __init__(self, encode: Callable[[str], list[int]]) -> None:
        self._encode = encode
        self._parts: list[str] = []
        self._count: int | None = None
        self.reported: int | None = None

    def on_text(self, text: str) -> None:
        self._parts.append(text)

    def on_usage(self, usage: Any) -> None:
        tokens = getattr(usage, "output_tokens", None)
        if isinstance(tokens, int):
            self.reported = tokens

    @property
    def tokens(self) -> int:
        if self.reported is not None:
            return self.reported
        if self._count is None:
            text = "".join(self._parts)
            self._count = len(self._encode(text)) if text else 0
        return self._count


def build_remote_text(
    model: GenerativeModel,
    request: GenerationRequest,
    count: TextCount,
    *,
    on_finish: Callable[[Finish], None] | None,
    scheduler: abc.SchedulerBase | None,
    until: reactivex.Observable[Any] | None,
    choice: int = 0,
) -> reactivex.Observable[str]:
    """One choice's text from a text-mode engine, through the request's ``stop`` and ``replace``
    (the order of :func:`~rxstream.operators.text_pipeline`: a stop is matched on the engine's
    text, the replacements rewrite what is shown)."""
    from rxstream.operators import replace, stop

    params = request.sampling_params(model_defaults(model), choice)
    prompt: Any = [dict(m) for m in request.messages or ()] if request.chat else request.prompt
    text_of = getattr(model, "text")  # noqa: B009 - a text-mode gateway's, checked by text_mode()
    text: reactivex.Observable[str] = text_of(
        prompt, params, on_finish=on_finish, scheduler=scheduler, usage=count.on_usage
    )
    if until is not None:
        text = cut_at_shutdown(text, until, on_finish)
    text = text.pipe(ops.do_action(on_next=count.on_text))
    if request.stop.strings:
        text = text.pipe(stop(request.stop, on_finish=on_finish))
    if request.replace.pairs:
        text = text.pipe(replace(request.replace))
    return text
