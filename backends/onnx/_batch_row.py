"""One generation in the batch: :class:`BatchRow`, its state, and how it samples, emits and ends."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
import reactivex
from reactivex import Observable, abc
from reactivex.disposable import Disposable

from rxstream import Finish, FinishCallback, FinishOnce, FinishReason

from ._generation import GenerateCall, make_sampler, token_item
from ._lookup import PromptLookup

if TYPE_CHECKING:
    from ._scheduler import BatchScheduler

__all__ = ["BatchRow", "batched_observable"]

log = logging.getLogger("rxstream.backends")


class BatchRow:
    """One generation in the scheduler: its prompt, sampler, state and observer."""

    __slots__ = (
        "call",
        "cancelled",
        "constraint",
        "done",
        "failed",
        "finish",
        "followers",
        "generated",
        "key",
        "leader",
        "length",
        "lookup",
        "next_token",
        "observer",
        "past",
        "prefilled",
        "produced",
        "prompt",
        "prompt_logits",
        "ready",
        "reserved",
        "sampler",
        "slot",
        "state",
    )

    def __init__(
        self,
        call: GenerateCall,
        prompt: list[int],
        observer: abc.ObserverBase[Any],
        on_finish: FinishCallback | None,
        seed: int | None,
        ready: Callable[[], bool] | None,
    ) -> None:
        self.call = call
        self.prompt = prompt
        self.key = tuple(prompt)
        """The prompt as a hashable key (rows with equal keys share a prefill)."""
        self.observer = observer
        self.finish = FinishOnce(on_finish)
        self.sampler = make_sampler(call, prompt, seed)
        self.constraint = getattr(self.sampler, "constraint", None)
        """The row's grammar state (the scheduler computes a batch's masks together), or None."""
        self.ready = ready
        self.reserved = min(len(prompt) + call.params.max_new_tokens, call.max_length)
        self.state = "waiting"  # waiting, prefill, follow, decode, done
        self.cancelled = False
        self.done = False
        """Set once the row has left the scheduler (its KV cache freed)."""
        self.prefilled = 0
        self.length = 0
        self.produced = 0
        self.generated: list[int] = []
        """The ids emitted so far (fed back one step later: the cache holds all but the last)."""
        self.failed = False
        self.lookup: PromptLookup | None = None
        """The row's n-gram index for drafts (made when it first decodes alone), or None."""
        self.next_token = 0
        self.slot = -1
        self.past: list[ort.OrtValue] | None = None
        self.leader: BatchRow | None = None
        """The row whose prompt this one shares: prefilling (state ``follow``) or done with its
        prompt (state ``copy``, until placed)."""
        self.followers: list[BatchRow] = []
        self.prompt_logits: npt.NDArray[np.float32] | None = None
        """The logits after the prompt (what the first id is sampled from), kept for rows that
        share the prompt later."""

    def consumer_ready(self) -> bool:
        """Whether a row's consumer takes more now (a predicate that raises counts as ready)."""
        if self.ready is None:
            return True
        try:
            return bool(self.ready())
        except Exception:
            log.exception("generate: ready() raised")
            return True

    def emit(self, logits: npt.NDArray[np.float32]) -> None:
        """Sample the row's next id from its logits; emit it or end the self."""
        call = self.call
        try:
            token = self.sampler(logits)
        except Exception as exc:
            self.fail(exc)
            return
        if token in call.stops:
            self.end(Finish(FinishReason.STOP, stop=token))
            return
        if token in call.eos:
            self.end(Finish(FinishReason.EOS))
            return
        if self.cancelled:
            return
        try:
            self.observer.on_next(token if call.logprobs is None else token_item(call, token, logits))
        except Exception as exc:
            self.fail(exc)
            return
        self.produced += 1
        self.generated.append(token)
        if self.lookup is not None:
            self.lookup.append(token)
        self.next_token = token
        if self.cancelled:
            return
        constraint = self.constraint
        if constraint is not None and constraint.finished:  # only an end-of-sequence id is left
            self.end(Finish(FinishReason.EOS))
            return
        if self.produced >= call.params.max_new_tokens or len(self.prompt) + self.produced >= call.max_length:
            self.end(Finish(FinishReason.LENGTH))

    def hand_on_followers(self) -> None:
        """This row, a prefilling leader, left: its first follower prefills instead, the others
        follow that one."""
        if not self.followers:
            return
        heirs = [f for f in self.followers if not f.cancelled and f.state == "follow"]
        self.followers = []
        if not heirs:
            return
        new_leader = heirs[0]
        new_leader.leader = None
        new_leader.state = "prefill"
        new_leader.followers = heirs[1:]
        for f in heirs[1:]:
            f.leader = new_leader

    def end(self, finish: Finish) -> None:
        """End the row with ``finish`` (its stream completes, or fails if on_finish raises)."""
        self.state = "done"
        try:
            owned = self.finish(finish)
        except Exception as exc:  # on_finish raised: the stream still ends, with that error
            self.observer.on_error(exc)
            return
        if owned:
            self.observer.on_completed()

    def fail(self, exc: Exception) -> None:
        """End the row with ``exc`` (its stream fails)."""
        self.state = "done"
        self.failed = True
        try:
            owned = self.finish(Finish(FinishReason.ERROR, error=exc))
        except Exception:  # claimed, but on_finish raised: the error still goes on
            log.exception("generate: on_finish raised on a failure")
            owned = True
        if owned:
            self.observer.on_error(exc)

    def fail_group(self, exc: Exception) -> None:
        """Fail the row and the rows following its prefill."""
        followers = [f for f in self.followers if f.state == "follow"]
        self.followers = []
        for member in [self, *followers]:
            member.fail(exc)


def batched_observable(
    scheduler: Callable[[], BatchScheduler],
    call: GenerateCall,
    prompt: list[int],
    on_finish: FinishCallback | None,
    seed: int | None,
    ready: Callable[[], bool] | None,
) -> Observable[Any]:
    """The cold observable a batched :meth:`OnnxModel.generate` returns: each subscription is a row
    of the model's scheduler (made on first use); disposing cancels that row only."""

    def subscribe(
        observer: abc.ObserverBase[Any], _scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        batch = scheduler()
        row = BatchRow(call, prompt, observer, on_finish, seed, ready)
        batch.submit(row)
        return Disposable(lambda: batch.cancel(row))

    return reactivex.create(subscribe)
