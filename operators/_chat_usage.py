"""The token accounting of :func:`chat_pipeline`: every id it receives counted in one bucket of a
:class:`~rxstream.chat.TokenUsage` (SEMANTICS §10, "Usage adds up")."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import reactivex
from reactivex import Observable, abc
from reactivex.disposable import Disposable, SingleAssignmentDisposable

from rxstream._piece import Piece
from rxstream.channels import Segment
from rxstream.chat import BUCKETS, Bucket, TokenUsage

from ._sink import building, done_building, register_state, stage_being_built
from ._token_ids import as_id_tuple

__all__ = ["UsageCounter", "reporting_usage"]

_DELIMITERS = BUCKETS.index("delimiters")


class UsageCounter:
    """One subscription's counts: ids as they enter the pipeline (:meth:`enter`), and the ids of
    each routed segment (:meth:`segment`) in the bucket of its channel. Ids that entered and are
    in no segment yet (held by the detokenizer or the router) count in the bucket of the channel
    the stream is in (:meth:`usage`)."""

    __slots__ = ("_buckets", "_default", "counts", "current", "entered")

    def __init__(self, buckets: Mapping[str, Bucket], default: str, initial: str) -> None:
        self._buckets = {channel: BUCKETS.index(b) for channel, b in buckets.items()}
        self._default = self._buckets.get(default, _DELIMITERS)
        self.counts = [0, 0, 0, 0]
        self.entered = 0
        self.current = self._buckets.get(initial, _DELIMITERS)

    def enter(self, item: Any) -> None:
        """Count the ids of one item of the pipeline's source (an id, ids, or a piece)."""
        if isinstance(item, Piece):
            self.entered += item.size
            return
        ids = as_id_tuple("chat_pipeline", item)
        self.entered += 1 if ids is None else len(ids)

    def segment(self, seg: Segment, framing: int = 0) -> None:
        """Count a routed segment's ids: a ``chunk``'s in its channel's bucket (less ``framing``,
        the ids whose text starts in whitespace dropped after a region: delimiters), the ids of an
        ``open``, ``close`` or ``malformed`` event as delimiters."""
        n = len(seg.ids) if seg.ids else (len(seg.tokens) if seg.tokens is not None else 0)
        bucket = self._buckets.get(seg.channel, _DELIMITERS)
        if n:
            counts = self.counts
            if seg.event == "chunk":
                counts[bucket] += n - framing
                counts[_DELIMITERS] += framing
            else:
                counts[_DELIMITERS] += n
        self.current = self._default if seg.event == "close" else bucket

    def usage(self) -> TokenUsage:
        """The counts now, the held ids in the current channel's bucket: they add up to the ids
        that entered (safe to call from another thread while the pipeline runs)."""
        counts = list(self.counts)  # read before ``entered``: it never lags behind them
        held = max(0, self.entered - sum(counts))
        counts[self.current] += held
        return TokenUsage(*counts)


def reporting_usage(
    build: Callable[[UsageCounter], Observable[Any]],
    counter: Callable[[], UsageCounter],
    report: Callable[[TokenUsage], None],
) -> Observable[Any]:
    """``build(counter())`` per subscription, with ``report`` called once with its usage: before
    ``on_completed`` or ``on_error`` is passed on (a consumer that sees the end sees the report),
    or when the subscription is disposed. A failing ``report`` goes to ``on_error``."""

    joins = stage_being_built()

    def subscribe(
        observer: abc.ObserverBase[Any], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        counts = counter()
        register_state(counts, counter, joins)  # a checkpoint's snapshot holds the counts
        reported = False

        def send() -> Exception | None:
            nonlocal reported
            if reported:
                return None
            reported = True
            try:
                report(counts.usage())
            except Exception as exc:
                return exc
            return None

        def on_completed() -> None:
            failed = send()
            if failed is not None:
                observer.on_error(failed)
            else:
                observer.on_completed()

        def on_error(exc: Exception) -> None:
            send()
            observer.on_error(exc)

        # the source may end (and this be disposed) before ``subscribe`` returns: on another
        # thread, or synchronously; the subscription is then disposed as soon as it is assigned
        subscription = SingleAssignmentDisposable()

        def dispose() -> None:
            subscription.dispose()
            send()

        disposable = Disposable(dispose)
        token = building(joins)  # the pipeline built per subscription joins the stage being built
        try:
            built = build(counts)
        finally:
            done_building(token)
        subscription.disposable = built.subscribe(
            observer.on_next, on_error, on_completed, scheduler=scheduler
        )
        return disposable

    return reactivex.create(subscribe)
