"""Counters of a running server (:class:`ServerStats`), served at ``/health``."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .._finish import FinishReason

__all__ = ["ServerStats"]


@dataclass(slots=True)
class ServerStats:
    """Counters of a running server (thread-safe; read them through :meth:`snapshot`).

    Attributes:
        active: generations subscribed and not yet finished.
        waiting: requests waiting for a generation slot.
        started: generations started.
        finished: how many generations ended for each :class:`~rxstream.FinishReason` (the first
            reason reported for the request: a stop string reports ``stop`` even though it then
            cancels the model, a disconnect reports ``cancelled``).
        generated_tokens: token ids generated, all requests together.
        peak_active: the most generations that ran at once.
    """

    active: int = 0
    waiting: int = 0
    started: int = 0
    finished: Counter[str] = field(default_factory=Counter)
    generated_tokens: int = 0
    peak_active: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def queued(self, delta: int) -> None:
        """A request starts (+1) or stops (-1) waiting for a generation slot."""
        with self._lock:
            self.waiting += delta

    def generation_started(self) -> None:
        with self._lock:
            self.active += 1
            self.started += 1
            self.peak_active = max(self.peak_active, self.active)

    def generation_ended(self, reason: FinishReason, tokens: int) -> None:
        with self._lock:
            self.active -= 1
            self.finished[reason.value] += 1
            self.generated_tokens += tokens

    def snapshot(self) -> dict[str, Any]:
        """The counters as a JSON-ready dict."""
        with self._lock:
            return {
                "active": self.active,
                "waiting": self.waiting,
                "started": self.started,
                "finished": dict(self.finished),
                "generated_tokens": self.generated_tokens,
                "peak_active": self.peak_active,
            }
