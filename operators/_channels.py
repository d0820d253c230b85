"""``channels``: one view per channel of a routed stream, sharing one upstream subscription."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal

from reactivex import Observable, abc
from reactivex.disposable import Disposable, SingleAssignmentDisposable

from rxstream._piece import Piece
from rxstream.channels import Segment

__all__ = ["Channels", "channels"]

_OnDispose = Literal["any", "all"]


class _View:
    __slots__ = ("as_segments", "channel", "observer")

    def __init__(self, channel: str, observer: abc.ObserverBase[Any], as_segments: bool) -> None:
        self.channel = channel
        self.observer = observer
        self.as_segments = as_segments


def _item(seg: Segment) -> str | Piece | None:
    if seg.ids is None:
        return seg.text if seg.event == "chunk" and seg.text else None
    if seg.event == "chunk":
        return Piece(seg.text, seg.ids, seg.logprobs, seg.top_logprobs, seg.tokens)
    # a delimiter's tokens travel in the view as a piece with no text (nothing is lost)
    if seg.ids or seg.tokens:
        return Piece("", seg.ids, seg.logprobs, seg.top_logprobs, seg.tokens)
    return None


class Channels:
    """Views of a routed stream, one per channel, over one upstream subscription.

    ``views[name]`` is the channel's text: ``str`` items for text input, :class:`~rxstream.Piece`
    items for aligned input (a delimiter's ids come as a piece with no text, so a ``stop`` or
    ``replace`` on the view still accounts for every id); ``views.segments(name)`` gives its
    :class:`~rxstream.channels.Segment` items instead.

    The upstream is subscribed once: by :meth:`connect`, or automatically when every channel
    named to :func:`channels` has a subscriber. Every view completes (or fails) with the
    upstream. A view disposed before the upstream ends: with ``on_dispose="any"`` (the default)
    the upstream is disposed at once (the generation is cancelled in that frame: a ``stop`` on
    the answer cancels it) and every other view completes; with ``"all"`` the other views go on,
    and the upstream is disposed when the last view is.
    """

    def __init__(self, source: Observable[Segment], names: tuple[str, ...], on_dispose: _OnDispose) -> None:
        self._source = source
        self._names = names
        self._on_dispose = on_dispose
        self._lock = threading.RLock()
        self._views: list[_View] = []
        self._connected = False
        self._ended: tuple[str, Exception | None] | None = None
        self._upstream = SingleAssignmentDisposable()

    def __getitem__(self, channel: str) -> Observable[Any]:
        return self._view(channel, as_segments=False)

    def segments(self, channel: str) -> Observable[Segment]:
        """The channel's :class:`~rxstream.channels.Segment` items (open, chunk, close, malformed)."""
        return self._view(channel, as_segments=True)

    def connect(self) -> abc.DisposableBase:
        """Subscribe to the upstream now (once); the disposable cancels it."""
        with self._lock:
            if self._connected:
                return self._upstream
            self._connected = True
        self._upstream.disposable = self._source.subscribe(self._on_next, self._on_error, self._on_completed)
        return self._upstream

    # -- views -----------------------------------------------------------------------------------
    def _view(self, channel: str, *, as_segments: bool) -> Observable[Any]:
        if not isinstance(channel, str):
            raise TypeError(f"channels: a channel name is a str, got {type(channel).__name__}")

        def subscribe(
            observer: abc.ObserverBase[Any], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            view = _View(channel, observer, as_segments)
            with self._lock:
                ended = self._ended
                if ended is None:
                    self._views.append(view)
                    ready = (
                        not self._connected
                        and bool(self._names)
                        and all(any(v.channel == n for v in self._views) for n in self._names)
                    )
                else:
                    ready = False
            if ended is not None:
                if ended[1] is not None:
                    observer.on_error(ended[1])
                else:
                    observer.on_completed()
                return Disposable()
            if ready:
                self.connect()
            return Disposable(lambda: self._leave(view))

        return Observable(subscribe)

    def _leave(self, view: _View) -> None:
        with self._lock:
            if view not in self._views:
                return
            self._views.remove(view)
            if self._ended is not None or not self._connected:
                return
            if self._on_dispose == "all" and self._views:
                return
            self._ended = ("cancelled", None)
            others = list(self._views)
            self._views.clear()
        self._upstream.dispose()
        for other in others:
            other.observer.on_completed()

    # -- upstream --------------------------------------------------------------------------------
    def _on_next(self, seg: Segment) -> None:
        with self._lock:
            targets = [v for v in self._views if v.channel == seg.channel]
        for view in targets:
            if view.as_segments:
                view.observer.on_next(seg)
            else:
                item = _item(seg)
                if item is not None:
                    view.observer.on_next(item)

    def _end(self, error: Exception | None) -> None:
        with self._lock:
            if self._ended is not None:
                return
            self._ended = ("error" if error else "completed", error)
            views = list(self._views)
            self._views.clear()
        for view in views:
            if error is not None:
                view.observer.on_error(error)
            else:
                view.observer.on_completed()

    def _on_error(self, error: Exception) -> None:
        self._end(error)

    def _on_completed(self) -> None:
        self._end(None)


def channels(*names: str, on_dispose: _OnDispose = "any") -> Callable[[Observable[Segment]], Channels]:
    """Split a routed stream (from :func:`route`) into per-channel views with one subscription.

    >>> import reactivex as rx
    >>> from reactivex import operators as ops
    >>> from rxstream.operators import route, channels, stop
    >>> views = rx.from_iterable(["<think>a. b.</think>", "Yes. No."]).pipe(
    ...     route({"reasoning": ("<think>", "</think>")}), channels("reasoning", "content")
    ... )
    >>> thoughts, answer = [], []
    >>> _ = views["reasoning"].subscribe(thoughts.append)
    >>> _ = views["content"].pipe(stop(".")).subscribe(answer.append)
    >>> thoughts, answer
    (['a. b.'], ['Yes'])

    Args:
        names: channels whose views must all be subscribed before the upstream is (then it
            connects by itself); with none, call :meth:`Channels.connect`.
        on_dispose: ``"any"`` -- a view disposed early (a ``stop`` on it fired, say) disposes
            the upstream and completes the others; ``"all"`` -- the upstream is disposed when
            the last view is (see :class:`Channels`).

    Marble diagram (a stop on the answer cancels the generation in the frame it decides)::

        source:   -a-b-c-d-e-|  a=Segment("reasoning", "chunk", "x. y"), b=Segment("content", "chunk", "Hi")
        ...                     c=Segment("content", "chunk", ". More"), d=Segment("content", "chunk", "!")
        ...                     e=Segment("reasoning", "chunk", "z")
        operator: lambda s: s.pipe(channels("content"))["content"].pipe(stop("."))
        result:   ---b-|      b="Hi"
        upstream: ^----!
    """
    if on_dispose not in ("any", "all"):
        raise ValueError(f"channels: on_dispose must be 'any' or 'all', got {on_dispose!r}")
    for name in names:
        if not isinstance(name, str) or not name:
            raise TypeError(f"channels: channel names are non-empty str, got {name!r}")

    def _split(source: Observable[Segment]) -> Channels:
        return Channels(source, tuple(names), on_dispose)

    return _split
