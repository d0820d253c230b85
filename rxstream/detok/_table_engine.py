"""The exact engine: per-id bytes from a :class:`~._tables.DecodeTable` through an incremental
UTF-8 decoder (see :mod:`rxstream.detok._stream` for how it is chosen)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ._ids import out_of_vocab
from ._tables import DecodeTable

__all__ = ["TableEngine", "incomplete_utf8_start"]

_REPLACEMENT = "\ufffd"


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

    def push_fast(self, i: int) -> str | None:
        """Push ``i`` when its text needs no context and return that text; otherwise push nothing
        and return ``None`` (then :meth:`push_one` must take it).

        The hot path of operators: one id whose bytes are complete UTF-8 on their own, while no
        bytes are held and no first-token, strip or byte-run rule applies; such an id changes no
        state, so this never raises.
        """
        if self._simple and 0 <= i < self._n:
            return self._texts[i]
        return None

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
