"""Running the parser under test on one chunking: a ``(feed, finish)`` factory or an Rx operator,
its events after each chunk, and the exception it raised."""

from __future__ import annotations

import pprint
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reactivex import Observable
from reactivex.subject import Subject

from ._chunkings import Data

Feed = Callable[[Any], Any]
Finish = Callable[[], Any]
Factory = Callable[[], Any]
"""Returns a ``(feed, finish)`` pair, or an object with ``feed`` and ``finish`` methods."""
Operator = Callable[[Observable[Any]], Observable[Any]]


def _as_events(result: Any) -> list[Any]:
    """What ``feed``, ``finish`` or a reference returned, as a list of events."""
    if result is None:
        return []
    if isinstance(result, (str, bytes, Mapping)):
        return [result]
    if isinstance(result, Iterable):
        return list(result)
    return [result]


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
