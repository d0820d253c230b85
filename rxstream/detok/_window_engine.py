"""The windowed fallback engine: re-decode a short window of ids with the tokenizer's ``decode``
(see :mod:`rxstream.detok._stream` for when it is used)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ._ids import out_of_vocab
from ._protocol import TokenizerProtocol

__all__ = ["WindowEngine"]

_REPLACEMENT = "\ufffd"


def _common_prefix_len(a: str, b: str) -> int:
    n = min(len(a), len(b))
    k = 0
    while k < n and a[k] == b[k]:
        k += 1
    return k


class WindowEngine:
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

    @property
    def holding(self) -> bool:
        """Whether ids wait for their text to settle."""
        return bool(self._pend)

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

    def push_fast(self, i: int) -> None:
        """No id is served without a decode here: always ``None`` (see :meth:`TableEngine.push_fast`)."""
        return None

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
