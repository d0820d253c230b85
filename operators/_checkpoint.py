"""The ``checkpoint`` operator: a pipeline whose state can be snapshot mid-stream and restored
into a fresh pipeline, here or in another process (SEMANTICS §13).

Between the stages sit boundaries that note, at subscription, which operators each stage made
(they cost nothing per item). :meth:`Checkpoint.snapshot` encodes the state of those operators
(:mod:`._state_codec`: the detokenizer's held bytes, the matchers' held text and automaton
states, the router's region, the tool-call parser's frames, the event counters) as JSON; a fresh
pipeline built from the same arguments, with ``checkpoint(Checkpoint(restore=snapshot), ...)``,
gets that state when it is subscribed, before its first item, and then goes on as the first
would have: feed it the items after the cut.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from reactivex import Observable, abc
from reactivex.disposable import Disposable

from rxstream._describe import describe
from rxstream._state_codec import SnapshotError, StateDecoder, StateEncoder, attributes

from ._sink import OperatorSink, StageSink
from ._stages import Stage, chain, check_stages

__all__ = ["Checkpoint", "SnapshotError", "checkpoint"]


_PLUMBING = frozenset({"observer", "upstream", "above", "below", "_on_finish", "name", "factory"})
"""What a sink holds that is its place in the chain, not its state."""

VERSION = 1


def _state_of(part: Any) -> tuple[object, list[tuple[str, object]]]:
    """The factory (whose closure is the configuration) and the state attributes of a part."""
    if isinstance(part, OperatorSink):
        return part.factory, [(n, v) for n, v in attributes(part) if n not in _PLUMBING]
    obj, factory = part
    return factory, list(attributes(obj))


def _target(part: Any) -> object:
    return part if isinstance(part, OperatorSink) else part[0]


def _roots(factory: object) -> list[object]:
    cells = getattr(factory, "__closure__", None) or ()
    out = []
    for cell in cells:
        try:
            out.append(cell.cell_contents)
        except ValueError:
            out.append(None)
    return out


class Checkpoint:
    """One stream's state through :func:`checkpoint`: :meth:`snapshot` it while it runs; give a
    snapshot as ``restore`` to start a fresh pipeline from there.

    Args:
        restore: a snapshot (from :meth:`snapshot`) the pipeline starts from, or None.

    Raises:
        SnapshotError: ``restore`` is not a snapshot (or one of another version).
    """

    def __init__(self, restore: bytes | str | None = None) -> None:
        self._stages: list[list[StageSink]] = []
        self._indexes: dict[int, object] = {}  # a factory's configuration index, made once per stream
        self._active = False
        self._replaying = False
        self._restore: dict[str, Any] | None = None
        if restore is not None:
            try:
                data = json.loads(restore)
            except (TypeError, ValueError) as exc:
                raise SnapshotError(f"Checkpoint: restore is not a snapshot ({exc})") from None
            if (
                not isinstance(data, dict)
                or data.get("v") != VERSION
                or not isinstance(data.get("stages"), list)
            ):
                raise SnapshotError("Checkpoint: restore is not a snapshot of this version")
            self._restore = data

    def snapshot(self) -> bytes:
        """The state of the stream now, as JSON bytes (call it between two items, on the thread
        that feeds them).

        Raises:
            SnapshotError: no stream is running, or some state is not data.
        """
        if not self._active:
            raise SnapshotError("Checkpoint: no stream is running to snapshot")
        stages = []
        for parts in self._stages:
            encoded = []
            for part in parts:
                factory, attrs = _state_of(part)
                encoder = StateEncoder(factory, _roots(factory), self._indexes)
                state = {name: encoder.encode(value) for name, value in attrs}
                encoded.append([type(_target(part)).__qualname__, state])
            stages.append(encoded)
        return json.dumps({"v": VERSION, "stages": stages}, separators=(",", ":")).encode()

    # -- the subscription -----------------------------------------------------------------------
    def _subscribed(self, per_stage: list[list[StageSink]]) -> None:
        if self._active:
            raise RuntimeError("Checkpoint: it follows one stream at a time (give each stream its own)")
        self._active = True
        self._stages = per_stage
        self._indexes = {}

    def _start(self) -> None:
        """The source is being subscribed: restore (if asked); what comes out from now is new."""
        self._restore_now()
        self._replaying = False

    def _restore_now(self) -> None:
        """Before the first item: write the snapshot's state into the fresh pipeline's parts."""
        data, self._restore = self._restore, None
        if data is None:
            return
        stages = data["stages"]
        if len(stages) != len(self._stages):
            raise SnapshotError(f"the snapshot has {len(stages)} stages, this pipeline {len(self._stages)}")
        for k, (parts, saved) in enumerate(zip(self._stages, stages, strict=True), 1):
            names = [type(_target(p)).__qualname__ for p in parts]
            if names != [s[0] for s in saved]:
                raise SnapshotError(
                    f"stage {k} of the snapshot has {[s[0] for s in saved]}, this pipeline {names}"
                )
            for part, (_, state) in zip(parts, saved, strict=True):
                factory, attrs = _state_of(part)
                target = _target(part)
                decoder = StateDecoder(_roots(factory))
                current = dict(attrs)
                for name, enc in state.items():
                    if isinstance(enc, dict) and "$k" in enc:
                        continue
                    object.__setattr__(target, name, decoder.decode(enc, current.get(name)))
                decoder.finish()


def checkpoint(cp: Checkpoint, *stages: Stage) -> Callable[[Observable[Any]], Observable[Any]]:
    """The ``stages`` one after the other (as ``pipe`` would), with ``cp`` able to snapshot their
    state mid-stream, or restore a snapshot before the first item.

    Args:
        cp: the :class:`Checkpoint` (with ``restore=`` a snapshot, the pipeline starts there).
        stages: operators (at least one), built from the same arguments as the snapshot's.

    Raises:
        TypeError: ``cp`` is not a Checkpoint, a stage is not callable.
        ValueError: no stages.

    A snapshot of another pipeline, or a damaged one, is refused at subscription: the
    :class:`SnapshotError` goes to ``on_error``. The stream itself is the same as without the
    checkpoint (items, timing, errors, disposal).

    Marble diagram (the stream is unchanged)::

        source:   -a-b-c-|      a="xa", b="y", c="z"
        operator: checkpoint(Checkpoint(), stop(["ab"]))
        result:   -a-b-c-|      a="x", b="ay", c="z"
    """
    if not isinstance(cp, Checkpoint):
        raise TypeError(f"checkpoint: cp must be a Checkpoint, got {describe(cp)}")
    check_stages("checkpoint", stages)

    def _checkpoint(source: Observable[Any]) -> Observable[Any]:
        def subscribe(
            observer: abc.ObserverBase[object], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            stream, per_stage = chain(source, stages, cp._start)
            try:
                cp._subscribed(per_stage)
            except RuntimeError as exc:
                observer.on_error(exc)
                return Disposable()
            # What a restored pipeline emits while it is subscribed, before the state goes in (a
            # response's opening events, a start_with), the first pipeline emitted at its own
            # subscription: the stream already has it.
            cp._replaying = cp._restore is not None
            emit = observer.on_next

            def on_next(value: object) -> None:
                if not cp._replaying:
                    emit(value)

            try:
                inner = stream.subscribe(
                    on_next, observer.on_error, observer.on_completed, scheduler=scheduler
                )
            except SnapshotError as exc:
                cp._active = False
                observer.on_error(exc)
                return Disposable()

            def dispose() -> None:
                cp._active = False
                inner.dispose()

            return Disposable(dispose)

        return Observable(subscribe)

    return _checkpoint
