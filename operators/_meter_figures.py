"""What :class:`~._measure.Meter` reports (:class:`MeterReport`, :class:`StageFigures`,
:class:`OperatorFigures`) and the hold it keeps per stage and per operator (:class:`Hold`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Check", "Hold", "MeterReport", "OperatorFigures", "StageFigures", "figures"]


@dataclass(frozen=True, slots=True)
class StageFigures:
    """How long one stage held text back: ``held`` seconds in all, ``longest`` of one hold, and
    ``holds``: how many holds (of any length)."""

    name: str
    held: float
    longest: float
    holds: int


@dataclass(frozen=True, slots=True)
class OperatorFigures:
    """How long one rxstream operator inside a stage held text back (a stage such as
    ``text_pipeline`` or ``chat_pipeline`` holds several): ``stage`` and ``name`` (the
    operator's: ``detokenize``, ``stop``, ``route``...), ``held``, ``longest`` and ``holds`` as
    for :class:`StageFigures`."""

    stage: str
    name: str
    held: float
    longest: float
    holds: int


@dataclass(frozen=True, slots=True)
class MeterReport:
    """A stream's figures so far.

    Attributes:
        tokens: token ids that entered the first stage (0 for a stream of text).
        items: items the last stage emitted; ``chars``: their characters (of ``str``, and of
            items with a ``text``: pieces, segments, text deltas).
        ttft: seconds from the start (the subscription, or :meth:`Meter.start`) to the first
            output of the last stage, or None before it.
        gaps: how many gaps between outputs of the last stage; ``gap_mean`` and ``gap_max``
            their mean and longest, in seconds (0.0 with none).
        stages: the figures of each stage, in order.
        operators: the rxstream operators of every stage, in stream order.
        seconds: from the start to the end of the stream (None while it runs).
    """

    tokens: int
    items: int
    chars: int
    ttft: float | None
    gaps: int
    gap_mean: float
    gap_max: float
    stages: tuple[StageFigures, ...]
    operators: tuple[OperatorFigures, ...]
    seconds: float | None


class Hold:
    """When one stage (or operator) began holding, and its holds so far."""

    __slots__ = ("held", "holds", "longest", "since")

    def __init__(self) -> None:
        self.since: float | None = None
        self.held = 0.0
        self.longest = 0.0
        self.holds = 0

    def mark(self, now: float, holding: bool) -> None:
        since = self.since
        if holding:
            if since is None:
                self.since = now
        elif since is not None:
            self.release(now)

    def release(self, now: float) -> None:
        since = self.since
        if since is not None:
            self.since = None
            wait = now - since
            self.held += wait
            self.holds += 1
            if wait > self.longest:
                self.longest = wait


Check = tuple[Hold | None, tuple[tuple[Hold, Callable[[], bool]], ...]]
"""A stage's hold (None: its one operator's is the stage's) and, for each of its operators, the
operator's hold and its ``holding``."""


def figures(hold: Hold, now: float) -> tuple[float, float, int]:
    """(held, longest, holds) of a hold, an open one counted up to ``now``."""
    if hold.since is None:
        return hold.held, hold.longest, hold.holds
    open_for = max(0.0, now - hold.since)
    return hold.held + open_for, max(hold.longest, open_for), hold.holds + 1
