"""rxstream: a language model's token stream turned into clean text as it is generated.

The building blocks are ReactiveX operators (:mod:`rxstream.operators`) that chain with
``pipe`` onto an ``Observable`` of token ids or text, plus backends that produce token ids
(:mod:`rxstream.backends`) and a marble-testing kit (:mod:`rxstream.testing`).

This module holds the core value types shared by all of them.
"""

from ._detok_protocol import TokenizerProtocol
from ._detok_stream import StreamDetokenizer
from ._finish import Finish, FinishCallback, FinishReason, FinishRecorder
from ._piece import Piece

__all__ = [
    "Finish",
    "FinishCallback",
    "FinishReason",
    "FinishRecorder",
    "Piece",
    "StreamDetokenizer",
    "TokenizerProtocol",
]

__version__ = "0.1.0"
