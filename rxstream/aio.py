"""Bridges between ReactiveX observables and asyncio.

:func:`to_async_iterable` consumes an ``Observable`` (typically produced on a backend's worker
thread) from a coroutine with ``async for``; :func:`from_async_iterable` turns an async iterable
into a cold ``Observable`` whose subscriptions run as tasks on an event loop.

Threading model of :func:`to_async_iterable`:

* The producer (any thread) appends items to a queue under a lock. The event-loop thread is woken
  with **one** ``loop.call_soon_threadsafe`` per batch: while a wake-up is already pending, more
  items just join the queue. That is the only thread hop.
* With ``coalesce=True`` (the default) the consumer takes everything queued at once and merges
  adjacent ``str`` items into one string (and adjacent :class:`~rxstream.Piece` items into one
  piece), so a slow consumer sees fewer, larger deltas instead of falling behind.
* With ``maxsize`` set, a producer on another thread **blocks** while ``maxsize`` items are queued,
  until the consumer takes them (real backpressure: a model stops generating while the client
  does not read). A producer that runs *on the event-loop thread itself* (a synchronous observable
  subscribed from the coroutine, or one fed by :func:`from_async_iterable` on the same loop) is
  never blocked, since blocking the loop would deadlock: for such producers the queue may grow
  beyond ``maxsize``.
* Leaving the ``async for`` early (``break``, an exception), calling ``aclose()``, or cancelling
  the consuming task disposes the subscription, which cancels the generation upstream. ``break``
  relies on the iterator being released (CPython frees it at once when the iterator is not
  stored elsewhere); use ``contextlib.aclosing`` for disposal at a point you choose.
* An ``on_error`` from the source is raised in the consumer, after the items queued before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any, Generic, TypeVar

import reactivex
from reactivex import abc
from reactivex.disposable import Disposable

from ._finish import Finish, FinishCallback, FinishOnce, FinishReason
from ._piece import Piece, join_tokens

__all__ = ["from_async_iterable", "scheduler_loop", "to_async_iterable"]

_T = TypeVar("_T")

_TASKS: set[asyncio.Task[None]] = set()
"""Tasks started by :func:`from_async_iterable` subscriptions that have not finished yet."""


def scheduler_loop(scheduler: abc.SchedulerBase | None) -> asyncio.AbstractEventLoop | None:
    """The event loop of an asyncio scheduler (reactivex's ``AsyncIOScheduler`` and
    ``AsyncIOThreadSafeScheduler``), else None: a backend given one runs its requests as tasks on
    that loop instead of on threads."""
    from reactivex.scheduler.eventloop import AsyncIOScheduler

    if not isinstance(scheduler, AsyncIOScheduler):
        return None
    loop = getattr(scheduler, "_loop", None)  # set by its constructor; reactivex has no accessor
    return loop if isinstance(loop, asyncio.AbstractEventLoop) else None


def _merge(items: list[Any]) -> list[Any]:
    """Merge adjacent ``str`` items, and adjacent compatible :class:`Piece` items, into one each."""
    out: list[Any] = []
    for item in items:
        if out:
            last = out[-1]
            if type(item) is str and type(last) is str:
                out[-1] = last + item
                continue
            if (
                isinstance(item, Piece)
                and isinstance(last, Piece)
                and (item.logprobs is None) == (last.logprobs is None)
                and (
                    not (item.size and last.size)
                    or (
                        (item.top_logprobs is None) == (last.top_logprobs is None)
                        and (item.tokens is None) == (last.tokens is None)
                    )
                )
            ):
                joined = (last, item)
                out[-1] = join_tokens(
                    last.text + item.text, joined, logprobs_default=last.logprobs is not None
                )
                continue
        out.append(item)
    return out


class _Channel(Generic[_T]):
    """State shared by the producer-side observer and the consumer-side iterator.

    It holds no reference to the iterator, so dropping the iterator (``break``) lets a finalizer
    dispose the subscription.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, maxsize: int | None) -> None:
        self.loop = loop
        self.loop_thread = threading.get_ident()
        self.maxsize = maxsize
        # reentrant: the iterator's finalizer (close) may run inside a garbage collection that
        # happens on a thread holding this lock (the producer in on_next)
        self.cond = threading.Condition(threading.RLock())
        self.queue: deque[_T] = deque()
        self.done = False
        self.error: BaseException | None = None
        self.closed = False
        self.waiter: asyncio.Future[None] | None = None
        self.wake_pending = False
        self.subscription: abc.DisposableBase | None = None

    # -- producer side (any thread) -------------------------------------------------------
    def _notify_locked(self) -> bool:
        """Schedule one wake-up of the consumer unless one is pending (lock held).

        Returns False when the loop is closed: nobody can consume any more, and the caller must
        :meth:`close` the channel (after releasing the lock) so that the source is disposed.
        """
        if self.waiter is not None and not self.wake_pending:
            self.wake_pending = True
            try:
                if threading.get_ident() == self.loop_thread:  # no self-pipe write from the loop itself
                    self.loop.call_soon(self._wake)
                else:
                    self.loop.call_soon_threadsafe(self._wake)
            except RuntimeError:  # loop closed: nobody is listening any more
                return False
        return True

    def on_next(self, value: _T) -> None:
        with self.cond:
            if self.closed or self.done:
                return
            if self.maxsize is not None and threading.get_ident() != self.loop_thread:
                while len(self.queue) >= self.maxsize and not self.closed:
                    if self.loop.is_closed():  # the consumer can never take them: stop
                        break
                    self.cond.wait(0.5)
                if self.closed:
                    return
            self.queue.append(value)
            alive = self._notify_locked() and not self.loop.is_closed()
        if not alive:
            self.close()

    def on_error(self, error: Exception) -> None:
        with self.cond:
            if self.closed or self.done:
                return
            self.done = True
            self.error = error
            alive = self._notify_locked()
        if not alive:
            self.close()

    def on_completed(self) -> None:
        with self.cond:
            if self.closed or self.done:
                return
            self.done = True
            alive = self._notify_locked()
        if not alive:
            self.close()

    # -- consumer side (event-loop thread) ------------------------------------------------
    def _wake(self) -> None:
        with self.cond:
            self.wake_pending = False
            waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        """Dispose the subscription and release a blocked producer (idempotent, any thread)."""
        with self.cond:
            if self.closed:
                return
            self.closed = True
            self.queue.clear()
            subscription, self.subscription = self.subscription, None
            self.cond.notify_all()
        if subscription is not None:
            subscription.dispose()


class _ObservableAsyncIterator(Generic[_T]):
    """The async iterator returned by :func:`to_async_iterable` (subscribes on first use)."""

    def __init__(self, source: reactivex.Observable[_T], coalesce: bool, maxsize: int | None) -> None:
        self._source = source
        self._coalesce = coalesce
        self._maxsize = maxsize
        self._channel: _Channel[_T] | None = None
        self._ready: deque[_T] = deque()
        self._finished = False

    def __aiter__(self) -> _ObservableAsyncIterator[_T]:
        return self

    def _start(self) -> _Channel[_T]:
        channel: _Channel[_T] = _Channel(asyncio.get_running_loop(), self._maxsize)
        self._channel = channel
        weakref.finalize(self, channel.close)
        subscription = self._source.subscribe(channel.on_next, channel.on_error, channel.on_completed)
        with channel.cond:
            if channel.closed:  # closed while subscribing
                later = subscription
            else:
                channel.subscription = subscription
                later = None
        if later is not None:
            later.dispose()
        return channel

    async def __anext__(self) -> _T:
        if self._ready:
            return self._ready.popleft()
        if self._finished:
            raise StopAsyncIteration
        channel = self._channel if self._channel is not None else self._start()
        try:
            while True:
                with channel.cond:
                    if channel.queue:
                        if self._coalesce:
                            items = list(channel.queue)
                            channel.queue.clear()
                        else:
                            items = [channel.queue.popleft()]
                        channel.cond.notify_all()
                        channel.waiter = None
                    elif channel.done or channel.closed:
                        items = []
                        error = channel.error
                        channel.waiter = None
                    else:
                        waiter: asyncio.Future[None] = channel.loop.create_future()
                        channel.waiter = waiter
                        items = None
                if items is None:
                    await waiter
                    continue
                if items:
                    if self._coalesce:
                        items = _merge(items)
                    self._ready.extend(items)
                    return self._ready.popleft()
                self._finished = True
                channel.close()
                if error is not None:
                    raise error
                raise StopAsyncIteration
        except asyncio.CancelledError:
            self._finished = True
            channel.close()
            raise

    async def aclose(self) -> None:
        """Dispose the subscription (cancelling the upstream work); further iteration ends."""
        self._finished = True
        self._ready.clear()
        if self._channel is not None:
            self._channel.close()


def to_async_iterable(
    obs: reactivex.Observable[_T], *, coalesce: bool = True, maxsize: int | None = None
) -> AsyncIterator[_T]:
    """Iterate an observable from a coroutine (``async for item in to_async_iterable(obs)``).

    The subscription starts on the first ``__anext__`` (inside the running event loop). See the
    module documentation for the threading model.

    Args:
        obs: the source; it may emit on any thread.
        coalesce: merge items queued since the consumer last looked: adjacent ``str`` items are
            concatenated, adjacent :class:`~rxstream.Piece` items joined (text, ids and per-token data).
            Other items are passed one by one.
        maxsize: block a producer thread (not the event-loop thread) while this many items are
            queued. ``None``: unbounded.

    Raises:
        ValueError: ``maxsize`` is not a positive int.
    """
    if maxsize is not None and (isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1):
        raise ValueError(f"to_async_iterable: maxsize must be a positive int or None, got {maxsize!r}")
    return _ObservableAsyncIterator(obs, coalesce, maxsize)


def from_async_iterable(
    ait: AsyncIterable[_T] | Callable[[], AsyncIterable[_T]],
    *,
    loop: asyncio.AbstractEventLoop | None = None,
    on_finish: FinishCallback | None = None,
) -> reactivex.Observable[_T]:
    """A cold observable that iterates an async iterable as a task on an event loop.

    Each subscription starts its own iteration (pass a zero-argument callable returning a fresh
    async iterable, e.g. an async generator function, to make re-subscription restart the
    source; a plain async iterable is iterated with ``aiter()`` on each subscription). Items,
    errors and completion are delivered on the event-loop thread. Disposing the subscription
    cancels the task, which closes the iterator.

    Args:
        ait: the async iterable, or a factory of them.
        loop: the loop to run on; default: the loop running in the subscribing thread (an error
            is sent to ``on_error`` when there is none).
        on_finish: called once per subscription before the terminal notification: ``eos`` when
            the iteration ends, ``error`` when it raises, ``cancelled`` on disposal.
    """

    def subscribe(
        observer: abc.ObserverBase[_T], _scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        target = _target_loop(loop)
        if isinstance(target, RuntimeError):
            if on_finish is not None:
                on_finish(Finish(FinishReason.ERROR, error=target))
            observer.on_error(target)
            return Disposable()
        return _AsyncIteration(ait, observer, target, FinishOnce(on_finish)).start()

    return reactivex.create(subscribe)


def _target_loop(loop: asyncio.AbstractEventLoop | None) -> asyncio.AbstractEventLoop | RuntimeError:
    """The loop a subscription runs on (``loop``, or the one running here), or why there is none."""
    target = loop
    if target is None:
        try:
            target = asyncio.get_running_loop()
        except RuntimeError:
            return RuntimeError(
                "from_async_iterable: no event loop given and none running in the subscribing thread"
            )
    if target.is_closed():
        return RuntimeError("from_async_iterable: the event loop is closed")
    return target


class _AsyncIteration(Generic[_T]):
    """One subscription of :func:`from_async_iterable`: the task that iterates on the loop."""

    __slots__ = ("_ait", "_disposed", "_observer", "_report", "_target", "_task")

    def __init__(
        self,
        ait: AsyncIterable[_T] | Callable[[], AsyncIterable[_T]],
        observer: abc.ObserverBase[_T],
        target: asyncio.AbstractEventLoop,
        report: FinishOnce,
    ) -> None:
        self._ait = ait
        self._observer = observer
        self._target = target
        self._report = report
        self._task: asyncio.Task[None] | None = None
        self._disposed = threading.Event()

    def start(self) -> abc.DisposableBase:
        """Start the task on the loop (now when called on it, else soon); return the disposable."""
        on_loop = False
        with contextlib.suppress(RuntimeError):
            on_loop = asyncio.get_running_loop() is self._target
        # The task is created on the loop itself (not with run_coroutine_threadsafe, whose
        # concurrent Future logs a RuntimeError when it is cancelled after the loop closed).
        if on_loop:
            self._create_task()
        else:
            try:
                self._target.call_soon_threadsafe(self._create_task)
            except RuntimeError as exc:  # the loop closed meanwhile
                err = RuntimeError(f"from_async_iterable: cannot run on the event loop: {exc}")
                if self._report(Finish(FinishReason.ERROR, error=err)):
                    self._observer.on_error(err)
                return Disposable()
        return Disposable(self.dispose)

    def _create_task(self) -> None:
        if self._disposed.is_set():
            return
        created = self._target.create_task(self._run())
        _TASKS.add(created)  # the loop holds tasks weakly: keep it until it is done
        created.add_done_callback(_TASKS.discard)
        self._task = created

    async def _run(self) -> None:
        observer = self._observer
        report = self._report
        source = self._ait() if callable(self._ait) else self._ait
        iterator = aiter(source)
        try:
            async for item in iterator:
                observer.on_next(item)
        except asyncio.CancelledError:
            report(Finish(FinishReason.CANCELLED))
            raise
        except Exception as exc:
            if report(Finish(FinishReason.ERROR, error=exc)):
                observer.on_error(exc)
            return
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
        if report(Finish(FinishReason.EOS)):
            observer.on_completed()

    def _cancel(self) -> None:
        task = self._task
        if task is not None:
            task.cancel()
            # the subscription is over: if the loop closes before the task has run its
            # cancellation, nothing is lost, so asyncio need not log it as destroyed pending; and
            # the loop's own references keep it alive until it has run
            task._log_destroy_pending = False  # type: ignore[attr-defined]
            _TASKS.discard(task)

    def dispose(self) -> None:
        self._disposed.set()
        self._report(Finish(FinishReason.CANCELLED))
        target = self._target
        if target.is_closed():
            return
        try:
            on_target = asyncio.get_running_loop() is target
        except RuntimeError:
            on_target = False
        if on_target:
            self._cancel()
        else:
            with contextlib.suppress(RuntimeError):  # closed meanwhile: nothing left to cancel
                target.call_soon_threadsafe(self._cancel)
