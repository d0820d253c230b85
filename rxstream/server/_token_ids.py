"""The engine extension of ``/v1/completions``: ``return_token_ids`` (vLLM's name), so that a
gateway (:class:`rxstream.backends.gateway.GatewayModel`) in front of ``rxstream serve`` reads the
generated ids themselves, not their text.

With ``"return_token_ids": true`` each choice of a streamed chunk carries ``token_ids``: the ids
its generation produced since the previous chunk of that choice (ids whose text is still held
back, a partial character, come with a later chunk; every id has come by the chunk with the
``finish_reason``); a non-streamed choice carries all of them. The ids are those the model
emitted, in order, whatever the text rules (``stop``, ``replace``) then made of them.

With ``"return_tokens_as_token_ids": true`` (vLLM's name too) the tokens of completions'
``logprobs`` (``tokens`` and the keys of ``top_logprobs``) are spelled ``token_id:N``, so a client
reads each log-probability's id, not a text two ids may share (:class:`TokenIdNames`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from .._piece import Piece
from ._errors import RequestError
from ._logprobs import TokenNames

__all__ = ["FIELDS", "TokenIdNames", "TokenIds", "parse_return_token_ids", "parse_tokens_as_ids"]

FIELDS = frozenset({"return_token_ids", "return_tokens_as_token_ids"})
"""The request fields of the extension (completions requests)."""


def _flag(body: Mapping[str, Any], name: str) -> bool:
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise RequestError(f"{name!r} must be a boolean, got {value!r}"[:300], param=name)
    return value


def parse_return_token_ids(body: Mapping[str, Any]) -> bool:
    """``return_token_ids`` (absent or null: False)."""
    return _flag(body, "return_token_ids")


def parse_tokens_as_ids(body: Mapping[str, Any]) -> bool:
    """``return_tokens_as_token_ids`` (absent or null: False)."""
    return _flag(body, "return_tokens_as_token_ids")


class TokenIdNames(TokenNames):
    """Token names spelled ``token_id:N`` (bytes and character counts as ``names`` has them)."""

    def __init__(self, names: TokenNames) -> None:  # not super().__init__: it reads the whole vocabulary
        self.names = names

    def get(self, token: int | str) -> tuple[str, list[int], int]:
        _, raw, chars = self.names.get(token)
        return (f"token_id:{token}" if isinstance(token, int) else str(token)), raw, chars


class TokenIds:
    """The ids one generation's pipeline received that no chunk has carried yet: :meth:`add` on
    the pipeline's thread as each item enters it, :meth:`take` on the event loop as a chunk is
    written (the ids of a chunk's text entered the pipeline before the text came out of it)."""

    __slots__ = ("_ids", "_lock", "taken")

    def __init__(self) -> None:
        self._ids: list[int] = []
        self._lock = threading.Lock()
        self.taken: list[int] = []
        """Every id :meth:`take` returned, in order."""

    def add(self, item: Any) -> None:
        ids = item.ids if isinstance(item, Piece) else (item,)
        with self._lock:
            self._ids.extend(int(i) for i in ids)

    def take(self) -> list[int]:
        """The ids added since the last call."""
        with self._lock:
            ids, self._ids = self._ids, []
        self.taken.extend(ids)
        return ids
