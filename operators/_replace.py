"""The ``replace`` operator: streaming find/replace of many patterns at once (SEMANTICS §2)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reactivex import Observable, abc

from rxstream._finish import Finish, FinishCallback, FinishReason
from rxstream.text import (
    RegexReplacer,
    RegexReplaceRules,
    Replacer,
    ReplaceRules,
    Rules,
    make_replacer,
    replace_rules_any,
)

from ._sink import OperatorSink, operator
from ._text_sink import TextItem, TextSink
from ._types import TextT

__all__ = ["ReplaceSink", "replace"]


def replace(
    rules: Rules | ReplaceRules | RegexReplaceRules | Any, *, on_finish: FinishCallback | None = None
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
            non-empty ``str`` or regular expressions (a compiled ``re.Pattern`` /
            ``regex.Pattern``, or :func:`~rxstream.rx` with options), in one leftmost-longest
            order across all rules (then the first rule in the list; SEMANTICS §7); if a pattern
            is given twice its first rule wins. A replacement is a ``str`` (for a regular
            expression a template: ``\1``, ``\g<name>``, expanded from the rule's own match of
            the decided span) or a callable ``match -> str``. Or rules compiled once with
            :func:`rxstream.text.replace_rules_any` (not checked again).
        on_finish: called once per subscription, before the terminal notification, with a
            :class:`~rxstream.Finish`: ``eos`` when the source completed, ``cancelled`` when the
            subscriber disposed first, ``error``. With :class:`~rxstream.Piece` items,
            ``Finish.dropped`` lists the token ids that entered but were not emitted (held here or
            in a linked stage above when the stream ended early; SEMANTICS §5).

    Items may be ``str`` or :class:`~rxstream.Piece`; pieces come out carrying exactly the token
    ids whose text they complete (SEMANTICS §5).

    Raises:
        ValueError: a pattern is empty, or a regular expression is invalid or unsupported.
        TypeError: a rule is not a pattern and a replacement.

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
    compiled = replace_rules_any(rules, owner="replace")

    def make_sink(observer: abc.ObserverBase[TextT]) -> OperatorSink[TextT, TextT]:
        return ReplaceSink("replace", observer, make_replacer(compiled), on_finish)

    return operator("replace", make_sink)


class ReplaceSink(TextSink[TextItem]):
    """Shared by ``replace`` and ``hold_back``: a :class:`~rxstream.Replacer` behind a text sink."""

    __slots__ = ("engine",)

    def __init__(
        self,
        name: str,
        observer: abc.ObserverBase[TextItem],
        engine: Replacer | RegexReplacer,
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
