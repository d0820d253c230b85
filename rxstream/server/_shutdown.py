"""The server's stop cutting its generations: :class:`ServerShutdown` and :func:`cut_at_shutdown`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import reactivex
from reactivex import operators as ops

from .._finish import Finish, FinishReason

__all__ = ["ServerShutdown", "cut_at_shutdown"]


class ServerShutdown(RuntimeError):
    """The server was stopped (Ctrl-C, SIGTERM) while the generation ran: it was cut there.

    A stream ends with the API's error event for it (a 503, ``code`` ``server_shutdown``: the
    answer is incomplete and the request may be retried elsewhere), never as a finished answer.
    """

    code = "server_shutdown"

    def __init__(self) -> None:
        super().__init__("the server is shutting down: the generation was cut before its end")


def cut_at_shutdown(
    ids: reactivex.Observable[Any],
    until: reactivex.Observable[Any],
    on_finish: Callable[[Finish], None] | None,
) -> reactivex.Observable[Any]:
    """``ids`` (token ids or text) until ``until`` emits; then they fail with
    :class:`ServerShutdown` (reported to ``on_finish`` first, as the cause), so the response
    ends with the API's error, never as a finished answer."""

    def stream() -> reactivex.Observable[Any]:
        cut: list[ServerShutdown] = []

        def shutdown(_: Any) -> None:
            cut.append(ServerShutdown())
            if on_finish is not None:
                on_finish(Finish(FinishReason.ERROR, error=cut[0]))

        def after() -> reactivex.Observable[Any]:
            return reactivex.throw(cut[0]) if cut else reactivex.empty()

        stopped = until.pipe(ops.take(1), ops.do_action(on_next=shutdown))
        return ids.pipe(ops.take_until(stopped), ops.concat(reactivex.defer(lambda _: after())))

    return reactivex.defer(lambda _: stream())
