"""The ``deltas`` operator: cumulative snapshots (whole text so far) -> text deltas (SEMANTICS §6)."""

from __future__ import annotations

from collections.abc import Callable

from reactivex import Observable, abc

from ._sink import OperatorSink, describe, operator

__all__ = ["deltas"]


def deltas() -> Callable[[Observable[str]], Observable[str]]:
    """Turn a stream of snapshots (each the whole text so far) into the new text of each one.

    Some sources (and some client libraries) send the whole text on every update; the text
    operators want deltas. A snapshot that does not extend the previous one is an error
    (``ValueError`` to ``on_error``, naming where they differ), never silent garbage. A snapshot
    equal to the previous one emits nothing.

    Marble diagram::

        source:   -a-b-c-d-|      a="He", b="Hello", c="Hello", d="Hello!"
        operator: deltas()
        result:   -a-b---d-|      a="He", b="llo", d="!"
    """

    def make_sink(observer: abc.ObserverBase[str]) -> OperatorSink[str, str]:
        return _DeltasSink(observer)

    return operator("deltas", make_sink)


class _DeltasSink(OperatorSink[str, str]):
    __slots__ = ("count", "previous")

    def __init__(self, observer: abc.ObserverBase[str]) -> None:
        super().__init__("deltas", observer)
        self.previous = ""
        self.count = 0

    def on_next(self, value: str) -> None:
        if type(value) is not str:
            raise TypeError(f"deltas: expected str snapshots, got {describe(value)}")
        prev = self.previous
        self.count += 1
        if not value.startswith(prev):
            at = next(
                (i for i, (x, y) in enumerate(zip(prev, value, strict=False)) if x != y),
                min(len(prev), len(value)),
            )
            raise ValueError(
                f"deltas: snapshot {self.count} does not extend the previous one: they differ at "
                f"character {at} (previous {prev[at : at + 20]!r}, now {value[at : at + 20]!r})"
            )
        self.previous = value
        if len(value) > len(prev):
            self.observer.on_next(value[len(prev) :])

    def on_completed(self) -> None:
        self.done = True
        self.observer.on_completed()
