"""Streaming-parser parity: a parser fed its input in any chunks gives what a batch parse gives.

Streaming parsers of model output (reasoning and tool-call splitters, JSON parsers, stop handlers)
often behave differently when their input is cut differently than in their author's tests: a tag
split over two chunks goes unseen, a partial tag held at the end is dropped, text already emitted
turns out to be part of a tag. This kit feeds a parser many chunkings of an input and checks:

* **parity** -- the streamed events, normalized, equal the batch reference's, for every chunking;
* **retraction** -- nothing emitted is taken back: after every chunk, the events so far
  (normalized) are a prefix of the final ones (the last text chunk may be a prefix of the
  corresponding final one: more of that text may follow);
* **flush** -- nothing is held after the end: a stream that ends after any chunk (then finished)
  gives the batch result of the text so far; an Rx operator must complete when its input does.

The parser under test is a ``factory`` returning a ``(feed, finish)`` pair (``feed(chunk)`` and
``finish()`` return an iterable of events, a ``str``/``bytes`` for one text event, or None; an
object with ``feed`` and ``finish`` methods does too), or an Rx ``operator``
(``Observable[str] -> Observable[event]``). The ``reference`` turns the whole input into the
expected events (a ``str`` is one text event); without one, the parser's own run on the whole
input is the reference, so only chunking invariance is checked. ``normalize`` maps events to what
is compared (default :func:`merge_text`: adjacent text chunks of the same kind are joined, empty
ones dropped, since parsers may split text however they like).

Entry points: :func:`check_parity` (``hypothesis`` draws the chunkings), :func:`check_parity_exhaustive`
(every chunking with up to two cuts, no ``hypothesis`` needed), :func:`check_chunking` (one
chunking) and :class:`Parity` (the same with the parser set once). A failure raises
:class:`ParityError` (an ``AssertionError``) showing the minimized chunking, what was expected and
what came out.

>>> from rxstream import StopMatcher, stop_text
>>> def stopper():                      # the engine behind rxstream.operators.stop
...     matcher = StopMatcher(["</s>"])
...     return matcher.feed, matcher.flush
>>> def batch(text):
...     return stop_text(text, ["</s>"])[0]
>>> check_parity_exhaustive("Hi</s>tail", factory=stopper, reference=batch)

A stop handler that sees the stop string only when one chunk holds all of it:

>>> def naive():
...     stopped = []
...     def feed(chunk):
...         if stopped:
...             return ""
...         head, found, _ = chunk.partition("</s>")
...         stopped.extend(found)
...         return head
...     return feed, lambda: ""
>>> try:
...     check_parity_exhaustive("Hi</s>tail", factory=naive, reference=batch)
... except AssertionError as exc:
...     print(exc)
streaming parity failed: the streamed result differs from the batch result
  input: 'Hi</s>tail' (10 characters)
  chunking: 'Hi<' | '/s>tail'  (2 chunks, found by all 1-cut chunkings)
  expected (batch, normalized):
    ['Hi']
  actual (streamed, normalized):
    ['Hi</s>tail']
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ._chunkings import Chunker, Chunking, Data, chunkings, default_chunkers
from ._merge import MergeText, merge_text
from ._parity_report import CHECKS, Check, ParityError
from ._parity_run import Factory, Operator
from ._parity_session import _Found, _Session

if TYPE_CHECKING:
    from hypothesis import settings as HypothesisSettings

__all__ = [
    "CHECKS",
    "Check",
    "MergeText",
    "Parity",
    "ParityError",
    "check_chunking",
    "check_parity",
    "check_parity_exhaustive",
    "merge_text",
]

Reference = Callable[[Any], Any]
Normalize = Callable[[list[Any]], Any]

_ALL_TRUNCATIONS = 24
"""Drawn chunkings with at most this many cut points are finished early at every one of them;
longer ones at a drawn subset of at most :data:`_DRAWN_TRUNCATIONS` of them."""
_DRAWN_TRUNCATIONS = 8


class Parity:
    """A streaming parser and what it must agree with; check it with :meth:`check`,
    :meth:`check_exhaustive` or :meth:`check_chunking`.

    Args:
        factory: makes a fresh parser for one stream: returns ``(feed, finish)`` or an object with
            ``feed`` and ``finish`` methods. ``feed(chunk)`` and ``finish()`` return an iterable of
            events, a ``str``/``bytes`` (one text event) or None (no events).
        operator: or an Rx operator, ``Observable[str | bytes] -> Observable[event]``.
        reference: the batch parse, ``input -> events`` (an iterable of events, or one ``str``);
            None: the parser's own run on the whole input.
        normalize: events -> what is compared (default :func:`merge_text`). For the retraction
            check it must return a list, tuple, ``str`` or ``bytes``.
        checks: which of :data:`CHECKS` to run.
        timeout: how long an operator may take to complete once its input has (seconds).

    Raises:
        TypeError: not exactly one of ``factory`` and ``operator``, or a check that is not one of
            :data:`CHECKS`.
    """

    def __init__(
        self,
        *,
        factory: Factory | None = None,
        operator: Operator | None = None,
        reference: Reference | None = None,
        normalize: Normalize | None = None,
        checks: Collection[Check] = CHECKS,
        timeout: float = 5.0,
    ) -> None:
        if (factory is None) == (operator is None):
            raise TypeError(
                "Parity: give exactly one of factory= (a (feed, finish) maker) and operator= (an Rx operator)"
            )
        for f, name in (
            (factory, "factory"),
            (operator, "operator"),
            (reference, "reference"),
            (normalize, "normalize"),
        ):
            if f is not None and not callable(f):
                raise TypeError(f"Parity: {name} must be callable, got {type(f).__name__}")
        bad = [c for c in checks if c not in CHECKS]
        if bad or isinstance(checks, str) or not checks:
            raise TypeError(f"Parity: checks must be a non-empty collection of {CHECKS}, got {checks!r}")
        if not timeout > 0:
            raise ValueError(f"Parity: timeout must be > 0, got {timeout!r}")
        self.factory = factory
        self.operator = operator
        self.reference = reference
        self.normalize: Normalize = normalize if normalize is not None else MergeText()
        self.checks: tuple[Check, ...] = tuple(c for c in CHECKS if c in checks)
        self.timeout = float(timeout)

    def check_chunking(self, chunking: Chunking | Sequence[Data]) -> None:
        """Run every check on one chunking (a :class:`Chunking`, or the chunks themselves).

        Raises:
            ParityError: a check failed (the chunking in it is minimized).
        """
        if not isinstance(chunking, Chunking):
            chunking = Chunking.of(chunking)
        session = _Session(self, chunking.data)
        failure = session.failure(chunking, self.checks)
        if failure is not None:
            raise session.error(failure, chunking)

    def check_exhaustive(
        self,
        data: Data,
        *,
        max_cuts: int = 2,
        tokenizer: Any = None,
        delimiters: Iterable[Data] = (),
        chunkers: Sequence[Chunker] | None = None,
    ) -> None:
        """Run every check on every chunking of ``data`` with at most ``max_cuts`` cuts (there are
        about ``len(data) ** max_cuts / max_cuts!`` of them: keep ``data`` short), then on the fixed
        chunkings of ``chunkers`` (default: per character, and per token, token groups and each
        split inside a delimiter when ``tokenizer`` / ``delimiters`` are given; each split inside
        a UTF-8 character for ``bytes``). No ``hypothesis`` needed.

        Raises:
            ParityError: a check failed (the smallest failing chunking is reported).
        """
        data = _check_data(data)
        if max_cuts < 0:
            raise ValueError(f"check_exhaustive: max_cuts must be >= 0, got {max_cuts}")
        session = _Session(self, data, delimiters)
        for k in range(min(max_cuts, max(len(data) - 1, 0)) + 1):
            for cuts in itertools.combinations(range(1, len(data)), k):
                chunking = Chunking(data, cuts, f"all {k}-cut chunkings")
                failure = session.failure(chunking, self.checks)
                if failure is not None:
                    raise session.error(failure, chunking)
        self._check_fixed(session, data, tokenizer, delimiters, chunkers)

    def _check_fixed(
        self,
        session: _Session,
        data: Data,
        tokenizer: Any,
        delimiters: Iterable[Data],
        chunkers: Sequence[Chunker] | None,
    ) -> list[Chunker]:
        chosen = (
            list(chunkers)
            if chunkers is not None
            else default_chunkers(data, tokenizer=tokenizer, delimiters=delimiters)
        )
        for chunker in chosen:
            for chunking in chunker.fixed(data):
                failure = session.failure(chunking, self.checks)
                if failure is not None:
                    raise session.error(failure, chunking)
        return chosen

    def check(
        self,
        data: Data,
        *,
        tokenizer: Any = None,
        delimiters: Iterable[Data] = (),
        chunkers: Sequence[Chunker] | None = None,
        settings: HypothesisSettings | None = None,
    ) -> None:
        """Run every check on chunkings of ``data``: first the fixed chunkings of every chunker
        (the whole input, per character, per token...), then chunkings ``hypothesis`` draws from
        combinations of them (:func:`rxstream.testing.chunkings`).

        Args:
            data: the input (``bytes`` for a parser that takes UTF-8 bytes).
            tokenizer: add per-token chunks and multi-token groups of this tokenizer (see
                :func:`rxstream.testing.tokens`).
            delimiters: add cuts inside every occurrence of these strings.
            chunkers: use these chunkers instead (then ``tokenizer`` and ``delimiters`` are unused).
            settings: ``hypothesis`` settings (default: the current profile's), always without
                an example database or a deadline, and with the health checks about slow or
                large data off.

        Raises:
            ParityError: a check failed (with the minimized chunking).
        """
        from hypothesis import HealthCheck, given
        from hypothesis import settings as make_settings
        from hypothesis import strategies as st

        data = _check_data(data)
        session = _Session(self, data, delimiters)
        chosen = self._check_fixed(session, data, tokenizer, delimiters, chunkers)
        strategy = chunkings(data, chosen)
        checks = self.checks

        def body(draw: st.DataObject) -> None:
            chunking = draw.draw(strategy, label="chunking")
            points = sorted({c for c in chunking.cuts if c < len(data)})
            ends: list[int] | None = None
            if len(points) > _ALL_TRUNCATIONS:
                ends = draw.draw(
                    st.lists(st.sampled_from(points), max_size=_DRAWN_TRUNCATIONS, unique=True), label="ends"
                )
            failure = session.failure(chunking, checks, ends)
            if failure is not None:
                raise _Found(failure, chunking)

        parent = settings if settings is not None else make_settings()
        suppress = {*parent.suppress_health_check, HealthCheck.too_slow, HealthCheck.data_too_large}
        suppress.add(HealthCheck.large_base_example)
        run = make_settings(
            parent,
            database=None,  # examples of one input mean nothing for another
            deadline=None,  # one example runs the parser many times
            suppress_health_check=sorted(suppress, key=lambda h: h.value),
        )(given(st.data())(body))
        try:
            run()
        except _Found as found:
            raise session.error(found.failure, found.found) from None


def _check_data(data: Data) -> Data:
    if not isinstance(data, (str, bytes)):
        raise TypeError(f"parity: the input must be str or bytes, got {type(data).__name__}")
    return data


def check_parity(
    data: Data,
    *,
    factory: Factory | None = None,
    operator: Operator | None = None,
    reference: Reference | None = None,
    normalize: Normalize | None = None,
    checks: Collection[Check] = CHECKS,
    tokenizer: Any = None,
    delimiters: Iterable[Data] = (),
    chunkers: Sequence[Chunker] | None = None,
    settings: HypothesisSettings | None = None,
    timeout: float = 5.0,
) -> None:
    """Check a streaming parser against its batch reference on chunkings of ``data`` drawn by
    ``hypothesis``: ``Parity(factory=..., ...).check(data, ...)`` (see :class:`Parity` for the
    parser arguments and :meth:`Parity.check` for the rest).

    Raises:
        ParityError: a check failed (with the minimized chunking).
    """
    Parity(
        factory=factory,
        operator=operator,
        reference=reference,
        normalize=normalize,
        checks=checks,
        timeout=timeout,
    ).check(data, tokenizer=tokenizer, delimiters=delimiters, chunkers=chunkers, settings=settings)


def check_parity_exhaustive(
    data: Data,
    *,
    factory: Factory | None = None,
    operator: Operator | None = None,
    reference: Reference | None = None,
    normalize: Normalize | None = None,
    checks: Collection[Check] = CHECKS,
    max_cuts: int = 2,
    tokenizer: Any = None,
    delimiters: Iterable[Data] = (),
    chunkers: Sequence[Chunker] | None = None,
    timeout: float = 5.0,
) -> None:
    """Check a streaming parser against its batch reference on every chunking of ``data`` with at
    most ``max_cuts`` cuts, plus per-character (and per-token, delimiter...) chunkings:
    ``Parity(...).check_exhaustive(data, ...)``. Deterministic; no ``hypothesis`` needed.

    Raises:
        ParityError: a check failed (the smallest failing chunking is reported).
    """
    Parity(
        factory=factory,
        operator=operator,
        reference=reference,
        normalize=normalize,
        checks=checks,
        timeout=timeout,
    ).check_exhaustive(data, max_cuts=max_cuts, tokenizer=tokenizer, delimiters=delimiters, chunkers=chunkers)


def check_chunking(
    chunking: Chunking | Sequence[Data],
    *,
    factory: Factory | None = None,
    operator: Operator | None = None,
    reference: Reference | None = None,
    normalize: Normalize | None = None,
    checks: Collection[Check] = CHECKS,
    timeout: float = 5.0,
) -> None:
    """Check a streaming parser on one chunking (for your own ``@given`` tests, with
    :func:`rxstream.testing.chunkings`): ``Parity(...).check_chunking(chunking)``.

    Raises:
        ParityError: a check failed (the chunking in it is minimized).
    """
    Parity(
        factory=factory,
        operator=operator,
        reference=reference,
        normalize=normalize,
        checks=checks,
        timeout=timeout,
    ).check_chunking(chunking)
