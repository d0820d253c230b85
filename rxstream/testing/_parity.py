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

import dataclasses
import itertools
import math
import pprint
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from reactivex import Observable
from reactivex.subject import Subject

from ._chunkings import Chunker, Chunking, Data, chunkings, default_chunkers

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

Check = Literal["parity", "retraction", "flush"]
CHECKS: tuple[Check, ...] = get_args(Check)
"""Every check, in the order they run."""

Feed = Callable[[Any], Any]
Finish = Callable[[], Any]
Factory = Callable[[], Any]
"""Returns a ``(feed, finish)`` pair, or an object with ``feed`` and ``finish`` methods."""
Operator = Callable[[Observable[Any]], Observable[Any]]
Reference = Callable[[Any], Any]
Normalize = Callable[[list[Any]], Any]

_ALL_TRUNCATIONS = 24
"""Drawn chunkings with at most this many cut points are finished early at every one of them;
longer ones at a drawn subset of at most :data:`_DRAWN_TRUNCATIONS` of them."""
_DRAWN_TRUNCATIONS = 8
_MAX_TRUNCATIONS = 256
"""Fixed chunkings (one chunk per character...) are finished early at every cut up to this many
(each is a run of the parser: the cost grows as the square of the cuts); beyond, at the cuts that
end inside a delimiter or a UTF-8 character, and an even spread of the others."""
_RUN_CACHE = 4096


# ------------------------------------------------------------------ normalization
@dataclass(frozen=True)
class _View:
    """A text event taken apart: events of equal ``kind`` merge by joining their ``parts``."""

    kind: Any
    parts: tuple[Any, ...]
    rebuild: Callable[[tuple[Any, ...]], Any]


TOKEN_FIELDS = ("ids", "logprobs", "top_logprobs", "tokens")
"""The per-token fields :class:`MergeText` joins with the text by default."""


class MergeText:
    """The default ``normalize``: joins adjacent text events of the same kind and drops empty ones.

    Text events are ``str`` and ``bytes`` (one kind each); a ``(kind, text)`` pair; and a record
    -- a mapping, a dataclass (:class:`rxstream.Piece`) or a named tuple
    (:class:`rxstream.channels.Segment`) -- whose ``text_key`` holds a ``str``/``bytes``: its
    kind is its type and every other item, except the ``join`` ones (token ``ids``,
    ``logprobs``, ``top_logprobs``, ``tokens``), which are joined with the text. So ``{"type":
    "chunk", "field": "thinking", "text": ...}`` merges with the next chunk of the same field.
    Every other event is kept as it is and separates the text around it.

    >>> merge_text()(["a", "b", ("think", "c"), ("think", "d"), "", {"type": "close"}, "e"])
    ['ab', ('think', 'cd'), {'type': 'close'}, 'e']
    """

    def __init__(
        self, text_key: str = "text", *, join: Iterable[str] = TOKEN_FIELDS, drop_empty: bool = True
    ) -> None:
        self.text_key = text_key
        self.join = tuple(join)
        self.drop_empty = drop_empty

    def __repr__(self) -> str:
        return f"merge_text({self.text_key!r}, join={self.join!r}, drop_empty={self.drop_empty})"

    def view(self, event: Any) -> _View | None:
        """The text view of ``event``, or None when it is not a text event."""
        if isinstance(event, str):
            return _View(str, (event,), lambda p: p[0])
        if isinstance(event, bytes):
            return _View(bytes, (event,), lambda p: p[0])
        if type(event) is tuple and len(event) == 2 and isinstance(event[1], (str, bytes)):
            return _View(("pair", event[0], type(event[1])), (event[1],), lambda p: (event[0], p[0]))
        if isinstance(event, Mapping):
            return self._record(event, list(event), event.get, lambda changes: {**event, **changes})
        if dataclasses.is_dataclass(event) and not isinstance(event, type):
            names = [f.name for f in dataclasses.fields(event)]
            return self._record(
                event,
                names,
                lambda n: getattr(event, n),
                lambda changes: dataclasses.replace(event, **changes),
            )
        if isinstance(event, tuple) and hasattr(event, "_fields") and hasattr(event, "_replace"):
            return self._record(
                event, list(event._fields), lambda n: getattr(event, n), lambda c: event._replace(**c)
            )
        return None

    def _record(
        self,
        event: Any,
        names: list[Any],
        get: Callable[[Any], Any],
        replace: Callable[[dict[str, Any]], Any],
    ) -> _View | None:
        key = self.text_key
        text = get(key) if key in names else None
        if not isinstance(text, (str, bytes)):
            return None
        joined = [n for n in self.join if n in names and isinstance(get(n), (tuple, list, type(None)))]
        absent = tuple(get(n) is None for n in joined)
        others = tuple((n, get(n)) for n in names if n != key and n not in joined)
        parts = (text, *(tuple(get(n) or ()) for n in joined))

        def rebuild(p: tuple[Any, ...]) -> Any:
            changes: dict[str, Any] = {key: p[0]}
            for name, none, part in zip(joined, absent, p[1:], strict=True):
                changes[name] = None if none else tuple(part)
            return replace(changes)

        return _View((type(event), type(text), absent, others), parts, rebuild)

    def __call__(self, events: Iterable[Any]) -> list[Any]:
        merger = _Merger(self)
        out = merger.push(events)
        last = merger.pending()
        return out if last is None else [*out, last]

    def is_partial(self, part: Any, whole: Any) -> bool:
        """Whether text event ``part`` is the start of text event ``whole`` (same kind; every part
        of its text, ids... a prefix of ``whole``'s)."""
        a, b = self.view(part), self.view(whole)
        if a is None or b is None or a.kind != b.kind:
            return False
        return all(len(x) <= len(y) and y[: len(x)] == x for x, y in zip(a.parts, b.parts, strict=True))


class _Merger:
    """:class:`MergeText` one batch of events at a time: :meth:`push` returns the items no later
    event can change, :meth:`pending` the text item still open (or None)."""

    def __init__(self, merge: MergeText) -> None:
        self.merge = merge
        self.view: _View | None = None
        self.pieces: list[list[Any]] = []

    def push(self, events: Iterable[Any]) -> list[Any]:
        out: list[Any] = []
        for event in events:
            view = self.merge.view(event)
            if view is not None and self.view is not None and view.kind == self.view.kind:
                for acc, part in zip(self.pieces, view.parts, strict=True):
                    acc.append(part)
                continue
            last = self.pending()
            if last is not None:
                out.append(last)
            if view is None:
                self.view, self.pieces = None, []
                out.append(event)
            else:
                self.view, self.pieces = view, [[p] for p in view.parts]
        return out

    def pending(self) -> Any:
        if self.view is None:
            return None
        parts = tuple(_join(p) for p in self.pieces)
        if self.merge.drop_empty and not any(len(p) for p in parts):
            return None
        return self.view.rebuild(parts)


def _join(parts: list[Any]) -> Any:
    first = parts[0]
    if isinstance(first, str):
        return "".join(parts)
    if isinstance(first, bytes):
        return b"".join(parts)
    return tuple(itertools.chain.from_iterable(parts))


def merge_text(
    text_key: str = "text", *, join: Iterable[str] = TOKEN_FIELDS, drop_empty: bool = True
) -> MergeText:
    """A ``normalize`` that joins adjacent text events of the same kind (see :class:`MergeText`):
    ``text_key`` is the key or field that holds a record's text, ``join`` those joined with it
    (sequences, or None in every event merged), ``drop_empty`` drops text events with no text
    (and nothing joined)."""
    return MergeText(text_key, join=join, drop_empty=drop_empty)


def _is_prefix(so_far: Any, final: Any, view: MergeText) -> bool:
    """Whether normalized events ``so_far`` can still become ``final`` by more events arriving."""
    if isinstance(final, str):
        return isinstance(so_far, str) and final.startswith(so_far)
    if isinstance(final, bytes):
        return isinstance(so_far, bytes) and final.startswith(so_far)
    if isinstance(final, (list, tuple)):
        if not isinstance(so_far, (list, tuple)) or len(so_far) > len(final):
            return False
        if not so_far:
            return True
        n = len(so_far) - 1
        if any(a != b for a, b in zip(so_far[:n], final[:n], strict=True)):
            return False
        return bool(so_far[n] == final[n]) or view.is_partial(so_far[n], final[n])
    raise TypeError(
        f"parity: the retraction check needs normalize to return a list, tuple, str or bytes, got "
        f"{type(final).__name__}; return one, or leave 'retraction' out of checks"
    )


def _as_events(result: Any) -> list[Any]:
    """What ``feed``, ``finish`` or a reference returned, as a list of events."""
    if result is None:
        return []
    if isinstance(result, (str, bytes, Mapping)):
        return [result]
    if isinstance(result, Iterable):
        return list(result)
    return [result]


# ------------------------------------------------------------------ running the parser
@dataclass
class _Run:
    """One run of the parser: its events, how many there were after each chunk, and the exception
    it raised (``error_at``: the chunk index, ``len(chunks)`` for finish)."""

    events: list[Any]
    marks: list[int]
    error: BaseException | None = None
    error_at: int = 0


@dataclass(frozen=True)
class _Outcome:
    """A normalized result, or the exception that came instead."""

    value: Any = None
    error: BaseException | None = None
    where: str = ""

    def same(self, other: _Outcome) -> bool:
        if self.error is not None or other.error is not None:
            return (
                self.error is not None and other.error is not None and type(self.error) is type(other.error)
            )
        return bool(self.value == other.value)

    def show(self) -> str:
        if self.error is not None:
            where = f" ({self.where})" if self.where else ""
            return f"raises {type(self.error).__name__}: {self.error}{where}"
        return pprint.pformat(self.value, width=100, sort_dicts=False)


def _feed_finish(made: Any) -> tuple[Feed, Finish]:
    if isinstance(made, tuple) and len(made) == 2 and all(callable(f) for f in made):
        return made[0], made[1]
    feed, finish = getattr(made, "feed", None), getattr(made, "finish", None)
    if callable(feed) and callable(finish):
        return feed, finish
    raise TypeError(
        f"parity: the factory must return a (feed, finish) pair or an object with feed and finish "
        f"methods, got {type(made).__name__}"
    )


def _run_feed(factory: Factory, chunks: Sequence[Data]) -> _Run:
    feed, finish = _feed_finish(factory())
    run = _Run([], [])
    for i, chunk in enumerate(chunks):
        try:
            run.events.extend(_as_events(feed(chunk)))
        except Exception as exc:
            run.error, run.error_at = exc, i
            return run
        run.marks.append(len(run.events))
    try:
        run.events.extend(_as_events(finish()))
    except Exception as exc:
        run.error, run.error_at = exc, len(chunks)
    return run


def _run_operator(op: Operator, chunks: Sequence[Data], timeout: float) -> _Run:
    source: Subject[Data] = Subject()
    run = _Run([], [])
    done = threading.Event()
    step = [0]
    errors: list[tuple[BaseException, int]] = []

    def on_error(exc: Exception) -> None:
        errors.append((exc, step[0]))
        done.set()

    out = op(source)
    subscription = out.subscribe(on_next=run.events.append, on_error=on_error, on_completed=done.set)
    try:
        for i, chunk in enumerate(chunks):
            step[0] = i
            try:
                source.on_next(chunk)
            except Exception as exc:
                errors.append((exc, i))
            if errors:
                run.error, run.error_at = errors[0]
                return run
            run.marks.append(len(run.events))
        step[0] = len(chunks)
        source.on_completed()
        if not done.wait(timeout):
            run.error = TimeoutError(
                f"the operator did not complete within {timeout:g} s after its input completed"
            )
            run.error_at = len(chunks)
        elif errors:
            run.error, run.error_at = errors[0]
    finally:
        subscription.dispose()
    return run


def _where(run: _Run, n: int) -> str:
    return "in finish" if run.error_at >= n else f"feeding chunk {run.error_at + 1} of {n}"


# ------------------------------------------------------------------ failures and their report
@dataclass
class _Failure:
    check: Check
    chunking: Chunking  # the run that failed (for flush: the truncated input)
    expected: _Outcome
    actual: _Outcome
    step: int = 0  # retraction: the chunk after which the events so far were not a prefix
    so_far: Any = None


class ParityError(AssertionError):
    """A streaming parser failed a parity check. The message shows the minimized chunking, the
    expected and the actual result.

    Attributes:
        check: ``"parity"``, ``"retraction"`` or ``"flush"``.
        chunking: the minimized chunking (for ``flush``: of the input up to where the stream ended).
        found: the chunking as it was first found, before minimizing.
        expected: the batch reference's result, normalized (or the exception it raised).
        actual: the streamed result, normalized (or the exception the parser raised).
    """

    def __init__(
        self, message: str, *, check: Check, chunking: Chunking, found: Chunking, expected: Any, actual: Any
    ) -> None:
        super().__init__(message)
        self.check: Check = check
        self.chunking = chunking
        self.found = found
        self.expected = expected
        self.actual = actual


def _indent(text: str, by: str = "    ") -> str:
    return "\n".join(by + line for line in text.splitlines())


def _short(data: Data, limit: int = 400) -> str:
    if len(data) <= limit:
        return repr(data)
    return f"{data[:limit]!r}... ({len(data) - limit} more)"


def _units(data: Data) -> str:
    return "bytes" if isinstance(data, bytes) else "characters"


def _first_difference(a: Any, b: Any) -> str:
    if not (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple))) or max(len(a), len(b)) < 4:
        return ""
    for i, (x, y) in enumerate(zip(a, b)):  # noqa: B905 - lengths may differ
        if x != y:
            return f"  first difference at item {i}: expected {x!r}, got {y!r}\n"
    if len(a) != len(b):
        return f"  first difference at item {min(len(a), len(b))}: {len(a)} items expected, {len(b)} came\n"
    return ""


def _format(failure: _Failure, found: Chunking, data: Data, reference_named: bool) -> str:
    c = failure.chunking
    chunks = c.chunks
    plural = "chunk" if len(chunks) == 1 else "chunks"
    origin = f"found by {found.source}" if found.source else "as given"
    if found.cuts != c.cuts or found.data != c.data:
        origin += f", minimized from {len(found.chunks)} chunks"
    chunking = f"  chunking: {c.describe()}  ({len(chunks)} {plural}, {origin})\n"
    batch = "batch" if reference_named else "the parser's own whole-input run"
    if failure.check == "parity":
        return (
            "streaming parity failed: the streamed result differs from the batch result\n"
            f"  input: {_short(data)} ({len(data)} {_units(data)})\n"
            + chunking
            + f"  expected ({batch}, normalized):\n{_indent(failure.expected.show())}\n"
            f"  actual (streamed, normalized):\n{_indent(failure.actual.show())}\n"
            + _first_difference(failure.expected.value, failure.actual.value)
        ).rstrip("\n")
    if failure.check == "flush":
        return (
            "streaming parity failed: a stream that ends here gives a different result than the batch "
            "result of the input so far (held output not flushed at the end?)\n"
            f"  input so far: {_short(c.data)} (the first {len(c.data)} of {len(data)} {_units(data)})\n"
            + chunking
            + f"  expected ({batch} of the input so far, normalized):\n{_indent(failure.expected.show())}\n"
            f"  actual (streamed, then finished, normalized):\n{_indent(failure.actual.show())}\n"
            + _first_difference(failure.expected.value, failure.actual.value)
        ).rstrip("\n")
    return (
        "streaming parity failed: emitted output was retracted (what was emitted so far is not a "
        "prefix of the final result)\n"
        f"  input: {_short(data)} ({len(data)} {_units(data)})\n"
        + chunking
        + f"  emitted after chunk {failure.step + 1} of {len(chunks)} ({chunks[failure.step]!r}), "
        "normalized:\n"
        f"{_indent(pprint.pformat(failure.so_far, width=100, sort_dicts=False))}\n"
        f"  final (streamed, normalized):\n{_indent(failure.actual.show())}"
    )


def _ends_inside(data: Data, end: int, delimiter: Data) -> bool:
    """Whether ``data[:end]`` ends with a proper prefix of ``delimiter``."""
    if type(delimiter) is not type(data):
        return False
    return any(data.endswith(delimiter[:k], 0, end) for k in range(1, len(delimiter)))  # type: ignore[arg-type]


def _minimize(cuts: list[int], fails: Callable[[list[int]], bool]) -> list[int]:
    """Delta debugging: drop cuts while ``fails`` still holds, down to a chunking from which no
    single cut can be dropped."""
    if cuts and fails([]):
        return []
    granularity = 2
    while cuts:
        size = math.ceil(len(cuts) / granularity)
        for start in range(0, len(cuts), size):
            candidate = cuts[:start] + cuts[start + size :]
            if fails(candidate):
                cuts = candidate
                granularity = max(granularity - 1, 2)
                break
        else:
            if size == 1:
                break
            granularity = min(granularity * 2, len(cuts))
    return cuts


# ------------------------------------------------------------------ the checks
class _Session:
    """The checks for one input: runs the parser and the reference, with caches."""

    def __init__(self, parity: Parity, data: Data, delimiters: Iterable[Data] = ()) -> None:
        self.parity = parity
        self.data = data
        self.delimiters: tuple[Data, ...] = tuple(
            d.encode() if isinstance(data, bytes) and isinstance(d, str) else d for d in delimiters
        )
        self.refs: dict[int, _Outcome] = {}
        self.runs: OrderedDict[tuple[int, tuple[int, ...]], _Outcome] = OrderedDict()

    def run(self, chunks: Sequence[Data]) -> _Run:
        p = self.parity
        if p.factory is not None:
            return _run_feed(p.factory, chunks)
        assert p.operator is not None
        return _run_operator(p.operator, chunks, p.timeout)

    def outcome(self, run: _Run, n: int) -> _Outcome:
        if run.error is not None:
            return _Outcome(error=run.error, where=_where(run, n))
        return _Outcome(self.parity.normalize(run.events))

    def expected(self, end: int) -> _Outcome:
        """The batch result of ``data[:end]``."""
        if end not in self.refs:
            text = self.data[:end]
            reference = self.parity.reference
            if reference is None:
                self.refs[end] = self.outcome(self.run([text]), 1)
            else:
                try:
                    result = _as_events(reference(text))
                except Exception as exc:
                    self.refs[end] = _Outcome(error=exc, where="in the reference")
                else:
                    self.refs[end] = _Outcome(self.parity.normalize(result))
        return self.refs[end]

    def truncations(self, chunking: Chunking) -> list[int]:
        """Where the flush check ends a stream of ``chunking`` (see :data:`_MAX_TRUNCATIONS`)."""
        points = sorted({c for c in chunking.cuts if c < len(self.data)})
        if len(points) <= _MAX_TRUNCATIONS:
            return points
        data = self.data
        inside = set()
        for p in points:
            if isinstance(data, bytes) and p < len(data) and 0x80 <= data[p] < 0xC0:
                inside.add(p)
            elif any(_ends_inside(data, p, d) for d in self.delimiters):
                inside.add(p)
        rest = [p for p in points if p not in inside]
        room = max(_MAX_TRUNCATIONS - len(inside), 0)
        spread = rest[:: max(1, math.ceil(len(rest) / room))] if room else []
        return sorted(inside.union(spread))

    def retracted(self, run: _Run, final: Any) -> int | None:
        """The first chunk after which the events so far, normalized, are not a prefix of
        ``final`` (None: there is none). With :class:`MergeText` the events are merged once, as
        they come; any other ``normalize`` runs on every prefix."""
        normalize = self.parity.normalize
        if not isinstance(normalize, MergeText):
            seen = 0
            for step, mark in enumerate(run.marks):
                if mark != seen:
                    seen = mark
                    if not _is_prefix(normalize(run.events[:mark]), final, MergeText()):
                        return step
            return None
        merger = _Merger(normalize)
        checked = seen = 0
        for step, mark in enumerate(run.marks):
            if mark == seen:
                continue
            for item in merger.push(run.events[seen:mark]):  # final from here on
                if checked >= len(final) or item != final[checked]:
                    return step
                checked += 1
            seen = mark
            last = merger.pending()
            if last is not None and not (
                checked < len(final)
                and (last == final[checked] or normalize.is_partial(last, final[checked]))
            ):
                return step
        return None

    def ended(self, chunking: Chunking, end: int) -> tuple[Chunking, _Outcome]:
        """The stream ended (finished) at offset ``end``: its chunking and result (cached)."""
        short = chunking.truncated(end)
        key = (end, short.cuts)
        if key in self.runs:
            self.runs.move_to_end(key)
            return short, self.runs[key]
        outcome = self.outcome(self.run(short.chunks), len(short.chunks))
        self.runs[key] = outcome
        if len(self.runs) > _RUN_CACHE:
            self.runs.popitem(last=False)
        return short, outcome

    def failure(
        self, chunking: Chunking, checks: Collection[Check], truncations: Iterable[int] | None = None
    ) -> _Failure | None:
        """The first check ``chunking`` fails, or None. ``truncations``: where the flush check ends
        the stream early (default: at every cut)."""
        chunks = chunking.chunks
        run = self.run(chunks)
        actual = self.outcome(run, len(chunks))
        expected = self.expected(len(self.data))
        if "parity" in checks and not actual.same(expected):
            return _Failure("parity", chunking, expected, actual)
        if "retraction" in checks and run.error is None:
            step = self.retracted(run, actual.value)
            if step is not None:
                so_far = self.parity.normalize(run.events[: run.marks[step]])
                return _Failure("retraction", chunking, expected, actual, step, so_far)
        if "flush" in checks:
            ends = self.truncations(chunking) if truncations is None else sorted(set(truncations))
            for end in ends:
                short, outcome = self.ended(chunking, end)
                if not outcome.same(self.expected(end)):
                    return _Failure("flush", short, self.expected(end), outcome)
        return None

    def error(self, failure: _Failure, found: Chunking) -> ParityError:
        """Minimize ``failure``'s chunking and describe it."""
        check = failure.check
        target = failure.chunking  # for flush: already cut at the end that failed
        sub = self if target.data == self.data else _Session(self.parity, target.data)
        sub.refs = self.refs if sub is self else {k: v for k, v in self.refs.items() if k <= len(target.data)}
        as_parity: Check = "parity" if check == "flush" else check

        def fails(cuts: list[int]) -> bool:
            candidate = Chunking(target.data, tuple(cuts), target.source)
            return sub.failure(candidate, (as_parity,)) is not None

        cuts = _minimize(list(target.cuts), fails)
        minimal = sub.failure(Chunking(target.data, tuple(cuts), target.source), (as_parity,))
        if minimal is None:  # the parser does not fail the same way twice: report what was found
            minimal = failure
        minimal.check = check
        return ParityError(
            _format(minimal, found, self.data, self.parity.reference is not None),
            check=check,
            chunking=minimal.chunking,
            found=found,
            expected=minimal.expected.error or minimal.expected.value,
            actual=minimal.actual.error or minimal.actual.value,
        )


class _Found(Exception):
    """Raised inside the ``hypothesis`` run to carry a failure out of it."""

    def __init__(self, failure: _Failure, found: Chunking) -> None:
        super().__init__(failure.check, found.describe())
        self.failure = failure
        self.found = found


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
