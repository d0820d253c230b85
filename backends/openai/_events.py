"""Reading an OpenAI-compatible event stream: server-sent event framing, finish reasons, and
the token ids and log-probabilities a choice carries."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from rxstream._finish import Finish, FinishReason
from rxstream._piece import Piece, TopLogprobs
from rxstream.detok import TokenBytes

__all__ = [
    "SseDecoder",
    "TypedEvents",
    "choice_tokens",
    "event_object",
    "event_str",
    "map_finish",
    "sse_data",
]


class SseDecoder:
    """The ``data`` of each server-sent event in a stream's raw bytes, chunk by chunk
    (:meth:`feed` each chunk as it comes, :meth:`end` at the stream's end): multi-line data
    joined with newlines; UTF-8, an invalid byte read as U+FFFD.

    Read in one pass over each chunk: lines end at ``\r\n``, ``\r`` or ``\n`` only (the event
    stream's own line ends; a U+2028 inside an event's JSON does not split it), and an event's
    bytes are decoded once."""

    __slots__ = ("_data", "_pending")

    def __init__(self) -> None:
        self._pending = b""  # the line in progress, and a ``\r`` whose ``\n`` may be in the next chunk
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[str]:
        """The events that ``chunk`` completes (in order)."""
        if not chunk:
            return []
        pending = self._pending
        buf = pending + chunk if pending else chunk
        cr = b""
        if b"\r" in buf:
            if buf[-1:] == b"\r":
                buf, cr = buf[:-1], b"\r"
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buf.split(b"\n")
        self._pending = lines.pop() + cr
        out: list[str] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    out.append((data[0] if len(data) == 1 else b"\n".join(data)).decode("utf-8", "replace"))
                    data = self._data = []
            elif line[:5] == b"data:":
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line == b"data":
                data.append(b"")
        return out

    def end(self) -> list[str]:
        """The last event, when the stream ends without the blank line that closes it."""
        line = self._pending.rstrip(b"\r")
        data = self._data
        self._pending, self._data = b"", []
        if line[:5] == b"data:":
            data.append(line[6:] if line[5:6] == b" " else line[5:])
        elif line == b"data":
            data.append(b"")
        return [b"\n".join(data).decode("utf-8", "replace")] if data else []


def sse_data(chunks: Iterable[bytes]) -> Iterator[str]:
    """Yield the ``data`` of each server-sent event in a stream's raw bytes (see
    :class:`SseDecoder`)."""
    decoder = SseDecoder()
    for chunk in chunks:
        yield from decoder.feed(chunk)
    yield from decoder.end()


def map_finish(reason: str | None, stop_reason: object) -> Finish:
    """The :class:`Finish` for an OpenAI ``finish_reason`` (and vLLM-style ``stop_reason``)."""
    if reason == "length":
        return Finish(FinishReason.LENGTH)
    if reason == "stop" and isinstance(stop_reason, str | int) and not isinstance(stop_reason, bool):
        return Finish(FinishReason.STOP, stop=stop_reason)
    return Finish(FinishReason.EOS)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _token_bytes(token: object, raw: object) -> bytes | None:
    """A token's bytes: its ``bytes`` field, else its text (``"bytes:\\xNN"`` spells raw bytes,
    as OpenAI's completions do for a partial character)."""
    if isinstance(raw, list) and all(
        isinstance(b, int) and not isinstance(b, bool) and 0 <= b < 256 for b in raw
    ):
        return bytes(raw)
    if not isinstance(token, str):
        return None
    if token.startswith("bytes:"):
        try:
            return token[6:].encode("latin-1").decode("unicode_escape").encode("latin-1")
        except (UnicodeError, ValueError):
            return None
    return token.encode("utf-8", "surrogatepass")


class _Token:
    """One token as a server describes it: text, maybe an id, maybe bytes."""

    __slots__ = ("bytes", "id", "text")

    def __init__(self, text: object, token_id: object = None, raw: object = None) -> None:
        self.text = text if isinstance(text, str) else ""
        self.id: int | None = None
        if isinstance(token_id, int) and not isinstance(token_id, bool):
            self.id = token_id
        elif self.text.startswith("token_id:") and self.text[9:].lstrip("-").isdigit():
            self.id = int(self.text[9:])  # vLLM's return_tokens_as_token_ids
        self.bytes = raw

    def resolve(self, vocab: TokenBytes | None) -> int | None:
        """The token's id: given by the server, or found from its bytes in ``vocab``."""
        if self.id is None and vocab is not None:
            data = _token_bytes(self.text, self.bytes)
            if data:
                self.id = vocab.id_of(data)
        return self.id


def _entries(
    choice: Mapping[str, Any],
) -> tuple[list[_Token], list[float | None], list[list[tuple[_Token, float]]] | None]:
    """The tokens of a choice's ``logprobs``, their logprobs and alternatives, in any of the
    formats servers send."""
    tokens: list[_Token] = []
    values: list[float | None] = []
    tops: list[list[tuple[_Token, float]]] | None = []
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, Mapping):
        return tokens, values, None
    content = logprobs.get("content")
    if isinstance(content, list):  # chat (OpenAI, vLLM), and llama.cpp for both endpoints
        for entry in content:
            if not isinstance(entry, Mapping):
                continue
            tokens.append(_Token(entry.get("token"), entry.get("id"), entry.get("bytes")))
            values.append(_number(entry.get("logprob")))
            alternatives = entry.get("top_logprobs")
            if tops is not None and isinstance(alternatives, list):
                row = []
                for alt in alternatives:
                    if isinstance(alt, Mapping) and (lp := _number(alt.get("logprob"))) is not None:
                        row.append((_Token(alt.get("token"), alt.get("id"), alt.get("bytes")), lp))
                tops.append(row)
            else:
                tops = None
    elif isinstance(logprobs.get("token_logprobs"), list):  # completions (OpenAI, vLLM)
        values = [_number(v) for v in logprobs["token_logprobs"]]
        raw_tokens = logprobs.get("tokens")
        texts = list(raw_tokens) if isinstance(raw_tokens, list) else [None] * len(values)
        tokens = [_Token(t) for t in texts]
        raw_tops = logprobs.get("top_logprobs")
        tops = None
        if isinstance(raw_tops, list) and len(raw_tops) == len(values):
            rows = []
            for alternatives in raw_tops:
                row = []
                if isinstance(alternatives, Mapping):
                    for text, value in alternatives.items():
                        if (lp := _number(value)) is not None:
                            row.append((_Token(text), lp))
                rows.append(row)
            tops = rows
    if tops is not None and len(tops) != len(tokens):
        tops = None
    return tokens, values, tops


def choice_tokens(choice: Mapping[str, Any], vocab: TokenBytes | None = None) -> Piece:
    """The tokens one streamed choice carries, as a :class:`~rxstream.Piece` with no text.

    Ids come from the choice's ``token_ids`` (vLLM's ``return_token_ids``), from each token's
    ``id`` (llama.cpp), from tokens spelled ``"token_id:N"`` (vLLM's ``return_tokens_as_token_ids``),
    or, with ``vocab``, from each token's bytes. When every token has an id the piece carries ids;
    otherwise it names its tokens by their text (``Piece.tokens``). Log-probabilities (and the
    alternatives, ``top_logprobs``) are kept when there is one per token.
    """
    tokens, values, tops = _entries(choice)
    raw_ids = choice.get("token_ids")
    given: list[int] | None = None
    if isinstance(raw_ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in raw_ids):
        given = list(raw_ids)
    if not tokens:
        return Piece("", tuple(given or ()))
    ids: list[int] | None
    if given is not None and len(given) == len(tokens):
        ids = given
    else:
        resolved = [t.resolve(vocab) for t in tokens]
        ids = None if None in resolved else [i for i in resolved if i is not None]
        if ids is None and given is not None:
            return Piece("", tuple(given))  # ids that do not pair with the logprobs
    logprobs = None
    if values and all(v is not None for v in values):
        logprobs = tuple(v for v in values if v is not None)
    top_logprobs: tuple[TopLogprobs, ...] | None = None
    if tops is not None and logprobs is not None:
        named = []
        for row in tops:
            alt_ids = [t.resolve(vocab) if ids is not None else None for t, _ in row]
            named.append(
                tuple((i if i is not None else t.text, lp) for i, (t, lp) in zip(alt_ids, row, strict=True))
            )
        top_logprobs = tuple(named)
    if ids is not None:
        return Piece("", tuple(ids), logprobs, top_logprobs)
    return Piece("", (), logprobs, top_logprobs, tuple(t.text for t in tokens))


def event_object(event: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``event[key]``, which must be a JSON object (ValueError naming the event type)."""
    value = event.get(key)
    if not isinstance(value, Mapping):
        raise ValueError(f"{event.get('type')}: '{key}' is not an object")
    return value


def event_str(event: Mapping[str, Any], key: str) -> str:
    """``event[key]``, which must be a string (ValueError naming the event type)."""
    value = event.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{event.get('type')}: '{key}' is not a string")
    return value


class TypedEvents:
    """What the readers of the typed-event APIs (Responses, Messages) share: the finish once the
    stream's last event was read, and each event's ``type``."""

    finish: Finish | None = None

    @property
    def ended(self) -> bool:
        """True once the stream's last event was read."""
        return self.finish is not None

    def saw_done(self) -> None:
        """A ``[DONE]`` event (not part of these APIs): the stream ends, as read so far."""

    @staticmethod
    def event_type(event: Mapping[str, Any]) -> str:
        """The event's ``type`` (ValueError: none)."""
        kind = event.get("type")
        if not isinstance(kind, str):
            raise ValueError("no 'type' string")
        return kind
