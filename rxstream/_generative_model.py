"""What the faces (CLI, server) need of a model (:class:`GenerativeModel`), so that any backend —
the ONNX one, a replayed recording, a user's own — can be served and chatted with."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import reactivex
from reactivex import abc

from ._finish import FinishCallback
from ._sampling_params import SamplingParams

__all__ = ["GenerativeModel", "compile_grammar", "supports_grammar", "supports_logprobs"]


@runtime_checkable
class GenerativeModel(Protocol):
    """A model that turns a prompt into a cold ``Observable`` of token ids.

    Attributes:
        tokenizer: its tokenizer (a ``tokenizers.Tokenizer``, or anything
            :func:`~rxstream.operators.detokenize` accepts).
        eos_token_ids: the ids that end a generation.
        context_length: prompt plus generated ids at most (None: unknown).
        provider: where it runs, for people to read (``"cpu"``, ``"cuda"``, ``"remote"``...).

    Optional members, used when present (a model without them keeps working):

    - ``chat_template``: the source of its chat template (``str``, or None). The server and the
      CLI read it to detect a reasoning format (``<think>``, ``[THINK]``, ``<|channel|>``) and
      whether the template renders ``tools`` itself.
    - ``render_chat(messages, add_generation_prompt=True, **template_vars) -> str``: the prompt
      text (the server routes the generation from the end of it, and passes ``tools=`` to a
      template that renders tools). Without it the prompt text is the decoded prompt ids.
    - ``generate(..., logprobs=k)`` (an int, or None for plain ids; as
      :meth:`rxstream.backends.OnnxModel.generate` takes it): with an int ``k`` it emits, for each
      id, a :class:`~rxstream.Piece` with no text carrying the id, its log-probability and the
      ``k`` most likely ids (``top_logprobs``). A model without it is served without
      log-probabilities (:func:`supports_logprobs` tells).
    """

    @property
    def tokenizer(self) -> Any: ...

    @property
    def eos_token_ids(self) -> frozenset[int]: ...

    @property
    def context_length(self) -> int | None: ...

    @property
    def provider(self) -> str: ...

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text`` (no special tokens added)."""
        ...

    def encode_chat(
        self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True
    ) -> list[int]:
        """The prompt ids of a chat (its chat template applied)."""
        ...

    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams | None = None,
        *,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
    ) -> reactivex.Observable[int]:
        """A cold observable of generated ids: each subscription generates anew, reports why it
        ended to ``on_finish`` before completing, and stops when disposed."""
        ...


def _takes(model: Any, name: str, *, through_kwargs: bool) -> bool:
    """Whether ``model.generate`` takes the keyword ``name`` (named; with ``through_kwargs``, or
    through ``**kwargs``)."""
    generate = getattr(model, "generate", None)
    if generate is None:
        return False
    try:
        params = inspect.signature(generate).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        (through_kwargs and p.kind is inspect.Parameter.VAR_KEYWORD)
        or (p.name == name and p.kind is not inspect.Parameter.POSITIONAL_ONLY)
        for p in params
    )


def supports_logprobs(model: Any) -> bool:
    """Whether ``model.generate`` takes a ``logprobs`` keyword (named, or through ``**kwargs``)."""
    return _takes(model, "logprobs", through_kwargs=True)


def supports_grammar(model: Any) -> bool:
    """Whether ``model.generate`` takes a ``grammar`` keyword (a
    :class:`~rxstream.structured.Grammar`: constrained decoding, as
    :meth:`rxstream.backends.OnnxModel.generate` does) and the model has a ``grammar_tokenizer``."""
    return hasattr(type(model), "grammar_tokenizer") and _takes(model, "grammar", through_kwargs=False)


def compile_grammar(model: Any, grammar: Any) -> None:
    """Compile ``grammar`` for ``model``'s tokenizer now (blocking; the model caches it), so that
    one that does not compile is refused before a generation starts.

    Raises:
        GrammarError: it does not compile.
    """
    model.grammar_tokenizer.constraint(grammar)
