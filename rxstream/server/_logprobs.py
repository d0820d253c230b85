"""Log-probabilities in OpenAI's shapes: chat's ``logprobs.content[]`` and completions'
``tokens``/``token_logprobs``/``top_logprobs``/``text_offset``.

Each token is described by its own bytes (what the tokenizer's decoder makes of that id alone,
special tokens spelled out), so a client can rebuild a character whose bytes are split across
tokens. Its ``token`` string is those bytes as UTF-8, with bytes that are not (yet) a whole
character written as ``\\xNN`` escapes (as DeepSeek's API does; vLLM sends U+FFFD there).
A log-probability that JSON cannot carry (``-inf``, NaN) or below -9999 is sent as -9999.0, the
value OpenAI uses for "very unlikely".
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from typing import Any

from .._piece import Piece, TopLogprobs
from ..detok import TokenBytes

__all__ = ["ChatLogprobs", "CompletionLogprobs", "TokenNames", "clamp"]

_FLOOR = -9999.0


def clamp(logprob: float) -> float:
    """A log-probability JSON can carry: ``-inf``, NaN and anything below -9999 become -9999.0."""
    return logprob if logprob >= _FLOOR else _FLOOR  # NaN >= x is False


class TokenNames:
    """Each id's own bytes and its ``token`` string, computed once per id (thread-safe)."""

    def __init__(self, tokenizer: Any) -> None:
        self._bytes = TokenBytes(tokenizer)
        self._cache: dict[int, tuple[str, list[int], int]] = {}

    def get(self, token: int | str) -> tuple[str, list[int], int]:
        """``(token string, its UTF-8 bytes, how many whole characters they hold)``."""
        if isinstance(token, str):  # a token named by its text (a model that gives no ids)
            raw = token.encode("utf-8", "surrogatepass")
            return token, list(raw), len(token)
        hit = self._cache.get(token)
        if hit is None:
            data = self._bytes.bytes_of(token)
            hit = (data.decode("utf-8", "backslashreplace"), list(data), len(data.decode("utf-8", "ignore")))
            if len(self._cache) < 1 << 20:
                self._cache[token] = hit  # a dict assignment is atomic: at worst computed twice
        return hit


def _tops(piece: Piece) -> Sequence[TopLogprobs]:
    return piece.top_logprobs if piece.top_logprobs is not None else [()] * piece.size


def _tokens(piece: Piece) -> Sequence[int | str]:
    if piece.ids:
        return piece.ids
    return piece.tokens or ()


class ChatLogprobs:
    """Chat's ``logprobs.content`` entries of the tokens of one text's pieces, in order.

    An entry goes out with the piece whose tokens complete its bytes' last character: a token
    that ends inside a character (its first bytes; the detokenizer gives the text before them to
    that token's piece) waits for the token that completes it, so the entries given so far
    always rebuild whole characters. :meth:`finish` gives those still waiting at the end --
    none when a stop cut that character (the text holds none of it).
    """

    def __init__(self, names: TokenNames) -> None:
        self.names = names
        self._waiting: list[dict[str, Any]] = []
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")

    def entries(self, piece: Piece) -> list[dict[str, Any]]:
        """One ``{token, logprob, bytes, top_logprobs}`` per token of ``piece`` whose bytes end a
        character, with the ones that waited for it."""
        if piece.logprobs is None:
            if piece.size:
                raise ValueError("the model gave no log-probabilities for its tokens")
            return []
        get = self.names.get
        out: list[dict[str, Any]] = []
        waiting, utf8 = self._waiting, self._utf8
        for tok, lp, alts in zip(_tokens(piece), piece.logprobs, _tops(piece), strict=True):
            name, raw, _ = get(tok)
            top = []
            for alt, alt_lp in alts:
                alt_name, alt_raw, _ = get(alt)
                top.append({"token": alt_name, "logprob": clamp(alt_lp), "bytes": alt_raw})
            waiting.append({"token": name, "logprob": clamp(lp), "bytes": raw, "top_logprobs": top})
            utf8.decode(bytes(raw))
            if not utf8.getstate()[0]:  # at a character boundary (invalid bytes end one too)
                out += waiting
                waiting.clear()
        return out

    def finish(self, cut: bool) -> list[dict[str, Any]]:
        """The entries still waiting at the end of the text (a character its tokens never
        completed): dropped when ``cut`` (a stop cut that character), else given."""
        waiting, self._waiting = self._waiting, []
        self._utf8.reset()
        return [] if cut else waiting


class CompletionLogprobs:
    """Completions' parallel lists for the tokens of pieces, with each token's offset in the text.

    ``text_offset`` is the character offset, in the choice's text, where the text a token
    completes starts (SEMANTICS §5): the start of its piece, plus the whole characters of the
    piece's earlier tokens (at most the piece's length, since ``replace`` may have rewritten it).
    A token that completes no character of its own (the first bytes of a character split across
    tokens) starts where the token that completes it does.
    """

    def __init__(self, names: TokenNames) -> None:
        self.names = names
        self.offset = 0

    def entries(self, piece: Piece) -> dict[str, list[Any]]:
        """``{tokens, token_logprobs, top_logprobs, text_offset}`` for ``piece``; advances the offset."""
        if piece.logprobs is None and piece.size:
            raise ValueError("the model gave no log-probabilities for its tokens")
        get = self.names.get
        lists: dict[str, list[Any]] = {
            "tokens": [],
            "token_logprobs": [],
            "top_logprobs": [],
            "text_offset": [],
        }
        start, inside = self.offset, 0
        for tok, lp, alts in zip(_tokens(piece), piece.logprobs or (), _tops(piece), strict=True):
            name, _, chars = get(tok)
            best: dict[str, float] = {}
            for alt, alt_lp in alts:
                best.setdefault(get(alt)[0], clamp(alt_lp))
            best.setdefault(name, clamp(lp))  # OpenAI: the sampled token is always there
            lists["tokens"].append(name)
            lists["token_logprobs"].append(clamp(lp))
            lists["top_logprobs"].append(best)
            lists["text_offset"].append(start + min(inside, len(piece.text)))
            inside += chars
        self.offset = start + len(piece.text)
        return lists

    @staticmethod
    def join(parts: Sequence[dict[str, list[Any]]]) -> dict[str, list[Any]]:
        """The lists of several pieces, concatenated."""
        out: dict[str, list[Any]] = {
            "tokens": [],
            "token_logprobs": [],
            "top_logprobs": [],
            "text_offset": [],
        }
        for part in parts:
            for key, values in part.items():
                out[key].extend(values)
        return out
