"""Text normalization for the parity kit: :class:`MergeText` joins adjacent text events of one kind,
and the prefix test the retraction check uses."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["TOKEN_FIELDS", "MergeText", "merge_text"]


@dataclass(frozen=True)
class _View:
    """A text event taken apart: events of equal ``kind`` merge by joining their ``parts``."""

    kind: Any
    parts: tuple[Any, ...]
    rebuild: Callable[[tuple[Any, ...]], Any]


TOKEN_FIELDS = ("ids", "logprobs", "top_logprobs", "tokens")
"""The per-token fields :class:`MergeText` joins with the text by default."""


class MergeText:
    """The default ``normalize``: joins adjacent text events of the same kind and drops empty ones.

    Text events are ``str`` and ``bytes`` (one kind each); a ``(kind, text)`` pair; and a record
    -- a mapping, a dataclass (:class:`rxstream.Piece`) or a named tuple
    (:class:`rxstream.channels.Segment`) -- whose ``text_key`` holds a ``str``/``bytes``: its
    kind is its type and every other item, except the ``join`` ones (token ``ids``,
    ``logprobs``, ``top_logprobs``, ``tokens``), which are joined with the text. So ``{"type":
    "chunk", "field": "thinking", "text": ...}`` merges with the next chunk of the same field.
    Every other event is kept as it is and separates the text around it.

    >>> merge_text()(["a", "b", ("think", "c"), ("think", "d"), "", {"type": "close"}, "e"])
    ['ab', ('think', 'cd'), {'type': 'close'}, 'e']
    """

    def __init__(
        self, text_key: str = "text", *, join: Iterable[str] = TOKEN_FIELDS, drop_empty: bool = True
    ) -> None:
        self.text_key = text_key
        self.join = tuple(join)
        self.drop_empty = drop_empty

    def __repr__(self) -> str:
        return f"merge_text({self.text_key!r}, join={self.join!r}, drop_empty={self.drop_empty})"

    def view(self, event: Any) -> _View | None:
        """The text view of ``event``, or None when it is not a text event."""
        if isinstance(event, str):
            return _View(str, (event,), lambda p: p[0])
        if isinstance(event, bytes):
            return _View(bytes, (event,), lambda p: p[0])
        if type(event) is tuple and len(event) == 2 and isinstance(event[1], (str, bytes)):
            return _View(("pair", event[0], type(event[1])), (event[1],), lambda p: (event[0], p[0]))
        if isinstance(event, Mapping):
            return self._record(event, list(event), event.get, lambda changes: {**event, **changes})
        if dataclasses.is_dataclass(event) and not isinstance(event, type):
            names = [f.name for f in dataclasses.fields(event)]
            return self._record(
                event,
                names,
                lambda n: getattr(event, n),
                lambda changes: dataclasses.replace(event, **changes),
            )
        if isinstance(event, tuple) and hasattr(event, "_fields") and hasattr(event, "_replace"):
            return self._record(
                event, list(event._fields), lambda n: getattr(event, n), lambda c: event._replace(**c)
            )
        return None

    def _record(
        self,
        event: Any,
        names: list[Any],
        get: Callable[[Any], Any],
        replace: Callable[[dict[str, Any]], Any],
    ) -> _View | None:
        key = self.text_key
        text = get(key) if key in names else None
        if not isinstance(text, (str, bytes)):
            return None
        joined = [n for n in self.join if n in names and isinstance(get(n), (tuple, list, type(None)))]
        absent = tuple(get(n) is None for n in joined)
        others = tuple((n, get(n)) for n in names if n != key and n not in joined)
        parts = (text, *(tuple(get(n) or ()) for n in joined))

        def rebuild(p: tuple[Any, ...]) -> Any:
            changes: dict[str, Any] = {key: p[0]}
            for name, none, part in zip(joined, absent, p[1:], strict=True):
                changes[name] = None if none else tuple(part)
            return replace(changes)

        return _View((type(event), type(text), absent, others), parts, rebuild)

    def __call__(self, events: Iterable[Any]) -> list[Any]:
        merger = _Merger(self)
        out = merger.push(events)
        last = merger.pending()
        return out if last is None else [*out, last]

    def is_partial(self, part: Any, whole: Any) -> bool:
        """Whether text event ``part`` is the start of text event ``whole`` (same kind; every part
        of its text, ids... a prefix of ``whole``'s)."""
        a, b = self.view(part), self.view(whole)
        if a is None or b is None or a.kind != b.kind:
            return False
        return all(len(x) <= len(y) and y[: len(x)] == x for x, y in zip(a.parts, b.parts, strict=True))


class _Merger:
    """:class:`MergeText` one batch of events at a time: :meth:`push` returns the items no later
    event can change, :meth:`pending` the text item still open (or None)."""

    def __init__(self, merge: MergeText) -> None:
        self.merge = merge
        self.view: _View | None = None
        self.pieces: list[list[Any]] = []

    def push(self, events: Iterable[Any]) -> list[Any]:
        out: list[Any] = []
        for event in events:
            view = self.merge.view(event)
            if view is not None and self.view is not None and view.kind == self.view.kind:
                for acc, part in zip(self.pieces, view.parts, strict=True):
                    acc.append(part)
                continue
            last = self.pending()
            if last is not None:
                out.append(last)
            if view is None:
                self.view, self.pieces = None, []
                out.append(event)
            else:
                self.view, self.pieces = view, [[p] for p in view.parts]
        return out

    def pending(self) -> Any:
        if self.view is None:
            return None
        parts = tuple(_join(p) for p in self.pieces)
        if self.merge.drop_empty and not any(len(p) for p in parts):
            return None
        return self.view.rebuild(parts)


def _join(parts: list[Any]) -> Any:
    first = parts[0]
    if isinstance(first, str):
        return "".join(parts)
    if isinstance(first, bytes):
        return b"".join(parts)
    return tuple(itertools.chain.from_iterable(parts))


def merge_text(
    text_key: str = "text", *, join: Iterable[str] = TOKEN_FIELDS, drop_empty: bool = True
) -> MergeText:
    """A ``normalize`` that joins adjacent text events of the same kind (see :class:`MergeText`):
    ``text_key`` is the key or field that holds a record's text, ``join`` those joined with it
    (sequences, or None in every event merged), ``drop_empty`` drops text events with no text
    (and nothing joined)."""
    return MergeText(text_key, join=join, drop_empty=drop_empty)


def _is_prefix(so_far: Any, final: Any, view: MergeText) -> bool:
    """Whether normalized events ``so_far`` can still become ``final`` by more events arriving."""
    if isinstance(final, str):
        return isinstance(so_far, str) and final.startswith(so_far)
    if isinstance(final, bytes):
        return isinstance(so_far, bytes) and final.startswith(so_far)
    if isinstance(final, (list, tuple)):
        if not isinstance(so_far, (list, tuple)) or len(so_far) > len(final):
            return False
        if not so_far:
            return True
        n = len(so_far) - 1
        if any(a != b for a, b in zip(so_far[:n], final[:n], strict=True)):
            return False
        return bool(so_far[n] == final[n]) or view.is_partial(so_far[n], final[n])
    raise TypeError(
        f"parity: the retraction check needs normalize to return a list, tuple, str or bytes, got "
        f"{type(final).__name__}; return one, or leave 'retraction' out of checks"
    )
