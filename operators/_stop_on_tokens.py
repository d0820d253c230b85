"""The ``stop_on_tokens`` operator: end a token-id stream at a stop token id or id sequence."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from operator import index as operator_index
from typing import SupportsIndex, cast, overload

from reactivex import Observable, abc

from rxstream._finish import Finish, FinishCallback, FinishReason
from rxstream._piece import Piece

from ._sink import OperatorSink, describe, operator
from ._token_ids import TokenItem, as_id_tuple

__all__ = ["stop_on_tokens"]


def stop_on_tokens(
    token_ids: int | Iterable[int | Sequence[int]],
    include_stop: bool = False,
    *,
    on_finish: FinishCallback | None = None,
) -> Callable[[Observable[TokenItem]], Observable[TokenItem]]:
    """End a stream of token ids at the first stop token id or stop id sequence, and dispose the
    upstream.

    Works on the ids, before detokenization, so a stop token never reaches the text. Items may
    be single ids or sequences of ids (several tokens at once); a sequence is cut at the stop.

    A stop may be one id (``7``) or a sequence of ids (``[2318, 310, 2305]``, as vLLM's
    multi-token stop ids): ``stop_on_tokens([[2318, 310, 2305], 7])``. As for stop strings, the
    cut is at the earliest start of a stop in the ids, the longest if several start there
    (SEMANTICS §3): with the stops ``[[1, 2, 3, 4], [2, 3]]`` the ids 1, 2, 3 wait, since the stop
    starting at 1 may still complete; then 4 cuts before 1, anything else before 2. An id goes out
    as soon as no stop can still start at or before it and complete, so ids that could be the
    start of a stop sequence are held back until it is ruled out (or the source completes). The
    stream ends, disposing the upstream, on the id that makes the cut certain: a stop is complete
    and no partial match that starts at or before it is still live. The output is the same
    however the input is chunked.

    Args:
        token_ids: the stops: ids (ints >= 0) and non-empty sequences of ids.
        include_stop: also emit the stop: the stop id, or the whole stop sequence (then only
            ids after a completed stop that may still be undercut are held back).
        on_finish: called once with ``Finish(STOP, stop=<id>)`` (for a sequence, the tuple of its ids; its
            ``dropped`` lists the ids received after the stop), also when the source completes
            while a completed stop waits, or ``eos`` when it completed without one,
            ``cancelled`` or ``error`` (then the ids held back are in ``dropped``).

    Marble diagram (ids 5, 6, then the stop id 2)::

        source:   -a-b-c-d-|      a=5, b=6, c=2, d=7
        operator: stop_on_tokens([2])
        result:   -a-b-|          a=5, b=6
        upstream: ^----!

    Marble diagram (the stop sequence 2, 3, 4: the first 2, 3 is held until 7 rules it out)::

        source:   -a-b-c-d-e-f-g-h-|      a=5, b=2, c=3, d=7, e=2, f=3, g=4, h=8
        operator: stop_on_tokens([[2, 3, 4]])
        result:   -a-----(bcd)-----|      a=5, b=2, c=3, d=7
        upstream: ^------------!
    """
    stops = _normalize_stops(token_ids)
    automaton = _Automaton(stops)
    include = bool(include_stop)

    def make_sink(observer: abc.ObserverBase[TokenItem]) -> OperatorSink[TokenItem, TokenItem]:
        return _StopTokensSink(observer, automaton, include, on_finish)

    return operator("stop_on_tokens", make_sink)


def _check_id(i: object, where: str) -> int:
    if not isinstance(i, int) or isinstance(i, bool):
        raise TypeError(f"stop_on_tokens: token ids must be int, got {describe(i)} ({where})")
    if i < 0:
        raise ValueError(f"stop_on_tokens: token ids must be >= 0, got {i} ({where})")
    return i


def _normalize_stops(token_ids: object) -> tuple[tuple[int, ...], ...]:
    """The stops given at construction, each as a tuple of ids (duplicates removed, in order)."""
    if isinstance(token_ids, int) and not isinstance(token_ids, bool):
        return ((_check_id(token_ids, "token_ids"),),)
    if isinstance(token_ids, (str, bytes, bool)) or not isinstance(token_ids, Iterable):
        raise TypeError(
            f"stop_on_tokens: token_ids must be an int or an iterable of ids and id sequences, "
            f"got {describe(token_ids)}"
        )
    out: dict[tuple[int, ...], None] = {}
    for n, stop in enumerate(token_ids):
        where = f"token_ids[{n}]"
        if isinstance(stop, int) and not isinstance(stop, bool):
            out[(_check_id(stop, where),)] = None
            continue
        if isinstance(stop, (str, bytes)) or not isinstance(stop, Sequence):
            raise TypeError(
                f"stop_on_tokens: token ids must be int, or a sequence of ints for a multi-token "
                f"stop, got {describe(stop)} ({where})"
            )
        if not stop:
            raise ValueError(f"stop_on_tokens: a stop id sequence must be non-empty ({where})")
        out[tuple(_check_id(i, f"{where}[{k}]") for k, i in enumerate(stop))] = None
    return tuple(out)


class _Automaton:
    """Aho-Corasick automaton over the stop id sequences (built in time linear in their total
    length). State 0 is the root; ``depth[s]`` is the length of the ids state ``s`` stands for;
    ``found[s]`` is the longest stop that is a suffix of them (None: none), and ``live[s]`` the
    length of the longest suffix of them that is a proper prefix of some stop (0: none), the
    earliest partial match that may still complete."""

    __slots__ = ("children", "depth", "fail", "found", "live", "singles")

    def __init__(self, stops: tuple[tuple[int, ...], ...]) -> None:
        children: list[dict[int, int]] = [{}]
        depth = [0]
        terminal: list[tuple[int, ...] | None] = [None]
        for stop in stops:
            s = 0
            for i in stop:
                nxt = children[s].get(i)
                if nxt is None:
                    nxt = len(children)
                    children[s][i] = nxt
                    children.append({})
                    depth.append(depth[s] + 1)
                    terminal.append(None)
                s = nxt
            terminal[s] = stop
        self.children = children
        self.depth = depth
        self.fail = fail = [0] * len(children)
        found = terminal[:]
        live = [depth[s] if children[s] else 0 for s in range(len(children))]
        queue = deque(children[0].values())
        while queue:  # breadth first: a state's fail link is shallower, so already complete
            u = queue.popleft()
            for i, c in children[u].items():
                f = self.step(fail[u], i) if u else 0
                fail[c] = f
                if found[c] is None:
                    found[c] = found[f]
                if not live[c]:
                    live[c] = live[f]
                queue.append(c)
        self.found = found
        self.live = live
        # every stop one id long: a plain set lookup per id
        self.singles = frozenset(children[0]) if all(len(s) == 1 for s in stops) else None

    def step(self, s: int, i: int) -> int:
        """The state after id ``i`` from state ``s`` (amortized O(1); at worst the depth of ``s``)."""
        children = self.children
        while s and i not in children[s]:
            s = self.fail[s]
        return children[s].get(i, 0)


def _reported(stop: tuple[int, ...]) -> int | tuple[int, ...]:
    """What ``Finish.stop`` carries for a stop: the id of a one-id stop, else the sequence."""
    return stop[0] if len(stop) == 1 else stop


@overload
def _part(item: Piece, ids: tuple[int, ...] | None, start: int, stop: int) -> Piece: ...
@overload
def _part(item: TokenItem, ids: tuple[int, ...] | None, start: int, stop: int) -> TokenItem: ...
def _part(item: TokenItem | Piece, ids: tuple[int, ...] | None, start: int, stop: int) -> TokenItem | Piece:
    """The ids ``start:stop`` of an item, in the item's own kind (the item itself when whole; a
    :class:`~rxstream.Piece` keeps the per-token data of those ids)."""
    if ids is None or (start == 0 and stop >= len(ids)):
        return item
    if isinstance(item, Piece):
        return item.tokens_slice(start, stop)
    if isinstance(item, list):
        return list(ids[start:stop])
    return ids[start:stop]


def _one(item: TokenItem) -> int:
    """A single-id item (an int or an integer scalar such as ``numpy.int64``) as an int."""
    return operator_index(cast(SupportsIndex, item))


class _StopTokensSink(OperatorSink[TokenItem, TokenItem]):
    __slots__ = ("auto", "emitted", "held", "include", "match", "match_at", "seen", "state")

    def __init__(
        self,
        observer: abc.ObserverBase[TokenItem],
        automaton: _Automaton,
        include: bool,
        on_finish: FinishCallback | None,
    ) -> None:
        super().__init__("stop_on_tokens", observer, on_finish)
        self.auto = automaton
        self.include = include
        self.state = 0
        self.seen = 0  # ids received
        self.emitted = 0  # ids emitted (the rest of those received are held)
        # the ids received but not emitted: (item, its ids or None for one id, first held)
        self.held: deque[tuple[TokenItem, tuple[int, ...] | None, int]] = deque()
        # the completed stop that starts earliest (the longest there), and where it starts
        self.match: tuple[int, ...] | None = None
        self.match_at = 0

    def on_next(self, value: TokenItem) -> None:
        ids = as_id_tuple("stop_on_tokens", value)
        auto = self.auto
        singles = auto.singles
        if singles is not None:  # no sequences: nothing is ever held
            self._next_singles(value, ids, singles)
            return
        seq = (_one(value),) if ids is None else ids
        step, found, live = auto.step, auto.found, auto.live
        s, n, match, match_at = self.state, self.seen, self.match, self.match_at
        for token in seq:
            s = step(s, token)
            n += 1
            stop = found[s]
            if stop is not None:
                at = n - len(stop)  # the longest stop ending here: the earliest start here
                if match is None or at < match_at or (at == match_at and len(stop) > len(match)):
                    match, match_at = stop, at
            if match is not None:
                partial = live[s]
                if not partial or n - partial > match_at:  # no live partial match starts earlier
                    self.seen = n
                    self._cut(match, match_at, value, ids)
                    return
        self.state, self.seen, self.match, self.match_at = s, n, match, match_at
        if self.include:
            safe = n if match is None else match_at + len(match)
        else:
            safe = n - live[s]  # a live partial match starts there; a completed one after it
        self._advance(safe, value, ids)

    def _next_singles(self, value: TokenItem, ids: tuple[int, ...] | None, singles: frozenset[int]) -> None:
        if ids is None:
            if value in singles:
                if self.include:
                    self.observer.on_next(value)
                self.end(Finish(FinishReason.STOP, stop=int(value)))
            else:
                self.observer.on_next(value)
            return
        for k, token in enumerate(ids):
            if token in singles:
                keep = k + 1 if self.include else k
                if keep:
                    self.observer.on_next(_part(value, ids, 0, keep))
                self.end(Finish(FinishReason.STOP, stop=token, dropped=ids[k + 1 :]))
                return
        if ids:
            self.observer.on_next(value)

    def _advance(self, upto: int, value: TokenItem, ids: tuple[int, ...] | None) -> None:
        """Emit the ids before stream position ``upto`` (held ones first, then ``value``'s) and
        hold the rest of ``value``."""
        n = upto - self.emitted
        self.emitted = max(upto, self.emitted)
        held = self.held
        while n > 0 and held:
            item, item_ids, start = held[0]
            length = 1 if item_ids is None else len(item_ids)
            take = min(n, length - start)
            self.observer.on_next(_part(item, item_ids, start, start + take))
            n -= take
            if start + take == length:
                held.popleft()
            else:
                held[0] = (item, item_ids, start + take)
        size = 1 if ids is None else len(ids)
        first = 0
        if n > 0:
            first = min(n, size)
            self.observer.on_next(_part(value, ids, 0, first))
        if first < size:
            held.append((value, ids, first))

    def _cut(
        self,
        match: tuple[int, ...],
        at: int,
        value: TokenItem,
        ids: tuple[int, ...] | None,
        *,
        dispose: bool = True,
    ) -> None:
        """End at the stop ``match`` that starts at stream position ``at``: emit what comes
        before it (and it, with ``include_stop``); the ids received after it are dropped."""
        self._advance(at + len(match) if self.include else at, value, ids)
        after = self.take_held()[0 if self.include else len(match) :]
        self.end(Finish(FinishReason.STOP, stop=_reported(match), dropped=after), dispose=dispose)

    def take_held(self) -> tuple[int, ...]:
        out: list[int] = []
        for item, ids, start in self.held:
            if ids is None:
                out.append(_one(item))
            else:
                out.extend(ids[start:])
        self.held.clear()
        return tuple(out)

    def on_completed(self) -> None:
        # the source ended: no partial match can complete any more
        if self.match is not None:
            self._cut(self.match, self.match_at, (), (), dispose=False)
            return
        self._advance(self.seen, (), ())
        self.end(Finish(FinishReason.EOS), dispose=False)
