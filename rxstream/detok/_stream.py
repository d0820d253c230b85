"""Incremental detokenization without Rx: :class:`StreamDetokenizer` (``push`` ids, get text deltas).

Two engines sit behind one class:

* **table** (exact, O(1) per token): each id's bytes come from a precomputed
  :class:`~rxstream.detok.DecodeTable` and go through an incremental UTF-8 decoder that
  holds at most 3 bytes of an incomplete sequence. Bytes that can never become valid UTF-8 are
  emitted at once as U+FFFD (one per maximal invalid subpart) and never retracted.
* **window** (fallback for decoders no table reproduces; which decoder chains get a table is
  :class:`rxstream.detok._chains.ChainBuilder`'s rule): the previous few ids are kept as context,
  ``decode(context + pending)`` is compared with ``decode(context)``, and the new suffix is emitted
  once it does not end in U+FFFD. When the decoded context is not a prefix of the new decode, or
  decodes keep ending in U+FFFD, it waits at most ``cap`` ids and then emits its best text rather
  than raising.

Neither keeps a list of all ids: memory per stream is bounded.

The window is exact when each token's text depends on a bounded number of tokens before it and
decoded text never changes when tokens follow (:func:`rxstream.detok.window_limit`). For
decoder chains beyond that (a multi-character ``Replace`` after ``Fuse``...) no bounded state is
exact: the window is used, best effort, and construction warns with :class:`InexactDecoderWarning`.
Skipped special ids never enter the window (``decode`` removes them before its decoder runs).

Invalid UTF-8 is where the stream and ``tokenizer.decode`` may differ: Hugging Face's ByteFallback
decoder turns a whole run of byte tokens into U+FFFD (one per byte) when any byte of it is
invalid, complete characters included, while the stream has already emitted those characters and
never retracts text (one U+FFFD per maximal invalid part, as Python's ``errors="replace"``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import Any

from ._ids import as_token_ids, prompt_tuple
from ._post_replace import ReplacingEngine
from ._protocol import TokenizerProtocol, as_detok_tokenizer
from ._table_engine import TableEngine
from ._window_engine import WindowEngine

__all__ = ["InexactDecoderWarning", "StreamDetokenizer"]


class InexactDecoderWarning(RuntimeWarning):
    """A tokenizer's decoder chain cannot be streamed exactly: some step sees the whole decoded
    text at once, so text already emitted can change when tokens follow, or depends on text
    arbitrarily far back (see :func:`rxstream.detok.window_limit`)."""


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

    __slots__ = ("engine", "exact", "finish", "push_fast", "push_many", "push_one", "tokenizer")

    def __init__(
        self,
        tokenizer: Any,
        *,
        skip_special_tokens: bool = True,
        prompt_ids: Iterable[int] | None = None,
        window: int = 6,
        cap: int = 8,
    ) -> None:
        _check_window(window, cap)
        tok = as_detok_tokenizer(tokenizer)
        prompt = prompt_tuple(prompt_ids, "StreamDetokenizer")
        self._setup(tok, bool(skip_special_tokens), prompt, window, cap)

    @classmethod
    def factory(
        cls,
        tokenizer: Any,
        *,
        skip_special_tokens: bool = True,
        prompt_ids: Iterable[int] | None = None,
        window: int = 6,
        cap: int = 8,
        owner: str = "StreamDetokenizer",
    ) -> Callable[[], StreamDetokenizer]:
        """Adapt ``tokenizer`` and check the arguments once; return a function that builds a fresh
        detokenizer for each stream (as the constructor would, without checking them again).

        The tokenizer's table is built now, and with ``prompt_ids`` a first detokenizer is built
        (so that an out-of-vocabulary prompt id raises here). Each detokenizer built later reads the
        tokenizer's table again, so a tokenizer changed in between (decoder, added or special
        tokens) applies to detokenizers built after the change. ``owner`` names the caller in the
        errors raised here.

        Raises:
            As the constructor.
        """
        _check_window(window, cap)
        tok = as_detok_tokenizer(tokenizer)
        skip = bool(skip_special_tokens)
        prompt = prompt_tuple(prompt_ids, owner)

        def build() -> StreamDetokenizer:
            det = cls.__new__(cls)
            det._setup(tok, skip, prompt, window, cap)
            return det

        if prompt:
            build()
        else:
            tok.decode_table(skip)
        return build

    @property
    def holding(self) -> bool:
        """Whether generated bytes or ids wait for the rest of their text (nothing is lost: they
        come with a later push, or with :meth:`finish`)."""
        return bool(self.engine.holding)

    def _setup(
        self,
        tok: TokenizerProtocol,
        skip_special_tokens: bool,
        prompt: tuple[int, ...],
        window: int,
        cap: int,
    ) -> None:
        self.tokenizer: TokenizerProtocol = tok
        table = tok.decode_table(skip_special_tokens)
        engine: TableEngine | ReplacingEngine | WindowEngine
        if table is not None:
            engine = TableEngine(table)
            if table.post_replace:
                engine = ReplacingEngine(engine, table.post_replace)
        else:
            limit_of = getattr(tok, "window_limit", None)
            limit = limit_of() if callable(limit_of) else None
            if limit:
                warnings.warn(
                    f"detokenize: the tokenizer's decoder cannot be streamed exactly ({limit}); the "
                    "text is decoded over a window of ids: where that step's result depends on text "
                    "before the window, or on tokens still to come, the streamed text can differ "
                    "from tokenizer.decode (text already emitted is never taken back)",
                    InexactDecoderWarning,
                    stacklevel=3,  # the caller of the constructor or of a factory's function
                )
            engine = WindowEngine(tok, skip_special_tokens, window, cap)
        if prompt:
            engine.seed(prompt)
        self.engine = engine
        """The engine: a :class:`~rxstream.detok.TableEngine` on the exact path."""
        self.exact: bool = table is not None
        """True on the exact table path, False on the windowed fallback."""
        self.push_one = engine.push_one
        """Push one id, return the text it completes (possibly "")."""
        self.push_many = engine.push_many
        """Push several ids, return the text they complete (possibly "")."""
        self.push_fast = engine.push_fast
        """The hot path: push one id and return its text when it needs no context (no held bytes,
        no first-token, strip or byte-run rule; never on the windowed fallback); otherwise push
        nothing and return ``None`` (then :attr:`push_one` must take the id). Never raises."""
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


def _check_window(window: int, cap: int) -> None:
    if window < 1 or cap < 1:
        raise ValueError(f"StreamDetokenizer: window and cap must be >= 1, got {window}, {cap}")
