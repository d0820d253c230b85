"""A replayed model that decodes: :class:`ReplayLogitsModel` answers with a recorded completion
(a reasoning model's, say), but through logits and a real sampler, so that a grammar can steer it.

Each step's logits favour the recording's next id while the output so far follows the recording
(then the end-of-sequence id); once the output leaves it, they favour the lowest ids. Without a
grammar the recording comes back as it is; with one, every id the grammar forbids is masked and
the recording is followed wherever the grammar allows it -- the reasoning, which it leaves free.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import reactivex
from reactivex import abc
from reactivex.disposable import Disposable
from reactivex.scheduler import NewThreadScheduler

from rxstream import Finish, FinishCallback, FinishReason, SamplingParams
from rxstream.backends.onnx import Sampler
from rxstream.structured import Grammar, GrammarTokenizer
from tests.scripted_model import ScriptedModel

__all__ = ["ReplayLogitsModel"]


class ReplayLogitsModel(ScriptedModel):
    """A :class:`~tests.scripted_model.ScriptedModel` that samples (see the module docstring);
    ``eos``: the id that ends its answers."""

    def __init__(
        self, tokenizer: Any, template: str | None, script: Callable[[str], str] | str, *, eos: int
    ) -> None:
        super().__init__(tokenizer, template, script)
        self.eos_token_ids = frozenset({eos})
        self.vocab_size = int(tokenizer.get_vocab_size(with_added_tokens=True))
        self._grammars: GrammarTokenizer | None = None
        self._glock = threading.Lock()
        self.outputs: list[list[int]] = []

    @property
    def grammar_tokenizer(self) -> GrammarTokenizer:
        with self._glock:
            if self._grammars is None:
                self._grammars = GrammarTokenizer(self.tokenizer, self.vocab_size, self.eos_token_ids)
            return self._grammars

    def generate(  # type: ignore[override]
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams | None = None,
        *,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        grammar: Grammar | None = None,
    ) -> reactivex.Observable[int]:
        prompt_text = self.tokenizer.decode(list(prompt_ids), skip_special_tokens=False)
        recording = self.completion_ids(prompt_text)
        p = params or SamplingParams()
        constraint = self.grammar_tokenizer.constraint(grammar) if grammar is not None else None
        (eos,) = self.eos_token_ids
        background = -np.arange(self.vocab_size, dtype=np.float32) * 1e-4

        def subscribe(
            observer: abc.ObserverBase[int], sched: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            cancelled = threading.Event()
            ended = threading.Event()
            sampler = Sampler(self.vocab_size, p, constraint=constraint)
            out: list[int] = []
            self.outputs.append(out)

            def report(finish: Finish) -> None:
                if not ended.is_set():
                    ended.set()
                    if on_finish is not None:
                        on_finish(finish)

            def run(_s: Any, _state: Any = None) -> None:
                finish = Finish(FinishReason.LENGTH)
                try:
                    while len(out) < p.max_new_tokens:
                        if cancelled.is_set():
                            return
                        logits = background.copy()
                        if out == recording[: len(out)]:
                            logits[recording[len(out)] if len(out) < len(recording) else eos] = 10.0
                        token = sampler(logits)
                        if token == eos:
                            finish = Finish(FinishReason.EOS)
                            break
                        out.append(token)
                        observer.on_next(token)
                        if constraint is not None and constraint.finished:
                            finish = Finish(FinishReason.EOS)
                            break
                except Exception as exc:
                    report(Finish(FinishReason.ERROR, error=exc))
                    observer.on_error(exc)
                    return
                report(finish)
                observer.on_completed()

            inner = (scheduler or NewThreadScheduler()).schedule(run)

            def dispose() -> None:
                cancelled.set()
                inner.dispose()
                report(Finish(FinishReason.CANCELLED))

            return Disposable(dispose)

        return reactivex.create(subscribe)
