"""The ``replace`` operator: streaming find/replace of many patterns at once (SEMANTICS §2)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reactivex import Observable, abc

from rxstream._finish import Finish, FinishCallback, FinishReason
from rxstream.text import Replacer, ReplaceRules, Rules, replace_rules

from ._sink import OperatorSink, operator
from ._text_sink import TextSink
from ._types import TextT

__all__ = ["ReplaceSink", "replace"]


def replace(
    rules: Rules | ReplaceRules, *, on_finish: FinishCallback | None = None
) -> Callable[[Observable[TextT]], Observable[TextT]]:
    r"""Replace many patterns at once in a stream of text, emitting as early as possible.

    Scans left to right and at each position takes the **longest** pattern that occurs there
    (leftmost-longest, non-overlapping, one pass); replacement text is never rescanned. Text
    that cannot start a pattern goes out at once; text that could still become a pattern is
    held until it resolves, and a shorter match waits only while a longer pattern starting at
    the same place could still complete. Cost per character does not depend on the number of
    patterns (one shared automaton).

    Args:
        rules: ``{pattern: replacement}`` or ``(pattern, replacement)`` pairs. Patterns are
            non-empty ``str``; if a pattern is given twice its first rule wins. Or rules compiled
            once with :func:`rxstream.text.replace_rules` (not checked again).
        on_finish: called once per subscription, before the terminal notification, with a
            :class:`~rxstream.Finish`: ``eos`` when the source completed, ``cancelled`` when the
            subscriber disposed first, ``error``. With :class:`~rxstream.Piece` items,
            ``Finish.dropped`` lists the token ids that entered but were not emitted (held here or
            in a linked stage above when the stream ended early; SEMANTICS §5).

    Items may be ``str`` or :class:`~rxstream.Piece`; pieces come out carrying exactly the token
    ids whose text they complete (SEMANTICS §5).

    Raises:
        ValueError: a pattern is empty. TypeError: a rule is not a pair of ``str``.

    A non-text item is sent to ``on_error`` as a ``TypeError`` naming the operator and the item.

    Marble diagram (``"<NL>"`` arrives split over three chunks)::

        source:   -a-b-c-d-|        a="He", b="llo!<", c="N", d="L>my"
        operator: replace({"<NL>": "\n"})
        result:   -a-b---d-|        a="He", b="llo!", d="\nmy"

    The longer pattern wins, and waits while it could still complete ("<|" matched, but
    "<|>" was still possible until "x" came)::

        source:   -a-b-c-|          a="<", b="|", c="x"
        operator: replace({"<": "&lt;", "<|": "[", "<|>": "[]"})
        result:   -----a-|          a="[x"
    """
    compiled = replace_rules(rules, owner="replace")

    def make_sink(observer: abc.ObserverBase[Any]) -> OperatorSink[Any, Any]:
        return ReplaceSink("replace", observer, Replacer(compiled), on_finish)

    return operator("replace", make_sink)


class ReplaceSink(TextSink):
    """Shared by ``replace`` and ``hold_back``: a :class:`~rxstream.Replacer` behind a text sink."""

    __slots__ = ("engine",)

    def __init__(
        self,
        name: str,
        observer: abc.ObserverBase[Any],
        engine: Replacer,
        on_finish: FinishCallback | None = None,
    ) -> None:
        super().__init__(name, observer, engine.feed, on_finish)
        self.engine = engine

    def position(self) -> int:
        return self.engine.resolved

    def holding(self) -> bool:
        return bool(self.engine.held)

    def on_completed(self) -> None:
        self.emit_rest(self.engine.flush())
        self.end(Finish(FinishReason.EOS), dispose=False)
