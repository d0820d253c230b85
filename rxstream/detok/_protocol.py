"""The small tokenizer protocol detokenization needs, and adapters for the tokenizers we support.

:class:`TokenizerProtocol` is what :class:`~rxstream.StreamDetokenizer` and
:func:`rxstream.operators.detokenize` talk to. Anything that implements it can be plugged in; the
following are adapted automatically by :func:`as_detok_tokenizer`:

* ``tokenizers.Tokenizer`` (Hugging Face ``tokenizers``);
* a ``transformers`` fast tokenizer (through its ``backend_tokenizer``; ``transformers`` itself is
  never imported);
* a ``tiktoken.Encoding`` (``tiktoken`` is imported only when one is passed).

Per-id tables are cached per tokenizer object (by identity, without keeping it alive), so building
many detokenizers for one tokenizer costs the table only once; a ``tokenizers.Tokenizer``'s tables are
rebuilt when the tokenizer changes in a way that can change decoding (see :func:`hf_fingerprint`).
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ._chains import window_limit
from ._tables import DecodeTable, table_from_hf, table_from_token_bytes

__all__ = [
    "HFTokenizerAdapter",
    "TiktokenAdapter",
    "TokenizerProtocol",
    "as_detok_tokenizer",
    "hf_fingerprint",
]

SUPPORTED = (
    "a tokenizers.Tokenizer, a transformers fast tokenizer (with .backend_tokenizer), "
    "a tiktoken.Encoding, or an object implementing rxstream.TokenizerProtocol "
    "(vocab_size, decode(ids, skip_special_tokens), decode_table(skip_special_tokens))"
)


@runtime_checkable
class TokenizerProtocol(Protocol):
    """What detokenization needs from a tokenizer.

    ``decode_table`` returns a :class:`~rxstream.detok.DecodeTable` when the tokenizer's
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


_SAMPLED_IDS = 16
"""How many ids (spread over the vocabulary, plus the last 8) the fingerprint reads the token of."""


def hf_fingerprint(tokenizer: Any) -> tuple[Any, ...]:
    """What ``decode`` of a ``tokenizers.Tokenizer`` depends on, cheaply: the vocabulary size,
    the decoder's serialized configuration, every added token (id, content, special) and the
    token of a sample of ids (the model's full vocabulary is too large to read on every use:
    serializing it takes tens of milliseconds for a 50 000-token vocabulary).

    The normalizer and pre-tokenizer do not take part in decoding.
    """
    size = int(tokenizer.get_vocab_size(with_added_tokens=True))
    decoder = tokenizer.decoder
    state = None if decoder is None else decoder.__getstate__()
    added = {i: (t.content, t.special) for i, t in tokenizer.get_added_tokens_decoder().items()}
    sample = tuple(map(tokenizer.id_to_token, _sample_ids(size)))
    return (size, state, added, sample)


@functools.lru_cache(maxsize=64)
def _sample_ids(size: int) -> tuple[int, ...]:
    step = max(1, size // _SAMPLED_IDS)
    return (*range(0, size, step), *range(max(0, size - 8), size))


class _TableCache:
    """The per-tokenizer state adapters share: tables per ``skip_special_tokens``, the window limit,
    and what they were built from. Cached per tokenizer object; it never refers to the tokenizer
    (an adapter does), so the cache does not keep tokenizers alive."""

    __slots__ = ("fingerprint", "limit", "lock", "size", "tables")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.fingerprint: tuple[Any, ...] | None = None
        self.size = 0
        self.tables: dict[bool, DecodeTable | None] = {}
        self.limit: list[str | None] = []


class HFTokenizerAdapter:
    """Adapter for a Hugging Face ``tokenizers.Tokenizer``.

    Its tables follow the tokenizer: each :meth:`decode_table` (once per detokenizer built) checks
    :func:`hf_fingerprint` and rebuilds them when the decoder, the added tokens (a token made
    special included), the vocabulary size or a sampled token changed since.
    """

    __slots__ = ("_cache", "tokenizer")

    def __init__(self, tokenizer: Any, cache: _TableCache | None = None) -> None:
        self.tokenizer = tokenizer
        self._cache = cache if cache is not None else _TableCache()

    def _refresh(self) -> None:
        """Drop the tables when the tokenizer changed (called with the lock held)."""
        cache = self._cache
        fingerprint = hf_fingerprint(self.tokenizer)
        if fingerprint == cache.fingerprint:
            return
        cache.fingerprint = fingerprint
        cache.size = max(fingerprint[0], max(fingerprint[2], default=-1) + 1)
        cache.tables = {}
        cache.limit = []

    def is_stale(self) -> bool:
        """Whether the tokenizer changed in a way that can change decoding since the tables were built."""
        with self._cache.lock:
            return bool(hf_fingerprint(self.tokenizer) != self._cache.fingerprint)

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included (as of the last :meth:`decode_table`)."""
        if self._cache.fingerprint is None:
            with self._cache.lock:
                self._refresh()
        return self._cache.size

    def decode(self, ids: Sequence[int], skip_special_tokens: bool) -> str:
        """``tokenizer.decode`` (a panic inside the Rust library becomes a RuntimeError)."""
        try:
            return str(self.tokenizer.decode(list(ids), skip_special_tokens=bool(skip_special_tokens)))
        except (KeyboardInterrupt, SystemExit, GeneratorExit, Exception):
            raise
        except BaseException as exc:  # pyo3's PanicException derives from BaseException
            raise RuntimeError(f"detokenize: the tokenizer failed to decode {list(ids)!r}: {exc}") from exc

    def decode_table(self, skip_special_tokens: bool) -> DecodeTable | None:
        """Built from the decoder configuration on first use, then cached until the tokenizer
        changes (checked on every call)."""
        skip = bool(skip_special_tokens)
        cache = self._cache
        with cache.lock:
            self._refresh()
            if skip not in cache.tables:
                cache.tables[skip] = table_from_hf(self.tokenizer, skip)
            return cache.tables[skip]

    def special_ids(self) -> frozenset[int]:
        """The ids ``decode(..., skip_special_tokens=True)`` removes before decoding."""
        with self._cache.lock:
            self._refresh()
            fingerprint = self._cache.fingerprint
        assert fingerprint is not None
        return frozenset(i for i, (_, special) in fingerprint[2].items() if special)

    def window_limit(self) -> str | None:
        """Why decoding a window of ids cannot reproduce ``decode`` (``None``: it can)."""
        cache = self._cache
        with cache.lock:
            self._refresh()
            if not cache.limit:
                cache.limit.append(window_limit(self.tokenizer))
            return cache.limit[0]


class TiktokenAdapter:
    """Adapter for a ``tiktoken.Encoding`` (immutable: its tables are built once).

    tiktoken's ``decode`` keeps special tokens; with ``skip_special_tokens=True`` they are dropped
    (the reference is then ``decode`` of the ids without them).
    """

    __slots__ = ("_cache", "_special", "encoding")

    def __init__(self, encoding: Any, cache: _TableCache | None = None) -> None:
        self.encoding = encoding
        self._special = frozenset(int(encoding.encode_single_token(s)) for s in encoding.special_tokens_set)
        self._cache = cache if cache is not None else _TableCache()

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
        skip = bool(skip_special_tokens)
        with self._cache.lock:
            table = self._cache.tables.get(skip)
            if table is None:
                token_bytes: list[bytes | None] = []
                for i in range(self.vocab_size):
                    try:
                        b = bytes(self.encoding.decode_single_token_bytes(i))
                    except KeyError:
                        token_bytes.append(None)
                        continue
                    token_bytes.append(b"" if skip and i in self._special else b)
                skipped = self._special if skip else frozenset()
                table = table_from_token_bytes(token_bytes, skipped)
                self._cache.tables[skip] = table
            return table


# Table caches per tokenizer object, by identity (never by ``==``: two tokenizers that compare
# equal must not share tables): id -> (weak reference, cache), or (the object, cache) for the
# few most recent objects that cannot be weakly referenced. The lock is reentrant: a weak
# reference's callback can run (garbage collection) while it is held.
_cache_lock = threading.RLock()
_weak_cache: dict[int, tuple[weakref.ref[Any], _TableCache]] = {}
_strong_cache: OrderedDict[int, tuple[Any, _TableCache]] = OrderedDict()
_STRONG_CACHE_SIZE = 8


def _forget(key: int, ref: weakref.ref[Any]) -> None:
    with _cache_lock:
        entry = _weak_cache.get(key)
        if entry is not None and entry[0] is ref:
            del _weak_cache[key]


def _table_cache(obj: Any) -> _TableCache:
    """The table cache of ``obj`` (created on first use)."""
    key = id(obj)
    with _cache_lock:
        entry = _weak_cache.get(key)
        if entry is not None and entry[0]() is obj:
            return entry[1]
        strong = _strong_cache.get(key)
        if strong is not None and strong[0] is obj:
            return strong[1]
        cache = _TableCache()
        try:
            ref = weakref.ref(obj, lambda r: _forget(key, r))
        except TypeError:
            _strong_cache[key] = (obj, cache)
            while len(_strong_cache) > _STRONG_CACHE_SIZE:
                _strong_cache.popitem(last=False)
        else:
            _weak_cache[key] = (ref, cache)
        return cache


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


def as_detok_tokenizer(tokenizer: Any) -> TokenizerProtocol:
    """Return the :class:`TokenizerProtocol` for ``tokenizer``.

    Adapters share their tables per tokenizer object (a transformers tokenizer's per backend
    tokenizer, whatever it is at the time of the call).

    Raises:
        TypeError: when ``tokenizer`` is none of the supported kinds.
    """
    if isinstance(tokenizer, (HFTokenizerAdapter, TiktokenAdapter)):
        return tokenizer
    if _is_hf_tokenizer(tokenizer):
        return HFTokenizerAdapter(tokenizer, _table_cache(tokenizer))
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and _is_hf_tokenizer(backend):
        return HFTokenizerAdapter(backend, _table_cache(backend))
    if _is_tiktoken(tokenizer):
        return TiktokenAdapter(tokenizer, _table_cache(tokenizer))
    if isinstance(tokenizer, TokenizerProtocol):
        return tokenizer
    raise TypeError(
        f"detokenize: unsupported tokenizer of type {type(tokenizer).__module__}."
        f"{type(tokenizer).__qualname__}; expected {SUPPORTED}"
    )
