"""The state shared by the server's request handlers (:class:`ServerState`)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reactivex.scheduler import ThreadPoolScheduler
from reactivex.subject import ReplaySubject

from .._generative_model import GenerativeModel
from ._lanes import TextLanes
from ._limits import ServerLimits
from ._stats import ServerStats

if TYPE_CHECKING:
    from ._metrics import ServerMetrics
    from ._replay_hub import ReplayHub

__all__ = ["ServerState", "context_length"]


@dataclass(slots=True)
class ServerState:
    """Everything the request handlers share: the model, its limits, counters and thread pool.

    Attributes:
        model: the served model.
        model_name: the id shown to clients.
        limits: what a request may ask for.
        stats: the counters reported at ``/health``.
        context_length: the model's context in tokens, or None when it does not say.
        scheduler: the pool of ``limits.max_concurrency`` threads the generations run on (when
            the model does not batch them).
        batching: whether the generations share the model's batch (continuous batching) instead
            of the pool.
        semaphore: the generation slots (made on first use, on the serving loop).
        shutdown: emits once when the server begins to shut down; every generation ends there
            (a replay subject: a generation that starts later ends at once).
        reasoning_format: the preset chat output is routed with (reasoning, tool calls), or None.
        lanes: the pool that runs batched generations' text pipelines, off the batch's thread.
        metrics: what ``/metrics`` serves (None: not measured).
        replay: the resumable streams (None: streams are not kept for resuming).
    """

    model: GenerativeModel
    model_name: str
    limits: ServerLimits
    stats: ServerStats
    context_length: int | None
    scheduler: ThreadPoolScheduler
    batching: bool = False
    semaphore: asyncio.Semaphore | None = None
    shutdown: ReplaySubject[bool] = field(default_factory=lambda: ReplaySubject(buffer_size=1))
    loop: asyncio.AbstractEventLoop | None = None
    reasoning_format: str | None = None
    lanes: TextLanes = field(default_factory=TextLanes)
    metrics: ServerMetrics | None = None
    replay: ReplayHub | None = None

    def begin_shutdown(self) -> None:
        """End every generation now (thread-safe; from a signal handler too): their streams end
        with the API's error event (503, ``server_shutdown``: the answer is incomplete) instead
        of being cut when the server stops."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.shutdown.on_next, True)
                return
        self.shutdown.on_next(True)

    def batch_stats(self) -> dict[str, Any] | None:
        """The model's batch occupancy and KV memory (when it batches), for ``/health``."""
        if not self.batching:
            return None
        stats = getattr(self.model, "batch_stats", None)
        result = stats() if callable(stats) else None
        return result if isinstance(result, dict) else None

    def live(self) -> dict[str, Any]:
        """What the metrics read at scrape time: running and waiting generations, the batch's
        stats (or None), a gateway's upstream engines (or none)."""
        snapshot = self.stats.snapshot()
        replicas = getattr(self.model, "replica_stats", None)
        return {
            "running": snapshot["active"],
            "waiting": snapshot["waiting"],
            "batch": self.batch_stats(),
            "upstream": replicas() if callable(replicas) else [],
            "replay": self.replay.stats() if self.replay is not None else None,
        }

    def slots(self) -> asyncio.Semaphore:
        if self.semaphore is None:  # created lazily: it must belong to the serving loop
            self.semaphore = asyncio.Semaphore(self.limits.max_concurrency)
        return self.semaphore


def context_length(model: Any) -> int | None:
    """The model's context length in tokens, from the attributes models commonly have."""
    for path in (("context_length",), ("max_length",), ("config", "max_position_embeddings")):
        obj: Any = model
        for name in path:
            obj = getattr(obj, name, None)
        if isinstance(obj, int) and not isinstance(obj, bool) and obj > 0:
            return obj
    return None
