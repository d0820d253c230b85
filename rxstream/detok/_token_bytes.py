"""Each token id's own bytes, and the way back from bytes to an id (:class:`TokenBytes`)."""

from __future__ import annotations

import threading
from typing import Any

from ._protocol import as_detok_tokenizer

__all__ = ["TokenBytes"]


class TokenBytes:
    """What each id of a tokenizer is on its own, as bytes, and which id some bytes are.

    An id's bytes are what the tokenizer's decoder makes of that id alone, special tokens spelled
    out (the per-id table of :mod:`rxstream.detok` where the decoder has one, else ``decode([id])``
    as UTF-8). They are what OpenAI's ``bytes`` field of a token holds. The reverse map is built on
    first use; when several ids have the same bytes, the lowest id is the answer. Thread-safe.
    """

    def __init__(self, tokenizer: Any) -> None:
        self._adapter = as_detok_tokenizer(tokenizer)
        table = self._adapter.decode_table(False)
        self._table = table.later if table is not None else None
        self._size = self._adapter.vocab_size
        self._cache: dict[int, bytes] = {}
        self._reverse: dict[bytes, int] | None = None
        self._lock = threading.Lock()

    @property
    def vocab_size(self) -> int:
        return self._size

    def bytes_of(self, token: int) -> bytes:
        """The bytes of ``token`` (``b""`` for an id the tokenizer does not have)."""
        table = self._table
        if table is not None:
            data = table[token] if 0 <= token < len(table) else None
            return data if data is not None else b""
        hit = self._cache.get(token)
        if hit is None:
            try:
                hit = self._adapter.decode([token], False).encode("utf-8", "surrogatepass")
            except Exception:  # an id the tokenizer rejects
                hit = b""
            with self._lock:
                if len(self._cache) < 1 << 20:
                    self._cache[token] = hit
        return hit

    def id_of(self, data: bytes) -> int | None:
        """The id whose bytes are ``data`` (the lowest one if several), or None."""
        reverse = self._reverse
        if reverse is None:
            with self._lock:
                reverse = self._reverse
                if reverse is None:
                    reverse = {}
                    for i in range(self._size):
                        reverse.setdefault(self._bytes_unlocked(i), i)
                    reverse.pop(b"", None)
                    self._reverse = reverse
        return reverse.get(data)

    def _bytes_unlocked(self, token: int) -> bytes:
        table = self._table
        if table is not None:
            data = table[token] if token < len(table) else None
            return data if data is not None else b""
        try:
            return self._adapter.decode([token], False).encode("utf-8", "surrogatepass")
        except Exception:
            return b""
