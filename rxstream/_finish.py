"""Why a stream ended: :class:`FinishReason`, :class:`Finish` and :class:`FinishRecorder`.

A plain ``Observable[str]`` completes without saying why. Every rxstream stage that can end a
stream (the ``stop`` operators, the token budget, the backends) takes an ``on_finish`` callback
and calls it exactly once per subscription, *before* its terminal notification, with a
:class:`Finish` record. Passing one :class:`FinishRecorder` to several stages of a pipeline gives
the reason of the whole run: the first stage to report is the one that ended it (a stop string
reports ``stop`` before it disposes the backend, which then reports ``cancelled``; a backend that
reaches EOS reports ``eos`` before its completion travels down to the text stages).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from .text._regex_ops import RegexStop

__all__ = ["Finish", "FinishCallback", "FinishOnce", "FinishReason", "FinishRecorder"]


class FinishReason(StrEnum):
    """The reasons a stream can end (values match OpenAI's ``finish_reason`` where one exists)."""

    STOP = "stop"
    """A stop string or stop token id was found (see :attr:`Finish.stop`)."""
    LENGTH = "length"
    """The token budget ran out."""
    EOS = "eos"
    """The source ended by itself (end-of-sequence token, or the text source completed)."""
    CANCELLED = "cancelled"
    """The subscriber disposed the subscription before the stream ended."""
    ERROR = "error"
    """The stream failed (see :attr:`Finish.error`)."""


@dataclass(frozen=True, slots=True)
class Finish:
    """How one subscription of a stream ended.

    Attributes:
        reason: why it ended.
        stop: the stop string or stop token id that matched, when ``reason`` is ``STOP``; for a
            stop id sequence the whole sequence as a tuple of ids (a stop one id long reports
            the int); for a regular-expression stop rule a :class:`~rxstream.RegexStop` (the
            rule and the text).
        error: the exception, when ``reason`` is ``ERROR``.
        dropped: token ids that entered but were not emitted: their text was cut off by a
            stop, or still held (by this stage or a linked stage above it) when the stream
            ended early (aligned streams of :class:`~rxstream.Piece` only; SEMANTICS §5).
    """

    reason: FinishReason
    stop: str | int | tuple[int, ...] | RegexStop | None = None
    error: BaseException | None = None
    dropped: tuple[int, ...] = ()

    @property
    def openai_reason(self) -> str | None:
        """The reason as an OpenAI ``finish_reason`` (``"stop"`` or ``"length"``; None if cancelled)."""
        if self.reason in (FinishReason.STOP, FinishReason.EOS):
            return "stop"
        if self.reason is FinishReason.LENGTH:
            return "length"
        return None

    def __str__(self) -> str:
        if self.reason is FinishReason.STOP:
            return f"stop ({self.stop!r})"
        if self.reason is FinishReason.ERROR:
            return f"error ({type(self.error).__name__}: {self.error})"
        return str(self.reason.value)


FinishCallback = Callable[[Finish], None]
"""The type of an ``on_finish`` callback."""


class FinishRecorder:
    """Keeps the first :class:`Finish` reported to it; pass it as ``on_finish`` to many stages.

    Thread-safe. ``recorder.finish`` is ``None`` until a stage reports.

    >>> from rxstream import FinishRecorder
    >>> rec = FinishRecorder()
    >>> rec(Finish(FinishReason.STOP, stop="\\n")); rec(Finish(FinishReason.CANCELLED))
    >>> rec.finish.reason, rec.finish.stop
    (<FinishReason.STOP: 'stop'>, '\\n')
    """

    __slots__ = ("_event", "_finish", "_lock", "reports")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._finish: Finish | None = None
        self.reports: list[Finish] = []
        """Every report received, in order (the first one is :attr:`finish`)."""

    def __call__(self, finish: Finish) -> None:
        with self._lock:
            self.reports.append(finish)
            if self._finish is None:
                self._finish = finish
        self._event.set()

    @property
    def finish(self) -> Finish | None:
        """The first report, or None if no stage has reported yet."""
        return self._finish

    def wait(self, timeout: float | None = None) -> Finish | None:
        """Block until a stage reports (or ``timeout`` seconds pass); return the first report."""
        self._event.wait(timeout)
        return self._finish

    def reset(self) -> None:
        """Forget all reports (to reuse the recorder for another subscription)."""
        with self._lock:
            self._finish = None
            self.reports.clear()
            self._event.clear()


class FinishOnce:
    """Reports a stream's :class:`Finish` to ``on_finish`` at most once, from any thread.

    For sources whose end can be decided by several threads at once (the producer completing, the
    subscriber disposing): ``once(finish)`` calls the callback only the first time and returns
    whether it did, so the caller knows whether it still owns the terminal notification.
    """

    __slots__ = ("_done", "_lock", "_on_finish")

    def __init__(self, on_finish: FinishCallback | None) -> None:
        self._lock = threading.Lock()
        self._done = False
        self._on_finish = on_finish

    @property
    def done(self) -> bool:
        """True once a finish has been reported (or claimed)."""
        return self._done

    def __call__(self, finish: Finish) -> bool:
        with self._lock:
            if self._done:
                return False
            self._done = True
        if self._on_finish is not None:
            self._on_finish(finish)
        return True
