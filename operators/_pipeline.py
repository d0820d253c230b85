"""The ``text_pipeline`` operator: token ids to shown text, ``detokenize -> stop -> replace``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, TypeAlias, TypeVar

import reactivex as rx
from reactivex import Observable, abc

from rxstream._finish import Finish, FinishCallback, FinishReason
from rxstream.text import (
    RegexReplaceRules,
    RegexStopRules,
    ReplaceRules,
    Rules,
    StopRules,
    replace_rules_any,
    stop_rules_any,
)

from ._detokenize import detokenize
from ._replace import replace as _replace
from ._sink import OperatorSink, operator
from ._stop import stop as _stop
from ._token_ids import TokenItem

__all__ = ["text_pipeline"]

_T = TypeVar("_T")
_Stage: TypeAlias = Callable[[Observable[Any]], Observable[Any]]
"""One stage of the pipeline (token ids to text, then text to text)."""


def text_pipeline(
    tokenizer: object,
    *,
    prompt_ids: Iterable[int] | None = None,
    stop: str | Iterable[object] | StopRules | RegexStopRules = (),
    replace: Rules | ReplaceRules | RegexReplaceRules | Any = (),
    aligned: bool = False,
    skip_special_tokens: bool = True,
    on_finish: FinishCallback | None = None,
) -> Callable[[Observable[TokenItem]], Observable[Any]]:
    r"""Token ids in, the text to show out: ``detokenize``, then ``stop``, then ``replace``.

    The order is fixed and deliberate: stop strings are matched on the model's own text (as the
    OpenAI API does: a stop string is something the model writes), and the replace rules rewrite
    only what is shown, after the stop has cut it; a replacement never creates or hides a stop
    string. Each stage is the operator of the same name, with its timing: text goes out as soon
    as no stop string or pattern can still claim it, and the stop disposes the source within one
    token.

    Args:
        tokenizer: as for :func:`detokenize`.
        prompt_ids: the prompt's ids (context for the detokenizer; never emitted).
        stop: stop strings and regular expressions (none by default), as for :func:`stop`.
        replace: replace rules (none by default), as for :func:`replace` (regular expressions too).
        aligned: emit :class:`~rxstream.Piece` items that carry the token ids whose text they
            complete (SEMANTICS §5), rather than ``str``.
        skip_special_tokens: as for :func:`detokenize`.
        on_finish: called once per subscription, before the terminal notification, with one
            :class:`~rxstream.Finish` for the whole pipeline: ``stop`` and the matched string when
            a stop string ended it; ``eos`` when the ids ended; ``cancelled`` when the subscriber
            disposed first; ``error``. With ``aligned=True``, ``Finish.dropped`` lists the ids
            that entered but were not emitted, in stream order (every id is either emitted in a
            piece or reported there).

    Rules and stop strings are checked when the pipeline is built (``TypeError``/``ValueError``
    as for :func:`stop` and :func:`replace`), as are the tokenizer and ``prompt_ids`` (as for
    :func:`detokenize`).

    Marble diagram, with a byte-level tokenizer whose id ``n`` is the byte ``n``: the stop string
    "##" ends the stream at the second "#" (e) and disposes the source there; "<NL>" (b, c) is
    replaced. The rule ``"#": "!"`` never sees the stop string: replace runs after stop (the
    other way round, "##" would have become "!!" and never stopped)::

        source:   -a-b-c-d-e-f-|    a=[72, 105], b=[60, 78], c=[76, 62], d=[120, 35], e=35, f=33
        operator: text_pipeline(tokenizer, stop=["##"], replace={"<NL>": "\n", "#": "!"})
        result:   -a---c-d-|        a="Hi", c="\n", d="x"
        upstream: ^--------!
    """
    # Everything is checked and compiled once, here; each subscription only builds its stages.
    stops = stop_rules_any(stop, owner="text_pipeline")
    rules = replace_rules_any(replace, owner="text_pipeline")
    ids_to_text = detokenize(
        tokenizer, skip_special_tokens=skip_special_tokens, prompt_ids=prompt_ids, aligned=aligned
    )

    def stages() -> list[_Stage]:
        out: list[_Stage] = [ids_to_text]
        if stops.strings and rules.pairs and on_finish is not None:
            # One report from two stages: the reason from stop, the rest from the last stage.
            report = _StopThenReplace(on_finish)
            return [*out, _stop(stops, on_finish=report.at_stop), _replace(rules, on_finish=report.at_end)]
        if stops.strings:
            out.append(_stop(stops, on_finish=on_finish))
        if rules.pairs:
            out.append(_replace(rules, on_finish=on_finish))
        if not (stops.strings or rules.pairs) and on_finish is not None:
            out.append(_reporter(on_finish))
        return out

    # The stages hold no state across subscriptions, except a merged report: then they are built
    # for each subscription.
    shared = None if (stops.strings and rules.pairs and on_finish is not None) else stages()

    def _text_pipeline(source: Observable[TokenItem]) -> Observable[Any]:
        if shared is not None:
            return source.pipe(*shared)
        return rx.defer(lambda _scheduler: source.pipe(*stages()))

    return _text_pipeline


class _StopThenReplace:
    """Merges the reports of ``stop`` and of the ``replace`` after it into one (per subscription).

    ``stop`` reports first when it ends the stream (the reason, the matched string, the ids it cut
    off); ``replace`` reports last in every case (and, when the subscriber disposes or an error
    comes, with the ids held by every stage).
    """

    __slots__ = ("_on_finish", "_stopped")

    def __init__(self, on_finish: FinishCallback) -> None:
        self._on_finish = on_finish
        self._stopped: Finish | None = None

    def at_stop(self, finish: Finish) -> None:
        if finish.reason is FinishReason.STOP:
            self._stopped = finish

    def at_end(self, finish: Finish) -> None:
        stopped = self._stopped
        if stopped is not None:
            finish = dataclasses.replace(stopped, dropped=stopped.dropped + finish.dropped)
        self._on_finish(finish)


def _reporter(on_finish: FinishCallback) -> Callable[[Observable[_T]], Observable[_T]]:
    """A pass-through stage that reports the pipeline's :class:`~rxstream.Finish`."""

    def make_sink(observer: abc.ObserverBase[_T]) -> OperatorSink[_T, _T]:
        return _ReportSink(observer, on_finish)

    return operator("text_pipeline", make_sink)


class _ReportSink(OperatorSink[_T, _T]):
    __slots__ = ()

    def __init__(self, observer: abc.ObserverBase[_T], on_finish: FinishCallback) -> None:
        super().__init__("text_pipeline", observer, on_finish)

    def on_next(self, value: _T) -> None:
        self.observer.on_next(value)
