"""rxstream: a language model's token stream turned into clean text as it is generated.

The building blocks are ReactiveX operators (:mod:`rxstream.operators`) that chain with
``pipe`` onto an ``Observable`` of token ids or text, plus backends that produce token ids
(:mod:`rxstream.backends`) and a marble-testing kit (:mod:`rxstream.testing`).

This module holds the core value types shared by all of them (:class:`Finish`, :class:`Piece`),
the engines behind the text operators for use outside Rx (:class:`Replacer`,
:class:`StopMatcher`, :class:`StreamDetokenizer`) with their batch functions
(:func:`replace_text`, :func:`stop_text`), regular-expression rules for the text operators
(:func:`rx`, reported as :class:`RegexStop`), a source that replays a recording (:func:`replay`)
and a blocking sink (:func:`run_text`).

The engines live in two subpackages: :mod:`rxstream.text` (the pattern automaton, replace rules
and stop strings) and :mod:`rxstream.detok` (tokenizer adapters, per-id tables, the exact and
windowed detokenizer engines); the names above are re-exported from them.
"""

from ._finish import Finish, FinishCallback, FinishOnce, FinishReason, FinishRecorder
from ._generative_model import GenerativeModel, supports_logprobs
from ._piece import Piece, TopLogprobs
from ._sampling_params import SamplingOptions, SamplingParams, SamplingParamsError, SamplingParamsTypeError
from ._sinks import run_text
from ._sources import replay
from .detok import InexactDecoderWarning, StreamDetokenizer, TokenizerProtocol
from .text import (
    HoldLimitError,
    RegexBudget,
    RegexBudgetError,
    RegexRule,
    RegexStop,
    Replacer,
    Rules,
    StopMatcher,
    replace_text,
    rx,
    stop_text,
)

__all__ = [
    "Finish",
    "FinishCallback",
    "FinishOnce",
    "FinishReason",
    "FinishRecorder",
    "GenerativeModel",
    "HoldLimitError",
    "InexactDecoderWarning",
    "Piece",
    "RegexBudget",
    "RegexBudgetError",
    "RegexRule",
    "RegexStop",
    "Replacer",
    "Rules",
    "SamplingOptions",
    "SamplingParams",
    "SamplingParamsError",
    "SamplingParamsTypeError",
    "StopMatcher",
    "StreamDetokenizer",
    "TokenizerProtocol",
    "TopLogprobs",
    "replace_text",
    "replay",
    "run_text",
    "rx",
    "stop_text",
    "supports_logprobs",
]

__version__ = "0.1.0"
