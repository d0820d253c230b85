"""The ``hold_back`` operator: pass text through, but hold what could still be a pattern."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from reactivex import Observable, abc

from rxstream._finish import FinishCallback
from rxstream.text import RegexStopRules, StopRules, make_replacer, stop_rules_any

from ._replace import ReplaceSink
from ._sink import OperatorSink, operator
from ._types import TextT

__all__ = ["hold_back"]


def hold_back(
    patterns: str | Iterable[Any] | StopRules | RegexStopRules | Any,
    *,
    on_finish: FinishCallback | None = None,
) -> Callable[[Observable[TextT]], Observable[TextT]]:
    """Pass text through unchanged, but never emit text that could still become a pattern.

    The output concatenates to the input exactly. Text is held only while it could still be
    (the start of) one of ``patterns``, and released the moment it cannot; a complete pattern
    is released as soon as no longer pattern can still complete at the same place. Use it in
    front of a consumer that must see a pattern in one piece (a UI that renders markup, say).

    Args:
        patterns: one pattern or several (non-empty ``str``, or regular expressions: a compiled
            ``re.Pattern`` / ``regex.Pattern`` or :func:`~rxstream.rx`; SEMANTICS §7), or patterns
            compiled once with :func:`rxstream.text.stop_rules_any` (not checked again).
        on_finish: as for :func:`replace`: ``eos``, ``cancelled`` or ``error``, with the token
            ids that entered but were not emitted in ``Finish.dropped`` (SEMANTICS §5).

    Marble diagram::

        source:   -a-b-c-|        a="Hi <", b="b", c="> there"
        operator: hold_back(["<b>", "</b>"])
        result:   -a---c-|        a="Hi ", c="<b> there"
    """
    rules = stop_rules_any(patterns, owner="hold_back", what="pattern").echo()

    def make_sink(observer: abc.ObserverBase[TextT]) -> OperatorSink[TextT, TextT]:
        return ReplaceSink("hold_back", observer, make_replacer(rules), on_finish)

    return operator("hold_back", make_sink)
