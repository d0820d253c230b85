"""One run of :meth:`OnnxModel.generate_batch`: :class:`_BatchGeneration`, a left-padded batch.

The rows share one forward pass per step; each row ends on its own (EOS, stop id, budget) and
reports its end once through its own :class:`rxstream.FinishOnce` (``on_finish(row, Finish)``).
The observable completes when every row has ended.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import reactivex
from reactivex import Observable, abc
from reactivex.disposable import Disposable

from rxstream import Finish, FinishOnce, FinishReason

from ._generation import GenerateCall, make_sampler, token_item

__all__ = ["RowFinishCallback", "batch_observable"]

log = logging.getLogger("rxstream.backends")

RowFinishCallback = Callable[[int, Finish], None]


def batch_observable(
    call: GenerateCall, rows: list[list[int]], pad: int, on_finish: RowFinishCallback | None
) -> Observable[tuple[int, Any]]:
    """The cold observable :meth:`OnnxModel.generate_batch` returns (one batch run per subscription)."""

    def subscribe(
        observer: abc.ObserverBase[tuple[int, Any]], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        run = _BatchGeneration(call, rows, pad, observer, on_finish)
        return run.start(call.worker(scheduler))

    return reactivex.create(subscribe)


def _row_callback(on_finish: RowFinishCallback, row: int) -> Callable[[Finish], None]:
    return lambda finish: on_finish(row, finish)


class _BatchGeneration:
    """One subscription of :meth:`OnnxModel.generate_batch`: the batch loop, cancellation, row ends.

    Row ``i`` samples with seed ``seed + i``. Each row's end is reported once (its own
    :class:`rxstream.FinishOnce`); cancelling reports ``CANCELLED`` for every row still running.
    """

    __slots__ = ("_call", "_observer", "_pad", "_rows", "_samplers", "cancelled", "row_finish")

    def __init__(
        self,
        call: GenerateCall,
        rows: list[list[int]],
        pad: int,
        observer: abc.ObserverBase[tuple[int, Any]],
        on_finish: RowFinishCallback | None,
    ) -> None:
        self._call = call
        self._rows = rows
        self._pad = pad
        self._observer = observer
        seed = call.params.seed
        self._samplers = [
            make_sampler(call, r, None if seed is None else seed + i) for i, r in enumerate(rows)
        ]
        self.row_finish = [
            FinishOnce(None if on_finish is None else _row_callback(on_finish, i)) for i in range(len(rows))
        ]
        """Row ``i``'s end, reported at most once."""
        self.cancelled = False

    def start(self, scheduler: abc.SchedulerBase) -> abc.DisposableBase:
        """Schedule the loop; the returned disposable cancels it."""
        scheduled = scheduler.schedule(self._action)

        def dispose() -> None:
            self.cancelled = True
            failed = self._finish_all(Finish(FinishReason.CANCELLED))
            if failed is not None:  # the subscriber is gone; nothing to route it to
                log.error("generate_batch: on_finish raised on cancellation", exc_info=failed)
            scheduled.dispose()

        return Disposable(dispose)

    def _finish_all(self, finish: Finish) -> Exception | None:
        """Report ``finish`` for every row still running, even when ``on_finish`` raises for one;
        return the first exception it raised."""
        failed: Exception | None = None
        for once in self.row_finish:
            try:
                once(finish)
            except Exception as exc:
                failed = failed or exc
        return failed

    def _action(self, _scheduler: abc.SchedulerBase, _state: Any = None) -> None:
        self.run()

    def run(self) -> None:
        """Run the batch to its end (on the calling thread); a failure ends every row with it."""
        self._call.track(1)
        try:
            self._loop()
        except Exception as exc:
            failed = self._finish_all(Finish(FinishReason.ERROR, error=exc))
            if failed is not None:  # the loop's error still goes on
                log.error("generate_batch: on_finish raised on a failure", exc_info=failed)
            self._observer.on_error(exc)
        finally:
            self._call.track(-1)

    def _loop(self) -> None:
        call, rows, pad, observer = self._call, self._rows, self._pad, self._observer
        graph, done = call.session, self.row_finish
        batch, width = len(rows), max(len(r) for r in rows)
        ids = np.full((batch, width), pad, dtype=np.int64)
        mask = np.zeros((batch, width), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, width - len(r) :] = r
            mask[i, width - len(r) :] = 1
        positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
        past = graph.empty_past(batch)
        produced = 0
        while True:
            if self.cancelled:
                return
            if produced >= call.params.max_new_tokens or mask.shape[1] >= call.max_length:
                failed = self._finish_all(Finish(FinishReason.LENGTH))
                if failed is not None:
                    raise failed
                break
            feeds = {"input_ids": ids, "attention_mask": mask}
            if graph.has_position_ids:
                feeds["position_ids"] = positions
            graph.last_logits(feeds)  # the prompts: only their last positions are sampled
            logits, past = graph.step(feeds, past)
            next_ids = np.full((batch, 1), pad, dtype=np.int64)
            for i in range(batch):
                if done[i].done:
                    continue
                row = logits[i, -1]
                token = self._samplers[i](row)
                if token in call.stops:
                    done[i](Finish(FinishReason.STOP, stop=token))
                elif token in call.eos:
                    done[i](Finish(FinishReason.EOS))
                else:
                    if self.cancelled:
                        return
                    observer.on_next((i, token_item(call, token, row)))
                    next_ids[i, 0] = token
            produced += 1
            if all(once.done for once in done):
                break
            ids = next_ids
            mask = np.concatenate([mask, np.ones((batch, 1), np.int64)], axis=1)
            positions = positions[:, -1:] + 1
        if not self.cancelled:
            observer.on_completed()
