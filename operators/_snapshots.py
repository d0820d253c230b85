"""The ``snapshots`` operator: text deltas -> cumulative snapshots (SEMANTICS §6)."""

from __future__ import annotations

from collections.abc import Callable

from reactivex import Observable, abc

from ._sink import OperatorSink, describe, operator

__all__ = ["snapshots"]


def snapshots() -> Callable[[Observable[str]], Observable[str]]:
    """Turn a stream of text deltas into snapshots: the whole text so far, on every new delta.

    The inverse of :func:`deltas`. Empty deltas emit nothing.

    Marble diagram::

        source:   -a-b-c-|      a="He", b="", c="llo"
        operator: snapshots()
        result:   -a---c-|      a="He", c="Hello"
    """

    def make_sink(observer: abc.ObserverBase[str]) -> OperatorSink[str, str]:
        return _SnapshotsSink(observer)

    return operator("snapshots", make_sink)


class _SnapshotsSink(OperatorSink[str, str]):
    __slots__ = ("text",)

    def __init__(self, observer: abc.ObserverBase[str]) -> None:
        super().__init__("snapshots", observer)
        self.text = ""

    def on_next(self, value: str) -> None:
        if type(value) is not str:
            raise TypeError(f"snapshots: expected str deltas, got {describe(value)}")
        if value:
            self.text += value
            self.observer.on_next(self.text)

    def on_completed(self) -> None:
        self.done = True
        self.observer.on_completed()
