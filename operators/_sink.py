"""Per-subscription plumbing shared by the rxstream operators.

An operator's subscribe function creates one :class:`OperatorSink` per subscriber. The sink owns
the upstream subscription, makes sure the subscriber sees at most one terminal notification,
reports the :class:`~rxstream.Finish` once, routes failures of the operator's own logic to
``on_error`` (never into the producer's thread) and disposes upstream when it ends the stream.

Dropped token ids (SEMANTICS §5). A sink that holds :class:`~rxstream.Piece` ids it has not
emitted yet returns them from :meth:`OperatorSink.take_held`. While a sink subscribes to its
source, the first sink created by that subscription (the nearest rxstream stage upstream, on the
same thread) links to it: ``below.above = sink`` and ``sink.below = below``. When a stream ends
early, the stage that ends it (a stop), or else the lowest stage still running (the one the
subscriber disposed, the last one an error reaches), reports in ``Finish.dropped`` the ids held
by itself and by every linked stage above it, in stream order (see :meth:`OperatorSink.report`).
So one ``on_finish`` on the last stage accounts for every id: each id that entered the chain is
either emitted or reported dropped.
"""

from __future__ import annotations

import dataclasses
import functools
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextvars import ContextVar, Token
from operator import attrgetter as operator_attrgetter
from typing import Any, Generic, TypeAlias, TypeVar

from reactivex import Observable, abc
from reactivex.disposable import Disposable, SingleAssignmentDisposable

from rxstream._describe import describe
from rxstream._finish import Finish, FinishReason

__all__ = [
    "OperatorSink",
    "StageSink",
    "attribute_probe",
    "building",
    "collecting",
    "describe",
    "done_building",
    "done_collecting",
    "operator",
    "register_state",
    "stage_being_built",
]

_In = TypeVar("_In")
_Out = TypeVar("_Out")

_Stage: TypeAlias = "OperatorSink[Any, Any]"
"""A linked stage of a chain, whatever its item types."""

StageSink: TypeAlias = _Stage
"""A sink of any operator, whatever its item types (what :func:`collecting` gathers)."""

_subscribing: ContextVar[_Stage | None] = ContextVar("_subscribing", default=None)
"""The sink whose ``run`` is subscribing to its source on this thread (None outside)."""

_collecting: ContextVar[list[_Stage] | None] = ContextVar("_collecting", default=None)
"""While a :func:`~._measure.measure` tap subscribes to its stage: the list every sink created
on this thread joins (the stage's own sinks; each tap sets its own list, so they do not mix)."""

_building: ContextVar[list[_Stage] | None] = ContextVar("_building", default=None)
"""While ``measure`` or ``checkpoint`` builds a stage (calls ``stage(source)``): the list the sinks
of the operators built then join, whenever they are made."""

_ENDS_HERE = (FinishReason.STOP, FinishReason.LENGTH)


class OperatorSink(ABC, Generic[_In, _Out]):
    """State of one subscription of an operator.

    Subclasses implement :meth:`on_next` and :meth:`on_completed` and call :meth:`emit`,
    :meth:`end` (complete with a reason and dispose upstream) and :meth:`fail`.
    """

    __slots__ = ("_on_finish", "above", "below", "done", "factory", "name", "observer", "upstream")

    def __init__(
        self, name: str, observer: abc.ObserverBase[_Out], on_finish: Callable[[Finish], None] | None = None
    ) -> None:
        self.name = name
        self.observer = observer
        self.factory: Callable[..., Any] | None = None
        """What made this sink (its closure is the operator's configuration; a snapshot refers to it)."""
        self.done = False
        self.upstream = SingleAssignmentDisposable()
        self._on_finish = on_finish
        self.above: _Stage | None = None
        self.below: _Stage | None = None
        below = _subscribing.get()
        if below is not None and below.above is None:
            below.above = self
            self.below = below

    def run(self, source: Observable[_In], scheduler: abc.SchedulerBase | None) -> abc.DisposableBase:
        """Subscribe to ``source``; return the disposable handed to the subscriber."""
        self.subscribe_to(source, self._guarded_next, scheduler)
        return Disposable(self.dispose)

    def subscribe_to(
        self,
        source: Observable[_In],
        on_next: Callable[[_In], None],
        scheduler: abc.SchedulerBase | None,
        *,
        on_error: Callable[[Exception], None] | None = None,
        on_completed: Callable[[], None] | None = None,
    ) -> None:
        """Subscribe to ``source`` (linking the rxstream stage above, if any) with ``on_next``
        (and by default :meth:`on_error` and a guarded :meth:`on_completed`)."""
        token = _subscribing.set(self)
        try:
            self.upstream.disposable = source.subscribe(
                on_next,
                on_error or self.on_error,
                on_completed or self._guarded_completed,
                scheduler=scheduler,
            )
        finally:
            _subscribing.reset(token)

    def holding(self) -> bool:
        """Whether this stage holds input it has not emitted yet (default: never; the text
        operators, ``detokenize`` and ``route`` say). :func:`~._measure.measure` times it."""
        return False

    def holding_probe(self) -> Callable[[], bool]:
        """A function that answers :meth:`holding` in as few calls as it can (the meter asks it
        after every item; default: :meth:`holding` itself)."""
        return self.holding

    # -- held token ids ----------------------------------------------------------------------
    def take_held(self) -> tuple[int, ...]:
        """Remove and return the token ids received but not emitted (default: none held)."""
        return ()

    def take_dropped(self) -> tuple[int, ...]:
        """The ids held here and in every linked stage above, in stream order (taken once)."""
        ids = self.take_held()
        above = self.above
        while above is not None:
            more = above.take_held()
            if more:
                ids += more
            above = above.above
        return ids

    # -- upstream notifications -------------------------------------------------------------
    def _guarded_next(self, value: _In) -> None:
        if self.done:
            return
        try:
            self.on_next(value)
        except Exception as exc:  # the operator's own logic failed: tell the subscriber
            if self.done:
                # The subscriber's own on_completed/on_error raised (or it raised after
                # disposing): there is no notification left to carry it; let it propagate, as
                # reactivex does (the upstream is already disposed).
                raise
            self.fail(exc)

    def _guarded_completed(self) -> None:
        if self.done:
            return
        try:
            self.on_completed()
        except Exception as exc:
            if self.done:
                raise
            self.fail(exc)

    @abstractmethod
    def on_next(self, value: _In) -> None:
        """Handle one item from upstream (exceptions are routed to :meth:`fail`)."""

    def on_completed(self) -> None:
        """Default: the source ended by itself."""
        self.end(Finish(FinishReason.EOS), dispose=False)

    def on_error(self, error: Exception) -> None:
        """Forward an upstream error (held text is dropped)."""
        if self.done:
            return
        self.done = True
        failure = self.report(Finish(FinishReason.ERROR, error=error))
        self.observer.on_error(failure or error)

    # -- helpers for subclasses --------------------------------------------------------------
    def emit(self, value: _Out) -> None:
        self.observer.on_next(value)

    def report(self, finish: Finish) -> Exception | None:
        """Call ``on_finish`` once; return the exception it raised, if any.

        With a callback, a stage that ends the stream itself (stop, budget), or one with no
        linked stage below still running, adds to ``finish.dropped`` the ids not yet reported
        that it and the linked stages above it hold (earlier stream ids are held lower down, so
        the reports of one chain list the ids in stream order).
        """
        callback = self._on_finish
        self._on_finish = None
        if callback is not None:
            below = self.below
            if below is None or below.done or finish.reason in _ENDS_HERE:
                dropped = self.take_dropped()
                if dropped:
                    finish = dataclasses.replace(finish, dropped=finish.dropped + dropped)
            try:
                callback(finish)
            except Exception as exc:
                return exc
        return None

    def end(self, finish: Finish, *, dispose: bool = True) -> None:
        """Complete the stream now for ``finish`` and (by default) dispose the upstream."""
        if self.done:
            return
        self.done = True
        failure = self.report(finish)
        try:
            if failure is not None:
                self.observer.on_error(failure)
            else:
                self.observer.on_completed()
        finally:  # even if the subscriber's callback raised: the upstream must stop
            if dispose:
                self.upstream.dispose()

    def fail(self, error: Exception) -> None:
        """The operator's own logic failed: send ``error`` downstream and dispose the upstream."""
        if self.done:
            return
        self.done = True
        self.report(Finish(FinishReason.ERROR, error=error))
        try:
            self.observer.on_error(error)
        finally:
            self.upstream.dispose()

    def dispose(self) -> None:
        """The subscriber disposed: report ``cancelled`` (if still running) and dispose upstream."""
        if not self.done:
            self.done = True
            self.report(Finish(FinishReason.CANCELLED))
        self.upstream.dispose()


def operator(
    name: str, make_sink: Callable[[abc.ObserverBase[_Out]], OperatorSink[_In, _Out]]
) -> Callable[[Observable[_In]], Observable[_Out]]:
    """Build an operator function whose subscriptions are handled by ``make_sink(observer)``.

    Each sink joins a list of its stage (what ``measure`` and ``checkpoint`` watch): the list
    of the stage being built when this operator is (:func:`building`: an operator a composite
    builds per subscription, whose parts may be subscribed later, on a trampoline), else the
    list of the stage being subscribed when the sink is made (:func:`collecting`)."""
    joins = _building.get()

    def _operator(source: Observable[_In]) -> Observable[_Out]:
        def subscribe(
            observer: abc.ObserverBase[_Out], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            sink = make_sink(observer)
            sink.factory = make_sink
            stage = joins if joins is not None else _collecting.get()
            if stage is not None:
                stage.append(sink)
            return sink.run(source, scheduler)

        return Observable(subscribe)

    _operator.__name__ = name
    _operator.__qualname__ = name
    return _operator


def collecting(sinks: list[_Stage] | None) -> Token[list[_Stage] | None]:
    """Make the sinks created on this thread join ``sinks`` (None: none) until the returned token
    is given to :func:`done_collecting`."""
    return _collecting.set(sinks)


def done_collecting(token: Token[list[_Stage] | None]) -> None:
    """End what :func:`collecting` began."""
    _collecting.reset(token)


def attribute_probe(obj: object, name: str, field: str | None = None) -> Callable[[], bool]:
    """A probe that reads ``obj.<name>`` as a bool: ``field`` when given (an attribute that is
    truthy exactly when ``name`` is: read in C, no Python call), else the property's getter bound
    to ``obj`` (one call), or an attribute read."""
    if field is not None and hasattr(obj, field):
        return functools.partial(operator_attrgetter(field), obj)
    attr = getattr(type(obj), name, None)
    if isinstance(attr, property) and attr.fget is not None:
        return functools.partial(attr.fget, obj)
    return lambda: bool(getattr(obj, name))


def register_state(obj: object, factory: Callable[..., Any], joins: list[_Stage] | None = None) -> None:
    """Let a :func:`~._checkpoint.checkpoint` snapshot ``obj``, state a subscription keeps outside
    its sinks (``factory``: what made it; its closure is configuration). ``joins``: the stage's
    list :func:`stage_being_built` gave when the operator was built (else the list of the stage
    being subscribed)."""
    collect = joins if joins is not None else _collecting.get()
    if collect is not None:
        collect.append((obj, factory))  # type: ignore[arg-type]


def building(sinks: list[_Stage] | None) -> Token[list[_Stage] | None]:
    """Make the operators built on this thread join ``sinks`` with every sink they make (until
    the token goes to :func:`done_building`)."""
    return _building.set(sinks)


def done_building(token: Token[list[_Stage] | None]) -> None:
    _building.reset(token)


def stage_being_built() -> list[_Stage] | None:
    """The list of the stage being built now (see :func:`building`), or None."""
    return _building.get()
