"""rxstream: a language model's token stream turned into clean text as it is generated.

The building blocks are ReactiveX operators (:mod:`rxstream.operators`) that chain with
``pipe`` onto an ``Observable`` of token ids or text, plus backends that produce token ids
(:mod:`rxstream.backends`) and a marble-testing kit (:mod:`rxstream.testing`).

This module holds the core value types shared by all of them (:class:`Finish`, :class:`Piece`),
the engines behind the text operators for use outside Rx (:class:`Replacer`,
:class:`StopMatcher`, :class:`StreamDetokenizer`) with their batch functions
(:func:`replace_text`, :func:`stop_text`), a source that replays a recording (:func:`replay`)
and a blocking sink (:func:`run_text`).
"""

from ._detok_protocol import TokenizerProtocol
from ._detok_stream import StreamDetokenizer
from ._finish import Finish, FinishCallback, FinishReason, FinishRecorder
from ._generative_model import GenerativeModel
from ._piece import Piece
from ._replacer import Replacer, replace_text
from ._rules import Rules
from ._sampling_params import SamplingOptions, SamplingParams, SamplingParamsError, SamplingParamsTypeError
from ._sinks import run_text
from ._sources import replay
from ._stopper import StopMatcher, stop_text

__all__ = [
    "Finish",
    "FinishCallback",
    "FinishReason",
    "FinishRecorder",
    "GenerativeModel",
    "Piece",
    "Replacer",
    "Rules",
    "SamplingOptions",
    "SamplingParams",
    "SamplingParamsError",
    "SamplingParamsTypeError",
    "StopMatcher",
    "StreamDetokenizer",
    "TokenizerProtocol",
    "replace_text",
    "replay",
    "run_text",
    "stop_text",
]

__version__ = "0.1.0"
