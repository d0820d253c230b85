"""Sinks: run a text stream to its end from ordinary (blocking) code."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from reactivex import Observable

__all__ = ["run_text"]


def run_text(
    stream: Observable[Any], *, on_text: Callable[[str], None] | None = None, timeout: float | None = None
) -> str:
    """Subscribe to a stream of text (``str`` or :class:`~rxstream.Piece` items), wait for its end,
    and return the whole text.

    ``on_text`` is called with each item's text as it arrives (print it to show the answer
    live). If the stream fails, its error is raised here. If ``timeout`` seconds pass, or the
    waiting thread is interrupted (Ctrl-C), the subscription is disposed -- which cancels the
    generation upstream -- and ``TimeoutError`` / ``KeyboardInterrupt`` is raised.
    """
    parts: list[str] = []
    done = threading.Event()
    failure: list[BaseException] = []

    def on_next(item: Any) -> None:
        text = item if isinstance(item, str) else getattr(item, "text", None)
        if not isinstance(text, str):
            raise TypeError(f"run_text: expected str or Piece items, got {type(item).__name__}: {item!r}")
        if text:
            parts.append(text)
            if on_text is not None:
                on_text(text)

    def on_error(exc: Exception) -> None:
        failure.append(exc)
        done.set()

    subscription = stream.subscribe(on_next, on_error, done.set)
    try:
        if not done.wait(timeout):
            raise TimeoutError(f"run_text: the stream did not end within {timeout} s")
    finally:
        if not done.is_set():
            subscription.dispose()
    if failure:
        raise failure[0]
    return "".join(parts)
