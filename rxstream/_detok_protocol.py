"""The small tokenizer protocol detokenization needs, and adapters for the tokenizers we support.

:class:`TokenizerProtocol` is what :class:`~rxstream.StreamDetokenizer` and
:func:`rxstream.operators.detokenize` talk to. Anything that implements it can be plugged in; the
following are adapted automatically by :func:`as_detok_tokenizer`:

* ``tokenizers.Tokenizer`` (Hugging Face ``tokenizers``);
* a ``transformers`` fast tokenizer (through its ``backend_tokenizer``; ``transformers`` itself is
  never imported);
* a ``tiktoken.Encoding`` (``tiktoken`` is imported only when one is passed).

Adapters and their per-id tables are cached per tokenizer object, so building many detokenizers
for one tokenizer costs the table only once.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ._detok_table import DecodeTable, table_from_hf, table_from_token_bytes

__all__ = ["HFTokenizerAdapter", "TiktokenAdapter", "TokenizerProtocol", "as_detok_tokenizer"]

SUPPORTED = (
    "a tokenizers.Tokenizer, a transformers fast tokenizer (with .backend_tokenizer), "
    "a tiktoken.Encoding, or an object implementing rxstream.TokenizerProtocol "
    "(vocab_size, decode(ids, skip_special_tokens), decode_table(skip_special_tokens))"
)


@runtime_checkable
class TokenizerProtocol(Protocol):
    """What detokenization needs from a tokenizer.

    ``decode_table`` returns a :class:`~rxstream._detok_table.DecodeTable` when the tokenizer's
    decoding can be reproduced exactly from per-id bytes (the fast O(1) path), or ``None`` to make
    the detokenizer fall back to decoding a short window of ids with ``decode``.
    """

    @property
    def vocab_size(self) -> int:
        """Valid ids are ``0 <= id < vocab_size``."""
        ...

    def decode(self, ids: Sequence[int], skip_special_tokens: bool) -> str:
        """Decode a whole id sequence to text."""
        ...

    def decode_table(self, skip_special_tokens: bool) -> DecodeTable | None:
        """The per-id table, or ``None`` when none reproduces ``decode`` exactly."""
        ...


class HFTokenizerAdapter:
    """Adapter for a Hugging Face ``tokenizers.Tokenizer``."""

    __slots__ = ("__weakref__", "_key", "_lock", "_size", "_tables", "tokenizer")

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._key = tokenizer.get_vocab_size(with_added_tokens=True)
        added = tokenizer.get_added_tokens_decoder()
        size = int(tokenizer.get_vocab_size(with_added_tokens=True))
        self._size: int = max(size, max(added, default=-1) + 1)
        self._tables: dict[bool, DecodeTable | None] = {}
        self._lock = threading.Lock()

    def is_stale(self) -> bool:
        """Whether tokens were added to the tokenizer since this adapter was built."""
        return bool(self.tokenizer.get_vocab_size(with_added_tokens=True) != self._key)

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included."""
        return self._size

    def decode(self, ids: Sequence[int], skip_special_tokens: bool) -> str:
        """``tokenizer.decode`` (a panic inside the Rust library becomes a RuntimeError)."""
        try:
            return str(self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens))
        except (KeyboardInterrupt, SystemExit, GeneratorExit, Exception):
            raise
        except BaseException as exc:  # pyo3's PanicException derives from BaseException
            raise RuntimeError(f"detokenize: the tokenizer failed to decode {list(ids)!r}: {exc}") from exc

    def decode_table(self, skip_special_tokens: bool) -> DecodeTable | None:
        """Built from the decoder configuration on first use, then cached."""
        with self._lock:
            if skip_special_tokens not in self._tables:
                self._tables[skip_special_tokens] = table_from_hf(self.tokenizer, skip_special_tokens)
            return self._tables[skip_special_tokens]


class TiktokenAdapter:
    """Adapter for a ``tiktoken.Encoding``.

    tiktoken's ``decode`` keeps special tokens; with ``skip_special_tokens=True`` they are dropped
    (the reference is then ``decode`` of the ids without them).
    """

    __slots__ = ("__weakref__", "_lock", "_special", "_tables", "encoding")

    def __init__(self, encoding: Any) -> None:
        self.encoding = encoding
        self._special = frozenset(int(encoding.encode_single_token(s)) for s in encoding.special_tokens_set)
        self._tables: dict[bool, DecodeTable] = {}
        self._lock = threading.Lock()

    @property
    def vocab_size(self) -> int:
        """``Encoding.n_vocab``."""
        return int(self.encoding.n_vocab)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool) -> str:
        """``Encoding.decode`` (errors replaced), without special ids when asked."""
        if skip_special_tokens:
            ids = [i for i in ids if i not in self._special]
        return str(self.encoding.decode(list(ids), errors="replace"))

    def decode_table(self, skip_special_tokens: bool) -> DecodeTable:
        """Every id's bytes (``decode_single_token_bytes``); tiktoken has no context rules."""
        with self._lock:
            table = self._tables.get(skip_special_tokens)
            if table is None:
                token_bytes: list[bytes | None] = []
                for i in range(self.vocab_size):
                    try:
                        b = bytes(self.encoding.decode_single_token_bytes(i))
                    except KeyError:
                        token_bytes.append(None)
                        continue
                    token_bytes.append(b"" if skip_special_tokens and i in self._special else b)
                skipped = self._special if skip_special_tokens else frozenset()
                table = table_from_token_bytes(token_bytes, skipped)
                self._tables[skip_special_tokens] = table
            return table


_cache_lock = threading.Lock()
_weak_cache: weakref.WeakKeyDictionary[Any, TokenizerProtocol] = weakref.WeakKeyDictionary()
_strong_cache: OrderedDict[int, tuple[Any, TokenizerProtocol]] = OrderedDict()
_STRONG_CACHE_SIZE = 8


def _is_hf_tokenizer(obj: Any) -> bool:
    try:
        from tokenizers import Tokenizer
    except ImportError:  # pragma: no cover - tokenizers is a dependency
        return False
    return isinstance(obj, Tokenizer)


def _is_tiktoken(obj: Any) -> bool:
    cls = type(obj)
    if not cls.__module__.startswith("tiktoken"):
        return False
    return hasattr(obj, "decode_single_token_bytes") and hasattr(obj, "n_vocab")


def _make_adapter(tokenizer: Any) -> TokenizerProtocol | None:
    if _is_hf_tokenizer(tokenizer):
        return HFTokenizerAdapter(tokenizer)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and _is_hf_tokenizer(backend):
        return HFTokenizerAdapter(backend)
    if _is_tiktoken(tokenizer):
        return TiktokenAdapter(tokenizer)
    return None


def as_detok_tokenizer(tokenizer: Any) -> TokenizerProtocol:
    """Return the :class:`TokenizerProtocol` for ``tokenizer`` (cached per tokenizer object).

    Raises:
        TypeError: when ``tokenizer`` is none of the supported kinds.
    """
    if isinstance(tokenizer, (HFTokenizerAdapter, TiktokenAdapter)):
        return tokenizer
    with _cache_lock:
        try:
            cached = _weak_cache.get(tokenizer)
        except TypeError:  # not weak-referenceable
            entry = _strong_cache.get(id(tokenizer))
            cached = entry[1] if entry is not None and entry[0] is tokenizer else None
        if cached is not None and not (isinstance(cached, HFTokenizerAdapter) and cached.is_stale()):
            return cached
    adapter = _make_adapter(tokenizer)
    if adapter is None:
        if isinstance(tokenizer, TokenizerProtocol):
            return tokenizer
        raise TypeError(
            f"detokenize: unsupported tokenizer of type {type(tokenizer).__module__}."
            f"{type(tokenizer).__qualname__}; expected {SUPPORTED}"
        )
    with _cache_lock:
        try:
            _weak_cache[tokenizer] = adapter
        except TypeError:
            _strong_cache[id(tokenizer)] = (tokenizer, adapter)
            while len(_strong_cache) > _STRONG_CACHE_SIZE:
                _strong_cache.popitem(last=False)
    return adapter
