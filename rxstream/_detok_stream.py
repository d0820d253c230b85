"""Incremental detokenization without Rx: :class:`StreamDetokenizer` (``push`` ids, get text deltas).

Two engines sit behind one class:

* **table** (exact, O(1) per token): each id's bytes come from a precomputed
  :class:`~rxstream._detok_table.DecodeTable` and go through an incremental UTF-8 decoder that
  holds at most 3 bytes of an incomplete sequence. Bytes that can never become valid UTF-8 are
  emitted at once as U+FFFD (one per maximal invalid subpart) and never retracted.
* **window** (fallback for decoders no table reproduces; which decoder chains get a table is
  :class:`rxstream._detok_table._Builder`'s rule): the previous few ids are kept as context,
  ``decode(context + pending)`` is compared with ``decode(context)``, and the new suffix is emitted
  once it does not end in U+FFFD. When the decoded context is not a prefix of the new decode, or
  decodes keep ending in U+FFFD, it waits at most ``cap`` ids and then emits its best text rather
  than raising.

Neither keeps a list of all ids: memory per stream is bounded.

The window is exact when each token's text depends on a bounded number of tokens before it and
decoded text never changes when tokens follow (:func:`rxstream._detok_table.window_limit`). For
decoder chains beyond that (a multi-character ``Replace`` after ``Fuse``...) no bounded state is
exact: the window is used, best effort, and construction warns with :class:`InexactDecoderWarning`.
Skipped special ids never enter the window (``decode`` removes them before its decoder runs).

Invalid UTF-8 is where the stream and ``tokenizer.decode`` may differ: Hugging Face's ByteFallback
decoder turns a whole run of byte tokens into U+FFFD (one per byte) when any byte of it is
invalid, complete characters included, while the stream has already emitted those characters and
never retracts text (one U+FFFD per maximal invalid part, as Python's ``errors="replace"``).
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from ._describe import describe
from ._detok_protocol import TokenizerProtocol, as_detok_tokenizer
from ._detok_table import DecodeTable

__all__ = [
    "InexactDecoderWarning",
    "StreamDetokenizer",
    "TableEngine",
    "as_token_id",
    "as_token_ids",
    "incomplete_utf8_start",
    "out_of_vocab",
]

_REPLACEMENT = "\ufffd"


class InexactDecoderWarning(RuntimeWarning):
    """A tokenizer's decoder chain cannot be streamed exactly: some step sees the whole decoded
    text at once, so text already emitted can change when tokens follow, or depends on text
    arbitrarily far back (see :func:`rxstream._detok_table.window_limit`)."""


def incomplete_utf8_start(buf: bytes) -> int:
    """Index where a trailing UTF-8 sequence that is incomplete but can still become valid starts.

    Returns ``len(buf)`` when the end of ``buf`` needs no more bytes. The tail is at most 3 bytes.
    A lead byte followed by a byte it can never accept (``E0 80``, ``ED A0``, ``F4 90``...) is not
    held: it is invalid already.
    """
    n = len(buf)
    k = 1
    while k <= 3 and k <= n:
        b = buf[n - k]
        if b < 0x80:
            return n
        if b < 0xC0:  # continuation byte: look further back
            k += 1
            continue
        if b < 0xC2 or b > 0xF4:
            return n
        need = 2 if b < 0xE0 else (3 if b < 0xF0 else 4)
        if k >= need:
            return n
        if k >= 2:
            c = buf[n - k + 1]
            if (
                (b == 0xE0 and c < 0xA0)
                or (b == 0xED and c > 0x9F)
                or (b == 0xF0 and c < 0x90)
                or (b == 0xF4 and c > 0x8F)
            ):
                return n
        return n - k
    return n


def _common_prefix_len(a: str, b: str) -> int:
    n = min(len(a), len(b))
    k = 0
    while k < n and a[k] == b[k]:
        k += 1
    return k


def as_token_id(value: Any, owner: str = "detokenize") -> int:
    """``value`` as an int token id.

    Accepts ``int`` and integer scalars that implement ``__index__`` (``numpy.int64`` from
    numpy-based backends, a 0-d integer array); rejects ``bool`` (not an id) and everything else
    with a ``TypeError`` naming ``owner`` and the value.
    """
    if type(value) is int:
        return value
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(f"{owner}: token ids must be integers, got {describe(value)}")


def as_token_ids(value: Any, owner: str = "detokenize") -> tuple[int, ...]:
    """The ids of one item: an integer id (see :func:`as_token_id`) or a list, tuple or 1-d array
    of them. ``TypeError`` for anything else (strings, bytes, floats, bools, nested sequences)."""
    if type(value) is int:
        return (value,)
    if not isinstance(value, bool):
        try:
            return (operator.index(value),)
        except TypeError:
            pass
    if isinstance(value, list | tuple) or (hasattr(value, "__len__") and hasattr(value, "tolist")):
        items = value.tolist() if hasattr(value, "tolist") else value
        if isinstance(items, list | tuple):
            return tuple(i if type(i) is int else as_token_id(i, owner) for i in items)
    raise TypeError(f"{owner}: expected an int token id or a sequence of ids, got {describe(value)}")


def prompt_tuple(prompt_ids: Any, owner: str) -> tuple[int, ...]:
    """``prompt_ids`` (None, a sequence or an array of integer ids) as a tuple of ints."""
    if prompt_ids is None:
        return ()
    try:
        items = list(prompt_ids.tolist() if hasattr(prompt_ids, "tolist") else prompt_ids)
    except TypeError:
        raise TypeError(
            f"{owner}: prompt_ids must be a sequence of ints, got {describe(prompt_ids)}"
        ) from None
    try:
        return tuple(i if type(i) is int else as_token_id(i, owner) for i in items)
    except TypeError as exc:
        raise TypeError(f"{owner}: prompt_ids must be ints ({exc})") from None


def out_of_vocab(token_id: Any, size: int) -> ValueError:
    """The error for an id outside the vocabulary."""
    return ValueError(f"detokenize: token id {token_id!r} is outside the vocabulary (size {size})")


def _fast_texts(table: DecodeTable) -> tuple[list[str | None], list[tuple[str, bytes] | None]]:
    """Per id: its text when its bytes are complete UTF-8 on their own (else None), and for ids
    whose bytes end inside a character, (text before it, its incomplete bytes)."""
    texts, splits = table.fast_texts, table.split_tails
    if texts is not None and splits is not None:
        return texts, splits
    texts, splits = [], []
    for b in table.later:
        text: str | None = None
        split: tuple[str, bytes] | None = None
        if b is not None:
            try:
                text = b.decode("utf-8")
            except UnicodeDecodeError:
                cut = incomplete_utf8_start(b)
                if cut < len(b):
                    split = (b[:cut].decode("utf-8", "replace"), b[cut:])
        texts.append(text)
        splits.append(split)
    for i in table.run_ids:  # their text depends on the run they are in: always the slow path
        texts[i] = None
        splits[i] = None
    object.__setattr__(table, "fast_texts", texts)
    object.__setattr__(table, "split_tails", splits)
    return texts, splits


class TableEngine:
    """Exact per-id byte table + incremental UTF-8 (see module docstring)."""

    __slots__ = (
        "_first",
        "_first_bytes",
        "_held",
        "_in_run",
        "_later",
        "_lead_run",
        "_n",
        "_prompt_tail",
        "_run_drop",
        "_run_ids",
        "_run_rep",
        "_simple",
        "_skipped",
        "_splits",
        "_strip_char",
        "_strip_left",
        "_texts",
    )

    def __init__(self, table: DecodeTable) -> None:
        self._later = table.later
        self._first_bytes = table.first if table.first is not None else table.later
        self._n = len(table.later)
        self._texts, self._splits = _fast_texts(table)
        self._skipped = table.skipped
        self._strip_char = table.strip_char
        self._strip_left = table.strip_count if table.strip_char else 0
        self._held = b""
        self._first = table.first is not None
        self._simple = not (self._first or self._strip_left)
        self._prompt_tail = False
        self._run_ids = table.run_ids
        self._run_rep = table.run_rep
        self._run_drop = table.run_rep_drop_first
        self._in_run = False  # the last (non-skipped) id was a byte token of ``run_ids``
        self._lead_run = False  # ... and its run is the first token of the output

    def seed(self, prompt_ids: Sequence[int]) -> None:
        """Run the prompt through the engine without emitting its text.

        An incomplete character at the end of the prompt stays held: when the generation completes
        it, the whole character is emitted; when it turns out invalid, the U+FFFD that stands for
        the prompt's bytes belongs to the prompt and is not emitted.
        """
        self.push_many(prompt_ids)
        self._prompt_tail = bool(self._held)

    def push_one(self, i: int) -> str:
        """Text completed by one id."""
        if self._simple and 0 <= i < self._n:
            s = self._texts[i]
            if s is not None:
                return s
        return self._slow(i)

    def push_many(self, ids: Iterable[int]) -> str:
        """Text completed by several ids (same as pushing them one by one)."""
        texts = self._texts
        n = self._n
        parts: list[str] = []
        for i in ids:
            if self._simple and 0 <= i < n:
                s = texts[i]
                if s is not None:
                    if s:
                        parts.append(s)
                    continue
            s = self._slow(i)
            if s:
                parts.append(s)
        return "".join(parts)

    def _slow(self, i: int) -> str:
        if not (0 <= i < self._n) or self._later[i] is None:
            raise out_of_vocab(i, self._n)
        if i in self._skipped:
            return ""
        if self._run_rep:
            if i in self._run_ids:
                if not self._in_run:
                    self._in_run = True
                    self._lead_run = self._first
            else:
                self._in_run = self._lead_run = False
        if self._first:
            b = self._first_bytes[i]
            self._first = False
        else:
            if not self._held:
                split = self._splits[i]
                if split is not None:  # precomputed: complete text, then the start of a character
                    text, self._held = split
                    if self._strip_left and text:
                        text = self._strip(text)
                    self._simple = False
                    return text
            b = self._later[i]
        assert b is not None
        if self._held:
            b = self._held + b
        cut = incomplete_utf8_start(b)
        if cut < len(b):
            self._held = b[cut:]
            b = b[:cut]
        else:
            self._held = b""
        text = b.decode("utf-8", "replace")
        if self._prompt_tail and cut > 0:
            # The prompt's incomplete tail is resolved: a character, or one U+FFFD (dropped).
            self._prompt_tail = False
            if text[:1] == _REPLACEMENT:
                text = text[1:]
        if self._in_run and self._run_rep in text:
            # only byte tokens can still spell the replacement: every other token's is replaced
            text = text.replace(self._run_rep, "" if self._lead_run and self._run_drop else " ")
        if self._strip_left and text:
            text = self._strip(text)
        self._simple = not (self._held or self._first or self._strip_left or self._in_run)
        return text

    def _strip(self, text: str) -> str:
        c = self._strip_char
        cut = 0
        while self._strip_left and cut < len(text) and text[cut] == c:
            cut += 1
            self._strip_left -= 1
        if cut < len(text):
            self._strip_left = 0
        return text[cut:]

    def finish(self) -> str:
        """Flush held bytes (an incomplete sequence at the end becomes U+FFFD)."""
        if not self._held:
            return ""
        text = self._held.decode("utf-8", "replace")
        self._held = b""
        if self._prompt_tail:  # only the prompt's own incomplete tail was held
            self._prompt_tail = False
            text = text[1:]
        if self._strip_left and text:
            text = self._strip(text)
        self._simple = not (self._first or self._strip_left)
        return text


class _WindowEngine:
    """Windowed re-decode fallback for decoders without an exact table."""

    __slots__ = ("_cap", "_ctx", "_done", "_n", "_pend", "_skip", "_skipped", "_tok", "_window")

    def __init__(self, tok: TokenizerProtocol, skip_special_tokens: bool, window: int, cap: int) -> None:
        self._tok = tok
        self._skip = skip_special_tokens
        # Skipped special ids are removed before the decoder runs: they never enter the window
        # (a run of them would otherwise push the context the decoder needs out of it).
        special_ids = getattr(tok, "special_ids", None)
        self._skipped: frozenset[int] = (
            special_ids() if skip_special_tokens and callable(special_ids) else frozenset()
        )
        self._n = tok.vocab_size
        self._window = window
        self._cap = cap
        self._ctx: list[int] = []
        self._pend: list[int] = []
        self._done = ""  # the part of decode(ctx) already emitted

    def seed(self, prompt_ids: Sequence[int]) -> None:
        """Use the end of the prompt as context (its text is never emitted).

        The prompt decides its text up to its last complete character. When it ends inside one,
        ``decode`` shows U+FFFD for the incomplete bytes, and a ByteFallback decoder even turns the
        whole run of byte tokens into U+FFFD, complete characters included; so the decided text is
        taken from the prompt without its last 1-3 ids (at most one incomplete character), and
        those ids stay in the context for the generation to complete.
        """
        for i in prompt_ids:
            if not (0 <= i < self._n):
                raise out_of_vocab(i, self._n)
        kept = [i for i in prompt_ids if i not in self._skipped] if self._skipped else prompt_ids
        ids = list(kept[-(self._window + 6) :])
        n = len(ids)
        back, text = self._clean_start(ids, max(0, n - self._window))
        if text.endswith(_REPLACEMENT):
            for j in range(1, min(3, n) + 1):
                body = ids[: n - j]
                b, t = self._clean_start(body, max(0, len(body) - self._window))
                if not t.endswith(_REPLACEMENT):
                    # a lossy decoder (ByteLevel) may still show complete text the dropped ids hold
                    whole = self._decode(ids[b:]).rstrip(_REPLACEMENT)
                    back, text = b, (whole if whole.startswith(t) else t)
                    break
            else:
                text = text.rstrip(_REPLACEMENT)  # invalid bytes or a real U+FFFD: best effort
        self._ctx = ids[back:]
        self._done = text

    def _decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids, self._skip) if ids else ""

    def _clean_start(self, ids: list[int], start: int, full: str | None = None) -> tuple[int, str]:
        """Where the window over ``ids`` starts (``start``, or up to 3 ids later or earlier), and
        its text.

        A window that starts inside a character decodes it as U+FFFD (a ByteFallback decoder even
        turns the whole byte run into U+FFFD, complete characters included), and every later
        decode would then differ from the real text; starting at that character's end (or, when
        the window is too short for that, at its start) avoids that.
        """
        if start or full is None:
            try:
                text = self._decode(ids[start:])
            except RuntimeError:  # the decoder fails on this window's text alone: start earlier
                for back in range(start - 1, -1, -1):
                    try:
                        return back, self._decode(ids[back:])
                    except RuntimeError:
                        continue
                raise
        else:
            text = full
        if not start or not text.startswith(_REPLACEMENT):
            return start, text
        for back in (*range(start + 1, min(start + 4, len(ids))), *range(start - 1, max(start - 4, -1), -1)):
            try:
                cand = self._decode(ids[back:])
            except RuntimeError:
                continue
            if not cand.startswith(_REPLACEMENT):
                return back, cand
        return start, text

    def push_one(self, i: int) -> str:
        """Text completed by one id."""
        if not (0 <= i < self._n):
            raise out_of_vocab(i, self._n)
        if i in self._skipped:
            return ""
        self._pend.append(i)
        at_cap = len(self._pend) >= self._cap
        try:
            full = self._decode(self._ctx + self._pend)
        except RuntimeError:
            # Some decoders fail on some text (a Strip of more characters than there are): the
            # ids that follow may make it decodable; past ``cap`` ids the failure is the answer.
            if at_cap:
                raise
            return ""
        done = self._done
        if full.startswith(done):
            stable = len(full) if at_cap else len(full.rstrip(_REPLACEMENT))
            if stable <= len(done):
                if at_cap:
                    self._advance(full, len(full))
                return ""
            self._advance(full, stable)
            return full[len(done) : stable]
        if not at_cap:
            return ""  # the decoded context changed: wait, it usually settles within a few ids
        start = _common_prefix_len(full, done)
        self._advance(full, len(full))
        return full[start:]

    def push_many(self, ids: Iterable[int]) -> str:
        """Text completed by several ids (same as pushing them one by one)."""
        return "".join([self.push_one(i) for i in ids])

    def _advance(self, full: str, emitted: int) -> None:
        """Slide the context window after ``full[:emitted]`` has been emitted."""
        ids = self._ctx + self._pend
        start = max(0, len(ids) - self._window)
        back, text = self._clean_start(ids, start, full)
        self._ctx = ids[back:]
        self._pend = []
        held = len(full) - emitted
        self._done = text[: len(text) - held] if held else text

    def finish(self) -> str:
        """Emit whatever the pending ids still hold."""
        full = self._decode(self._ctx + self._pend)
        done = self._done
        start = len(done) if full.startswith(done) else _common_prefix_len(full, done)
        out = full[start:]
        self._advance(full, len(full))
        return out


class StreamDetokenizer:
    """Turns token ids into text deltas, exactly as ``tokenizer.decode`` would, in O(1) per token.

    >>> det = StreamDetokenizer(tokenizer)            # doctest: +SKIP
    >>> det.push(ids[0]) + det.push(ids[1:]) + det.finish() == tokenizer.decode(ids)  # doctest: +SKIP
    True

    Args:
        tokenizer: a ``tokenizers.Tokenizer``, a ``transformers`` fast tokenizer, a
            ``tiktoken.Encoding`` or a :class:`~rxstream.TokenizerProtocol`.
        skip_special_tokens: drop special tokens, as ``decode(..., skip_special_tokens=True)``.
        prompt_ids: ids that come before the generation (a sequence or a 1-d array of integer
            ids; None or empty for none): they set the context (leading-space rules, a character
            split across the boundary) and their text is never emitted.
        window: context ids kept by the windowed fallback (up to 6 more where the window would
            otherwise start or the prompt end inside a character; unused on the exact table path).
        cap: how many ids the windowed fallback waits at most while decodes end in U+FFFD or the
            decoded context changes.

    Raises:
        TypeError: for an unsupported tokenizer, or ``prompt_ids`` that are not integer ids.
        ValueError: for a bad ``window``/``cap``, or an out-of-vocabulary id in ``prompt_ids``
            (``push`` raises the same for out-of-vocabulary ids).

    Warns:
        InexactDecoderWarning: when the tokenizer's decoder chain cannot be streamed exactly by
            any bounded state (see the module docstring); the text is then decoded over a window.
    """

    __slots__ = ("engine", "exact", "finish", "push_many", "push_one", "tokenizer")

    def __init__(
        self,
        tokenizer: Any,
        *,
        skip_special_tokens: bool = True,
        prompt_ids: Iterable[int] | None = None,
        window: int = 6,
        cap: int = 8,
    ) -> None:
        if window < 1 or cap < 1:
            raise ValueError(f"StreamDetokenizer: window and cap must be >= 1, got {window}, {cap}")
        skip_special_tokens = bool(skip_special_tokens)
        tok = as_detok_tokenizer(tokenizer)
        self.tokenizer: TokenizerProtocol = tok
        prompt = prompt_tuple(prompt_ids, "StreamDetokenizer")
        table = tok.decode_table(skip_special_tokens)
        engine: TableEngine | _WindowEngine
        if table is not None:
            engine = TableEngine(table)
            if prompt:
                engine.seed(prompt)
        else:
            limit_of = getattr(tok, "window_limit", None)
            limit = limit_of() if callable(limit_of) else None
            if limit:
                warnings.warn(
                    f"detokenize: the tokenizer's decoder cannot be streamed exactly ({limit}); the "
                    "text is decoded over a window of ids and may differ from tokenizer.decode",
                    InexactDecoderWarning,
                    stacklevel=2,
                )
            engine = _WindowEngine(tok, skip_special_tokens, window, cap)
            if prompt:
                engine.seed(prompt)
        self.engine = engine
        """The engine (a :class:`TableEngine` on the exact path); for tight loops in operators."""
        self.exact: bool = table is not None
        """True on the exact table path, False on the windowed fallback."""
        self.push_one = engine.push_one
        """Push one id, return the text it completes (possibly "")."""
        self.push_many = engine.push_many
        """Push several ids, return the text they complete (possibly "")."""
        self.finish = engine.finish
        """Flush: return the text still held (an incomplete character becomes U+FFFD)."""

    def push(self, ids: int | Iterable[int]) -> str:
        """Push one id or several; return the newly completed text (possibly "").

        Ids may be ints or integer scalars such as ``numpy.int64`` (a list, tuple or 1-d array of
        them for several); a ``bool`` or any other value raises ``TypeError``.
        """
        if type(ids) is int:
            return self.push_one(ids)
        return self.push_many(as_token_ids(ids, "StreamDetokenizer"))
