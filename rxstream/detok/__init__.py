"""The detokenizer engine: token ids in, text deltas out, exactly as ``tokenizer.decode``, outside Rx.

What is in it, bottom up:

- :mod:`._chains` -- the ``tokenizers`` decoder chains modelled per token: which ones a per-id
  table reproduces (:class:`~._chains.ChainBuilder`), which ones a window streams exactly
  (:func:`window_limit`).
- :mod:`._tables` -- :class:`DecodeTable`, every id's bytes plus the decoder's context rules, built
  by :func:`table_from_hf` or :func:`table_from_token_bytes`.
- :mod:`._protocol` -- :class:`TokenizerProtocol`, what detokenization needs from a tokenizer, and
  :func:`as_detok_tokenizer` with the adapters for ``tokenizers``, ``transformers`` and
  ``tiktoken`` (tables cached per tokenizer object).
- :mod:`._ids` -- token ids as items carry them (:func:`as_token_id`, :func:`as_token_ids`).
- :mod:`._table_engine` / :mod:`._window_engine` -- the exact O(1)-per-token engine
  (:class:`TableEngine`) and the windowed fallback (:class:`WindowEngine`).
- :mod:`._stream` -- :class:`StreamDetokenizer`, which picks the engine, and
  :class:`InexactDecoderWarning`.
- :mod:`._token_bytes` -- :class:`TokenBytes`: each id's own bytes, and the id of some bytes.

The ``detokenize`` operator (:mod:`rxstream.operators`) runs on :class:`StreamDetokenizer`;
:class:`StreamDetokenizer`, :class:`TokenizerProtocol` and :class:`InexactDecoderWarning` are also
exported from :mod:`rxstream`.
"""

from ._chains import byte_token_value, bytelevel_char_to_byte, window_limit
from ._ids import as_token_id, as_token_ids, out_of_vocab, prompt_tuple
from ._protocol import (
    HFTokenizerAdapter,
    TiktokenAdapter,
    TokenizerProtocol,
    as_detok_tokenizer,
    hf_fingerprint,
)
from ._stream import InexactDecoderWarning, StreamDetokenizer
from ._table_engine import TableEngine, incomplete_utf8_start
from ._tables import DecodeTable, table_from_hf, table_from_token_bytes
from ._token_bytes import TokenBytes
from ._window_engine import WindowEngine

__all__ = [
    "DecodeTable",
    "HFTokenizerAdapter",
    "InexactDecoderWarning",
    "StreamDetokenizer",
    "TableEngine",
    "TiktokenAdapter",
    "TokenBytes",
    "TokenizerProtocol",
    "WindowEngine",
    "as_detok_tokenizer",
    "as_token_id",
    "as_token_ids",
    "byte_token_value",
    "bytelevel_char_to_byte",
    "hf_fingerprint",
    "incomplete_utf8_start",
    "out_of_vocab",
    "prompt_tuple",
    "table_from_hf",
    "table_from_token_bytes",
    "window_limit",
]
