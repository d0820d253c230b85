"""The ``detokenize`` operator: a stream of token ids -> a stream of text deltas (or Pieces)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, overload

from reactivex import Observable, abc
from reactivex.disposable import Disposable

from rxstream._finish import Finish, FinishReason
from rxstream._piece import Piece, TopLogprobs
from rxstream.detok import StreamDetokenizer, TableEngine, as_token_ids

from ._sink import OperatorSink, attribute_probe, operator
from ._token_ids import TokenItem

__all__ = ["detokenize"]


@overload
def detokenize(
    tokenizer: object,
    *,
    skip_special_tokens: bool = ...,
    prompt_ids: Iterable[int] | None = ...,
    aligned: Literal[False] = ...,
) -> Callable[[Observable[TokenItem]], Observable[str]]: ...


@overload
def detokenize(
    tokenizer: object,
    *,
    skip_special_tokens: bool = ...,
    prompt_ids: Iterable[int] | None = ...,
    aligned: Literal[True],
) -> Callable[[Observable[TokenItem]], Observable[Piece]]: ...


@overload
def detokenize(
    tokenizer: object,
    *,
    skip_special_tokens: bool = ...,
    prompt_ids: Iterable[int] | None = ...,
    aligned: bool,
) -> Callable[[Observable[TokenItem]], Observable[str | Piece]]: ...


def detokenize(
    tokenizer: object,
    *,
    skip_special_tokens: bool = True,
    prompt_ids: Iterable[int] | None = None,
    aligned: bool = False,
) -> (
    Callable[[Observable[TokenItem]], Observable[str]] | Callable[[Observable[TokenItem]], Observable[Piece]]
):
    """Turn token ids into text deltas, exactly as ``tokenizer.decode`` would, in O(1) per token.

    Items are single ids or sequences of ids (several tokens at once, e.g. speculative decoding:
    the text is the same however the ids are grouped). An id is an ``int`` or an integer scalar
    such as ``numpy.int64`` (what numpy-based backends produce); a sequence is a list, a tuple or a
    1-d integer array. A ``bool`` is not an id. A character whose bytes are spread over
    several tokens is emitted with its last token; at most 3 bytes of an incomplete UTF-8
    sequence are held, bytes that can never become valid are emitted at once as U+FFFD. Empty
    strings are never emitted. When the source completes, held bytes are flushed (an incomplete
    character becomes U+FFFD).

    The concatenated output equals ``tokenizer.decode(ids, skip_special_tokens=...)`` whenever the
    ids' bytes are valid UTF-8, for every decoder chain but those no bounded state can stream
    exactly (steps after ``Fuse`` that reach arbitrarily far back, such as ``Replace("  ", " ")``):
    those are decoded over a window, best effort, with an ``InexactDecoderWarning`` at
    construction (docs/SEMANTICS.md §4). The tokenizer is read when the operator is built and
    again at each subscription: a change to it (decoder, added or special tokens) applies to
    subscriptions made after it. Where they are not, one difference is deliberate: Hugging Face's
    ``ByteFallback`` decoder turns a whole run of ``<0xXX>`` tokens into U+FFFD (one per byte) as
    soon as any byte of the run is invalid, complete characters included; the stream has already
    emitted those characters and never retracts text, so it shows one U+FFFD per invalid part
    (``<0xE4><0xB8><0xAD><0xFF>`` gives "中\ufffd" here, four U+FFFD from ``decode``).

    Args:
        tokenizer: a ``tokenizers.Tokenizer``, a ``transformers`` fast tokenizer, a
            ``tiktoken.Encoding`` or a :class:`~rxstream.TokenizerProtocol`.
        skip_special_tokens: drop special tokens, as ``decode(..., skip_special_tokens=True)``.
        prompt_ids: the prompt's ids (a sequence or 1-d array of integer ids): they give the
            context (leading-space rules, a character split across the prompt/generation
            boundary); prompt text is never emitted.
        aligned: emit :class:`~rxstream.Piece` items that carry the ids whose text they complete
            (ids that give no text yet travel with the next piece; at completion the ids still
            held are emitted with whatever text they give, possibly ""). Items may also be
            :class:`~rxstream.Piece` values from a backend that reports log-probabilities: their
            ``ids`` are detokenized (their ``text`` is ignored), and in aligned mode each output
            piece carries the logprobs and top logprobs of its ids (None when any of its ids
            came without them).

    Raises:
        TypeError: at construction, for an unsupported tokenizer or non-integer ``prompt_ids``.
        ValueError: at construction, for an out-of-vocabulary prompt id.

    An out-of-vocabulary id or an item that is not an id goes to ``on_error`` (naming the id and
    the vocabulary size); the upstream is disposed.

    Marble diagram, with a byte-level tokenizer whose id ``n`` is the byte ``n`` (b carries two
    ids at once; the two bytes of "é" come as c and d, and "é" is emitted with d)::

        source:   -a-b-c-d-|      a=67, b=[97, 102], c=195, d=169
        operator: detokenize(tokenizer)
        result:   -a-b---e-|      a="C", b="af", e="é"
        upstream: ^--------!
    """
    # Adapt the tokenizer, check the prompt ids and build the table once, before any subscription;
    # each subscription gets a fresh detokenizer (reading the tokenizer's table again).
    new_detokenizer = StreamDetokenizer.factory(
        tokenizer, skip_special_tokens=skip_special_tokens, prompt_ids=prompt_ids, owner="detokenize"
    )

    if aligned:

        def make_aligned_sink(observer: abc.ObserverBase[Piece]) -> OperatorSink[TokenItem, Piece]:
            return _AlignedSink(observer, new_detokenizer())

        return operator("detokenize", make_aligned_sink)

    def make_sink(observer: abc.ObserverBase[str]) -> OperatorSink[TokenItem, str]:
        return _TextSink(observer, new_detokenizer())

    return operator("detokenize", make_sink)


class _TextSink(OperatorSink[TokenItem, str]):
    __slots__ = ("det", "push_many", "push_one")

    def __init__(self, observer: abc.ObserverBase[str], det: StreamDetokenizer) -> None:
        super().__init__("detokenize", observer)
        self.det = det
        self.push_one = det.push_one
        self.push_many = det.push_many

    def run(self, source: Observable[TokenItem], scheduler: abc.SchedulerBase | None) -> abc.DisposableBase:
        """Subscribe with a closure that serves most ids straight from the table (the hot path)."""
        if not self.det.exact:
            return super().run(source, scheduler)
        push_fast = self.det.push_fast
        emit = self.observer.on_next
        general = self._guarded_next

        def on_next(value: Any, _type: type = type, _int: type = int) -> None:
            # an id whose text needs no context: no held bytes, no first-token or strip rule
            if _type(value) is _int and not self.done:
                text = push_fast(value)
                if text is not None:
                    if text:
                        emit(text)
                    return
            general(value)

        self.subscribe_to(source, on_next, scheduler)
        return Disposable(self.dispose)

    def _guarded_next(self, value: TokenItem) -> None:
        if self.done:
            return
        try:
            if type(value) is int:
                text = self.push_one(value)
            else:
                text = self.push_many(as_token_ids(value.ids if isinstance(value, Piece) else value))
        except Exception as exc:  # an out-of-vocabulary id or a bad item: tell the subscriber
            self.fail(exc)
            return
        if text:
            self.observer.on_next(text)

    def on_next(self, value: TokenItem) -> None:
        self._guarded_next(value)

    def holding(self) -> bool:
        return self.det.holding

    def holding_probe(self) -> Callable[[], bool]:
        engine = self.det.engine  # the table engine holds exactly while it has bytes
        return attribute_probe(engine, "holding", "_held" if isinstance(engine, TableEngine) else None)

    def on_completed(self) -> None:
        text = self.det.finish()
        if text:
            self.observer.on_next(text)
        self.end(Finish(FinishReason.EOS), dispose=False)


class _AlignedSink(OperatorSink[TokenItem, Piece]):
    __slots__ = ("det", "held", "held_lps", "held_tops", "pending", "pending_at")

    def __init__(self, observer: abc.ObserverBase[Piece], det: StreamDetokenizer) -> None:
        super().__init__("detokenize", observer)
        self.det = det
        self.held: list[int] = []
        self.held_lps: list[float | None] = []
        self.held_tops: list[TopLogprobs | None] = []
        self.pending: tuple[int, ...] = ()  # the current item's ids; pending[pending_at:] not pushed
        self.pending_at = 0

    def _piece(self, text: str) -> Piece:
        lps, tops = self.held_lps, self.held_tops
        logprobs = None if None in lps else tuple(lp for lp in lps if lp is not None)
        top_logprobs = None if not tops or None in tops else tuple(t for t in tops if t is not None)
        piece = Piece(text, tuple(self.held), logprobs, top_logprobs)
        self.held.clear()
        lps.clear()
        tops.clear()
        return piece

    def on_next(self, value: TokenItem) -> None:
        logprobs: Sequence[float | None]
        tops: Sequence[TopLogprobs | None]
        if isinstance(value, Piece):
            ids = as_token_ids(value.ids)
            logprobs = value.logprobs if value.logprobs is not None else [None] * len(ids)
            tops = value.top_logprobs if value.top_logprobs is not None else [None] * len(ids)
        else:
            ids = as_token_ids(value)
            logprobs = [None] * len(ids)
            tops = [None] * len(ids)
        push_one = self.det.push_one
        self.pending = ids
        for k, (i, lp, top) in enumerate(zip(ids, logprobs, tops, strict=True)):
            text = push_one(i)
            self.held.append(i)
            self.held_lps.append(lp)
            self.held_tops.append(top)
            self.pending_at = k + 1
            if text:
                self.observer.on_next(self._piece(text))
                if self.done:  # a stage below ended the stream (and took the held ids)
                    break
        self.pending = ()
        self.pending_at = 0

    def holding(self) -> bool:
        return bool(self.held)

    def take_held(self) -> tuple[int, ...]:
        """The ids held for incomplete text, then those of the current item not pushed yet."""
        ids = (*self.held, *self.pending[self.pending_at :])
        self.held.clear()
        self.held_lps.clear()
        self.held_tops.clear()
        self.pending = ()
        self.pending_at = 0
        return ids

    def on_completed(self) -> None:
        text = self.det.finish()
        if text or self.held:
            self.observer.on_next(self._piece(text))
        self.end(Finish(FinishReason.EOS), dispose=False)
