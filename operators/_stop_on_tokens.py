"""The ``stop_on_tokens`` operator: end a token-id stream at a stop token id."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from reactivex import Observable, abc

from rxstream._finish import Finish, FinishCallback, FinishReason

from ._sink import OperatorSink, operator
from ._token_ids import TokenItem, as_id_tuple, head, normalize_ids

__all__ = ["stop_on_tokens"]


def stop_on_tokens(
    token_ids: int | Iterable[int], include_stop: bool = False, *, on_finish: FinishCallback | None = None
) -> Callable[[Observable[TokenItem]], Observable[TokenItem]]:
    """End a stream of token ids at the first stop token id, and dispose the upstream.

    Works on the ids, before detokenization, so a stop token never reaches the text. Items may
    be single ids or sequences of ids (several tokens at once); a sequence is cut at the stop id.

    Args:
        token_ids: the stop token id(s) (ints >= 0).
        include_stop: also emit the stop id itself.
        on_finish: called once with ``Finish(STOP, stop=<id>)`` (its ``dropped`` lists the ids
            that came after the stop id in the same sequence item), or ``eos`` when the source
            completed without one, ``cancelled`` or ``error``.

    Marble diagram (ids 5, 6, then the stop id 2)::

        source:   -a-b-c-d-|      a=5, b=6, c=2, d=7
        operator: stop_on_tokens([2])
        result:   -a-b-|          a=5, b=6
        upstream: ^----!
    """
    stops = normalize_ids(token_ids, "stop_on_tokens")
    include = bool(include_stop)

    def make_sink(observer: abc.ObserverBase[TokenItem]) -> OperatorSink[TokenItem, TokenItem]:
        return _StopTokensSink(observer, stops, include, on_finish)

    return operator("stop_on_tokens", make_sink)


class _StopTokensSink(OperatorSink[TokenItem, TokenItem]):
    __slots__ = ("include", "stops")

    def __init__(
        self,
        observer: abc.ObserverBase[TokenItem],
        stops: frozenset[int],
        include: bool,
        on_finish: FinishCallback | None,
    ) -> None:
        super().__init__("stop_on_tokens", observer, on_finish)
        self.stops = stops
        self.include = include

    def on_next(self, value: TokenItem) -> None:
        ids = as_id_tuple("stop_on_tokens", value)
        if ids is None:
            if value in self.stops:
                if self.include:
                    self.observer.on_next(value)
                self.end(Finish(FinishReason.STOP, stop=int(value)))
            else:
                self.observer.on_next(value)
            return
        for k, token in enumerate(ids):
            if token in self.stops:
                keep = k + 1 if self.include else k
                if keep:
                    self.observer.on_next(head(value, ids, keep))
                self.end(Finish(FinishReason.STOP, stop=token, dropped=ids[k + 1 :]))
                return
        if ids:
            self.observer.on_next(value)
