"""One run of :meth:`OnnxModel.generate`: :class:`_Generation`, the decode loop of one subscription.

:meth:`OnnxModel.generate` checks its arguments once and keeps them in a :class:`GenerateCall`;
every subscription then makes a :class:`_Generation` (its own sampler, KV cache, and end reported
exactly once through :class:`rxstream.FinishOnce`) and runs it on a scheduler. The batch run of
:meth:`OnnxModel.generate_batch` lives in :mod:`._batch` and shares :class:`GenerateCall`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import reactivex
from reactivex import Observable, abc
from reactivex.disposable import Disposable
from reactivex.scheduler import ThreadPoolScheduler

from rxstream import Finish, FinishCallback, FinishOnce, FinishReason, Piece, SamplingParams
from rxstream.structured import Grammar, GrammarTokenizer

from ._sampling import Sampler, token_logprobs
from ._session import DecoderSession

__all__ = ["GenerateCall", "default_scheduler", "generate_observable", "make_sampler", "token_item"]

log = logging.getLogger("rxstream.backends")

_READY_POLL = 0.005
"""Seconds between looks at a ``ready`` predicate that said no."""

_scheduler_lock = threading.Lock()
_scheduler: ThreadPoolScheduler | None = None


def default_scheduler() -> ThreadPoolScheduler:
    """The shared pool that runs generations when no scheduler is given (8 workers, created on first use)."""
    global _scheduler
    with _scheduler_lock:
        if _scheduler is None:
            _scheduler = ThreadPoolScheduler(max_workers=8)
        return _scheduler


@dataclass(frozen=True, slots=True)
class GenerateCall:
    """What one ``generate``/``generate_batch`` call asked for, checked; shared by its subscriptions."""

    session: DecoderSession
    """The graph the runs step through."""
    max_length: int
    """The model's context length (prompt plus generated ids)."""
    vocab_size: int
    params: SamplingParams
    stops: frozenset[int]
    """Stop token ids (checked against the vocabulary)."""
    eos: frozenset[int]
    """The ids that end a run with ``Finish(EOS)`` (empty with ``ignore_eos``)."""
    scheduler: abc.SchedulerBase | None
    """The scheduler given to the call (else the subscription's, else :func:`default_scheduler`)."""
    track: Callable[[int], None]
    """Counts running loops on the model (``+1`` when a loop starts, ``-1`` when it ends)."""
    logprobs: int | None = None
    """None: emit ids; k: emit a :class:`~rxstream.Piece` per id with its logprob and k alternatives."""
    grammar: Grammar | None = None
    """The generation's grammar (each run gets its own :class:`~rxstream.structured.TokenConstraint`)."""
    grammars: GrammarTokenizer | None = None
    """The model's tokenizer for the grammar engine (set with ``grammar``)."""

    def worker(self, subscribe_scheduler: abc.SchedulerBase | None) -> abc.SchedulerBase:
        return self.scheduler or subscribe_scheduler or default_scheduler()


def make_sampler(call: GenerateCall, prompt: Sequence[int], seed: int | None) -> Sampler:
    """A fresh sampler for one run (it holds the random state and the ids seen so far)."""
    p = call.params
    constraint = None
    if call.grammar is not None and call.grammars is not None:
        constraint = call.grammars.constraint(call.grammar)
    params = p if seed == p.seed else p.replace(seed=seed)
    return Sampler(call.vocab_size, params, seen=prompt, constraint=constraint)


def token_item(call: GenerateCall, token: int, logits_row: np.ndarray) -> int | Piece:
    """What a run emits for a sampled ``token``: the id, or (with ``call.logprobs``) a
    :class:`~rxstream.Piece` with no text carrying the id, its logprob and its alternatives."""
    k = call.logprobs
    if k is None:
        return token
    logprob, top = token_logprobs(logits_row, token, k)
    return Piece("", (token,), (logprob,), (top,))


def generate_observable(
    call: GenerateCall,
    prompt: list[int],
    on_finish: FinishCallback | None,
    ready: Callable[[], bool] | None = None,
) -> Observable[Any]:
    """The cold observable :meth:`OnnxModel.generate` returns (when it does not batch): one
    :class:`_Generation` per subscription."""

    def subscribe(
        observer: abc.ObserverBase[Any], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        run = _Generation(call, prompt, observer, on_finish, ready)
        return run.start(call.worker(scheduler))

    return reactivex.create(subscribe)


class _Generation:
    """One subscription of :meth:`OnnxModel.generate`: its decode loop, cancellation, and end.

    The end (completion, failure or cancellation) is reported exactly once, to ``on_finish`` and
    then to the observer, by whichever thread gets there first (:class:`rxstream.FinishOnce`).
    """

    __slots__ = ("_call", "_finish", "_observer", "_prompt", "_ready", "_sampler", "cancelled")

    def __init__(
        self,
        call: GenerateCall,
        prompt: list[int],
        observer: abc.ObserverBase[Any],
        on_finish: FinishCallback | None,
        ready: Callable[[], bool] | None = None,
    ) -> None:
        self._call = call
        self._ready = ready
        self._prompt = prompt
        self._observer = observer
        self._sampler = make_sampler(call, prompt, call.params.seed)
        self._finish = FinishOnce(on_finish)
        self.cancelled = False
        """Set by :meth:`cancel`; the loop stops before its next forward pass."""

    def start(self, scheduler: abc.SchedulerBase) -> abc.DisposableBase:
        """Schedule the loop; the returned disposable cancels it."""
        scheduled = scheduler.schedule(self._action)

        def dispose() -> None:
            self.cancel()
            scheduled.dispose()

        return Disposable(dispose)

    def cancel(self) -> None:
        """Stop the loop and report ``Finish(CANCELLED)`` unless the run has ended already."""
        self.cancelled = True
        try:
            self._finish(Finish(FinishReason.CANCELLED))
        except Exception:  # the subscriber is gone; nothing to route it to
            log.exception("generate: on_finish raised on cancellation")

    def _action(self, _scheduler: abc.SchedulerBase, _state: Any = None) -> None:
        self.run()

    def run(self) -> None:
        """Run the loop to its end and report it (on the calling thread)."""
        self._call.track(1)
        try:
            try:
                finish = self._decode()
            except Exception as exc:
                self._fail(exc)
                return
            if finish is None:
                return  # cancelled: cancel() reported it
            try:
                owned = self._finish(finish)
            except Exception as exc:  # on_finish raised: the stream still ends, with that error
                self._observer.on_error(exc)
                return
            if owned:
                self._observer.on_completed()
        finally:
            self._call.track(-1)

    def _fail(self, exc: Exception) -> None:
        try:
            owned = self._finish(Finish(FinishReason.ERROR, error=exc))
        except Exception:  # claimed, but on_finish raised: the loop's error still goes on
            log.exception("generate: on_finish raised on a failure")
            owned = True
        if owned:
            self._observer.on_error(exc)

    def _decode(self) -> Finish | None:
        """The decode loop: how the run ended, or None when it was cancelled."""
        call, prompt, observer, sampler = self._call, self._prompt, self._observer, self._sampler
        max_new_tokens, limit = call.params.max_new_tokens, call.max_length
        needed = min(len(prompt) + max_new_tokens, limit)
        cache = call.session.new_cache(1, needed, limit)
        # every per-step input is a view of one buffer made here: a decode step allocates nothing
        ones = np.ones((1, needed), np.int64)
        positions = np.arange(needed, dtype=np.int64)[None, :]
        next_id = np.zeros((1, 1), np.int64)
        ids = np.asarray([prompt], dtype=np.int64)
        total = len(prompt)
        produced = 0
        has_positions = call.session.has_position_ids
        plain = call.logprobs is None
        constraint = getattr(sampler, "constraint", None)
        while True:
            while self._ready is not None and not self.cancelled and not self._ready():
                time.sleep(_READY_POLL)  # the consumer is behind: wait for it
            if self.cancelled:
                return None
            if produced >= max_new_tokens or total >= limit:
                return Finish(FinishReason.LENGTH)
            feeds = {"input_ids": ids, "attention_mask": ones[:, :total]}
            if has_positions:
                feeds["position_ids"] = positions[:, total - ids.shape[1] : total]
            call.session.last_logits(feeds)  # only the last position is sampled
            logits = cache.step(feeds, total)
            row = logits[0, -1]
            token = sampler(row)
            if token in call.stops:
                return Finish(FinishReason.STOP, stop=token)
            if token in call.eos:
                return Finish(FinishReason.EOS)
            if self.cancelled:
                return None
            observer.on_next(token if plain else token_item(call, token, row))
            if constraint is not None and constraint.finished:
                return Finish(FinishReason.EOS)  # the grammar is complete: only EOS is left
            produced += 1
            total += 1
            next_id[0, 0] = token
            ids = next_id
