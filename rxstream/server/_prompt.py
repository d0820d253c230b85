"""A request's prompt as token ids, and its token budget fitted to the model's context."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from .._generative_model import compile_grammar, supports_grammar
from ..chat import ChatPlan, UnsupportedChoice, plan_chat
from ..structured import GrammarError, UnsupportedConstraint
from ._errors import RequestError
from ._requests import GenerationRequest
from ._state import ServerState
from ._text_mode import check_text_request, text_mode

__all__ = ["INLINE_PROMPT_BYTES", "fit_budget", "prompt_ids"]

_R = TypeVar("_R")


INLINE_PROMPT_BYTES = 4096
"""A chat request body at most this long, with no tools and a plain text answer, is templated and
tokenized on the event loop (about 0.1 ms for a short chat; a thread hop cost a lone client's first
token more than that); a larger one off it, so no request holds the others' events for long."""


async def prompt_ids(
    state: ServerState, request: GenerationRequest, body_bytes: int | None = None
) -> tuple[list[int], ChatPlan | None]:
    """The request's prompt as token ids (chat template applied), checked against the limits, and
    for a chat how its output is routed (:func:`rxstream.chat.plan_chat`). ``body_bytes``: the
    request body's length where known (a small plain chat is templated without a thread hop, see
    :data:`INLINE_PROMPT_BYTES`)."""
    model = state.model
    if text_mode(model):
        check_text_request(request)
    plan: ChatPlan | None = None
    if request.chat:
        assert request.messages is not None
        messages = [dict(m) for m in request.messages]
        small = (
            body_bytes is not None
            and body_bytes <= INLINE_PROMPT_BYTES
            and not request.tools
            and request.output.kind == "text"
        )
        try:
            ids, plan = await _maybe_in_thread(
                not small,
                plan_chat,
                model,
                messages,
                reasoning_format=state.reasoning_format,
                tools=request.tools,
                tool_choice=request.tool_choice,
                parallel_tool_calls=request.parallel_tool_calls,
                output=request.output,
                constrain=supports_grammar(model),
            )
            grammar = plan.grammar if plan is not None else None
            if grammar is not None:  # compiled now (cached): a bad one is a 400, not a failed stream
                await asyncio.to_thread(compile_grammar, model, grammar)
        except UnsupportedChoice as exc:
            raise RequestError(str(exc), param="tool_choice") from None
        except (UnsupportedConstraint, GrammarError) as exc:
            raise RequestError(" ".join(str(exc).split())[:300], param="response_format") from None
        except Exception as exc:
            message = " ".join(str(exc).split())[:300]  # one line
            raise RequestError(
                f"the chat template failed on these messages: {message}", param="messages"
            ) from exc
    elif request.prompt_ids is not None:
        vocab = model.tokenizer.get_vocab_size(with_added_tokens=True)
        bad = [i for i in request.prompt_ids if not 0 <= i < vocab]
        if bad:
            raise RequestError(f"prompt token ids out of range [0, {vocab}): {bad[:5]}", param="prompt")
        ids = list(request.prompt_ids)
    else:
        assert request.prompt is not None
        try:
            ids = list(await asyncio.to_thread(model.encode, request.prompt))
        except Exception as exc:
            raise RequestError(
                f"tokenizing the prompt failed: {type(exc).__name__}: {exc}", status=500, kind="server_error"
            ) from exc
    if not ids:
        raise RequestError("the prompt is empty after tokenization", param="prompt")
    _check_length(state, request, ids)
    return ids, plan


async def _maybe_in_thread(thread: bool, func: Callable[..., _R], *args: Any, **kwargs: Any) -> _R:
    """``func(*args, **kwargs)``, off the event loop when ``thread``."""
    if thread:
        return await asyncio.to_thread(func, *args, **kwargs)
    return func(*args, **kwargs)


def _check_length(state: ServerState, request: GenerationRequest, ids: list[int]) -> None:
    limits = state.limits
    prompt_param = "messages" if request.chat else "prompt"
    if len(ids) > limits.max_prompt_tokens:
        raise RequestError(
            f"the prompt has {len(ids)} tokens; at most {limits.max_prompt_tokens} are allowed",
            param=prompt_param,
        )
    context = state.context_length
    if context is not None and len(ids) >= context:
        raise RequestError(
            f"the prompt has {len(ids)} tokens; the model's context of {context} tokens leaves no "
            "room for an answer",
            param=prompt_param,
        )


def fit_budget(state: ServerState, request: GenerationRequest, prompt_tokens: int) -> GenerationRequest:
    """Check ``max_tokens`` against the context left by the prompt; shorten a default budget.

    Raises:
        RequestError: an explicit ``max_tokens`` does not fit.
    """
    context = state.context_length
    if context is None or prompt_tokens + request.max_tokens <= context:
        return request
    if not request.max_tokens_given:  # as OpenAI servers do: the default is what is left
        return dataclasses.replace(request, max_tokens=context - prompt_tokens)
    raise RequestError(
        f"the prompt ({prompt_tokens} tokens) plus max_tokens ({request.max_tokens}) exceeds "
        f"the model's context of {context} tokens",
        param="max_tokens",
    )
