"""The ``max_tokens`` operator: a token budget for a stream of token ids."""

from __future__ import annotations

from collections.abc import Callable

from reactivex import Observable, abc
from reactivex.disposable import Disposable

from rxstream._finish import Finish, FinishCallback, FinishReason

from ._sink import OperatorSink, describe, operator
from ._token_ids import TokenItem, as_id_tuple, head

__all__ = ["max_tokens"]


def max_tokens(
    budget: int, *, on_finish: FinishCallback | None = None
) -> Callable[[Observable[TokenItem]], Observable[TokenItem]]:
    """Pass at most ``budget`` token ids, then complete and dispose the upstream.

    Counts ids, not items: a sequence item (several ids at once) is cut to fit the budget; a
    :class:`~rxstream.Piece` (ids with logprobs) keeps the data of the ids it keeps.

    Args:
        budget: how many ids may pass (an int >= 0; 0 completes at once).
        on_finish: called once with ``Finish(LENGTH)`` when the budget ends the stream (its
            ``dropped`` lists the ids of a sequence item cut to fit), ``eos`` when the source
            completed first, ``cancelled`` or ``error``.

    Raises:
        TypeError / ValueError: ``budget`` is not an int >= 0.

    Marble diagram::

        source:   -a-b-c-d-|      a=1, b=2, c=3, d=4
        operator: max_tokens(2)
        result:   -a-(b|)         a=1, b=2
        upstream: ^--!
    """
    if not isinstance(budget, int) or isinstance(budget, bool):
        raise TypeError(f"max_tokens: budget must be an int, got {describe(budget)}")
    if budget < 0:
        raise ValueError(f"max_tokens: budget must be >= 0, got {budget}")

    def make_sink(observer: abc.ObserverBase[TokenItem]) -> OperatorSink[TokenItem, TokenItem]:
        return _BudgetSink(observer, budget, on_finish)

    return operator("max_tokens", make_sink)


class _BudgetSink(OperatorSink[TokenItem, TokenItem]):
    __slots__ = ("left",)

    def __init__(
        self, observer: abc.ObserverBase[TokenItem], budget: int, on_finish: FinishCallback | None
    ) -> None:
        super().__init__("max_tokens", observer, on_finish)
        self.left = budget

    def run(self, source: Observable[TokenItem], scheduler: abc.SchedulerBase | None) -> abc.DisposableBase:
        if self.left == 0:
            self.end(Finish(FinishReason.LENGTH), dispose=False)
            return Disposable()
        return super().run(source, scheduler)

    def on_next(self, value: TokenItem) -> None:
        ids = as_id_tuple("max_tokens", value)
        if ids is None:
            self.left -= 1
            self.observer.on_next(value)
        else:
            if not ids:
                return
            if len(ids) > self.left:
                cut = ids[self.left :]
                value = head(value, ids, self.left)
                self.left = 0
                self.observer.on_next(value)
                self.end(Finish(FinishReason.LENGTH, dropped=cut))
                return
            self.left -= len(ids)
            self.observer.on_next(value)
        if self.left <= 0:
            self.end(Finish(FinishReason.LENGTH))
