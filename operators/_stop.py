"""The ``stop`` operator: end a text stream before the first stop string (SEMANTICS §3)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from reactivex import Observable, abc

from rxstream._finish import Finish, FinishCallback, FinishReason
from rxstream.text import (
    RegexStopMatcher,
    RegexStopRules,
    StopMatcher,
    StopRules,
    make_stop_matcher,
    stop_rules_any,
)

from ._sink import OperatorSink, attribute_probe, describe, operator
from ._text_sink import TextItem, TextSink
from ._types import TextT

__all__ = ["stop"]


def stop(
    stop_strings: str | Iterable[Any] | StopRules | RegexStopRules | Any,
    include_stop: bool = False,
    *,
    prompt: str = "",
    skip_initial: bool = False,
    on_finish: FinishCallback | None = None,
) -> Callable[[Observable[TextT]], Observable[TextT]]:
    r"""End the stream before the first stop string, and cancel the generation upstream.

    The stop point is the **earliest start** of any stop string (the longest one if several
    start there). Text that can no longer be part of a stop string goes out at once; the rest
    is held. As soon as the stop is certain (no earlier or longer stop string can still
    appear), the operator emits the rest of the text, completes, and disposes its upstream
    subscription in that same instant, so a generator upstream stops within one token.

    Args:
        stop_strings: one stop string or several (non-empty ``str``), beside (or instead of)
            regular expressions (a compiled ``re.Pattern`` / ``regex.Pattern``, or
            :func:`~rxstream.rx` with options): the stop is then the leftmost-longest match of
            all rules (the first rule in the list on a tie; SEMANTICS §7), reported in
            ``Finish.stop`` as the string, or a :class:`~rxstream.RegexStop` for a regular
            expression. Or rules compiled once with :func:`rxstream.text.stop_rules_any`.
        include_stop: keep the matched stop string at the end of the output. Then text is held
            only while an already-matched stop could still grow (or an earlier one appear).
        prompt: text that comes before the stream (context, never emitted). A stop string
            lying wholly inside it does not fire; one that begins in it and ends in the stream
            does.
        skip_initial: treat the first non-empty item as text that was already there (a first
            cumulative snapshot that repeats the prompt, say): it is emitted, but stop strings
            lying wholly inside it do not fire.
        on_finish: called once per subscription, before the terminal notification, with a
            :class:`~rxstream.Finish`: ``stop`` and the matched string; ``eos`` when the source
            completed without one; ``cancelled`` when the subscriber disposed first; ``error``.
            With :class:`~rxstream.Piece` items, ``Finish.dropped`` lists the token ids whose
            text the stop cut off, and those still held upstream, in linked rxstream stages
            (``replace``, ``hold_back``, ``detokenize``), when the stream ended (SEMANTICS §5).

    Marble diagram (the stop decides at frame 3 and disposes the source there)::

        source:   -a-b-c-d-|      a="Hi", b="!\nUs", c="er: x", d="more"
        operator: stop(["\nUser:"])
        result:   -a-b-|          a="Hi", b="!"
        upstream: ^----!

    A regular expression (``rx`` from :mod:`rxstream`) among the stop rules; ``Finish.stop`` is
    ``RegexStop(rule=..., text="\n  User:")``::

        source:   -a-b-c-d-|      a="Hi", b="!\n ", c=" User: x", d="more"
        operator: stop(["\n\nUser:", rx(r"\n\s*(?:User|Human):")])
        result:   -a-b-|          a="Hi", b="!"
        upstream: ^----!

    With ``include_stop=True``::

        source:   -a-b-c-|        a="ab<", b="end>cd", c="ef"
        operator: stop("<end>", include_stop=True)
        result:   -a-(b|)         a="ab<", b="end>"
        upstream: ^--!
    """
    rules = stop_rules_any(stop_strings, owner="stop")
    if not isinstance(prompt, str):
        raise TypeError(f"stop: prompt must be a str, got {describe(prompt)}")
    include = bool(include_stop)

    def make_sink(observer: abc.ObserverBase[TextT]) -> OperatorSink[TextT, TextT]:
        matcher = make_stop_matcher(rules, include, prompt=prompt, skip_initial=skip_initial)
        return _StopSink(observer, matcher, on_finish)

    return operator("stop", make_sink)


class _StopSink(TextSink[TextItem]):
    __slots__ = ("matcher",)

    def __init__(
        self,
        observer: abc.ObserverBase[TextItem],
        matcher: StopMatcher | RegexStopMatcher,
        on_finish: FinishCallback | None,
    ) -> None:
        super().__init__("stop", observer, matcher.feed, on_finish)
        self.matcher = matcher

    def position(self) -> int:
        return self.matcher.emitted

    def holding(self) -> bool:
        return self.matcher.holding

    def holding_probe(self) -> Callable[[], bool]:
        matcher = self.matcher  # what is truthy exactly while it holds text: read without a call
        return attribute_probe(
            matcher, "holding", "_held_len" if isinstance(matcher, StopMatcher) else "_pending"
        )

    checks_end = True

    def check_end(self) -> None:
        if self.matcher.stopped:
            self._stopped()

    def on_completed(self) -> None:
        matcher = self.matcher
        out = matcher.flush()
        if not matcher.stopped:
            self.emit_rest(out)
            self.end(Finish(FinishReason.EOS), dispose=False)
            return
        if out:
            self.emit_out(out, matcher.emitted)
        self._stopped()

    def _stopped(self) -> None:
        if self.aligner is not None:
            # tokens whose (empty) text lies before the cut still belong to the output
            due = self.aligner.take(self.matcher.emitted)
            if due.size:
                self.emit_piece(due)
        # report() adds the ids cut off here and those held by linked stages above
        self.end(Finish(FinishReason.STOP, stop=self.matcher.stop_string))
