"""What one stream may spend building its regex automaton (:class:`RegexBudget`).

The DFA behind regex rules is built lazily, one transition at a time, as the text needs it
(:mod:`rxstream.text._regex_dfa`). For ordinary rules that is a few dozen states, once; a rule
set made to blow up (long counted repeats such as ``[\\w\\W]{1,250}x``, or
``(a|b)*a(a|b){12}``) can need thousands of states, each costing up to the automaton's size.
A budget bounds that work per stream: a scanner that would build more states, or spend more CPU
time building them, than its budget allows fails with :class:`RegexBudgetError` (an operator
sends it to ``on_error``), so one stream's rules cannot take the time of others. States the
shared DFA already holds cost nothing: a rule set compiled once and cached
(:mod:`rxstream.text._regex_cache`) starts warm.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._regex_dfa import Dfa, State

__all__ = ["BudgetMeter", "RegexBudget", "RegexBudgetError"]


class RegexBudgetError(RuntimeError):
    """A stream's regex rules needed more automaton work than its :class:`RegexBudget` allows."""


@dataclass(frozen=True, slots=True)
class RegexBudget:
    """The most automaton work one stream's regex rules may cause.

    Attributes:
        max_states: new DFA states the stream may build (None: no bound).
        max_seconds: CPU seconds (of the thread that feeds the stream) it may spend building
            them (None: no bound).
    """

    max_states: int | None = None
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.max_states is not None and (
            isinstance(self.max_states, bool) or not isinstance(self.max_states, int) or self.max_states < 1
        ):
            raise ValueError(
                f"RegexBudget: max_states must be a positive int or None, got {self.max_states!r}"
            )
        seconds = self.max_seconds
        if seconds is not None and (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not math.isfinite(seconds)
            or seconds <= 0
        ):
            raise ValueError(f"RegexBudget: max_seconds must be a positive number or None, got {seconds!r}")


class BudgetMeter:
    """Counts what one scanner's DFA steps build; raises :class:`RegexBudgetError` past the budget.

    Only steps missing from the per-character cache come here, so a warm automaton costs
    nothing extra.
    """

    __slots__ = ("_dfa", "_max_seconds", "_max_states", "seconds", "states")

    def __init__(self, dfa: Dfa, budget: RegexBudget) -> None:
        self._dfa = dfa
        self._max_states = budget.max_states
        self._max_seconds = budget.max_seconds
        self.states = 0
        self.seconds = 0.0

    def step(self, st: State, ch: str) -> tuple[State, int]:
        dfa = self._dfa
        built = dfa.built
        t0 = time.thread_time()
        got = dfa.step(st, ch)
        self.seconds += time.thread_time() - t0
        self.states += dfa.built - built
        if self._max_states is not None and self.states > self._max_states:
            raise RegexBudgetError(
                f"the regex rules needed more than {self._max_states} automaton states for this stream "
                "(its budget); long counted repeats ({1,250}) and many overlapping alternatives cost the most"
            )
        if self._max_seconds is not None and self.seconds > self._max_seconds:
            raise RegexBudgetError(
                f"the regex rules took more than {self._max_seconds * 1000:g} ms of CPU time to build "
                "their automaton for this stream (its budget); long counted repeats ({1,250}) and many "
                "overlapping alternatives cost the most"
            )
        return got


def stepper(dfa: Dfa, budget: RegexBudget | None) -> tuple[Callable[[State, str], tuple[State, int]], Any]:
    """The step function a scanner uses, and its meter (None without a budget)."""
    if budget is None or (budget.max_states is None and budget.max_seconds is None):
        return dfa.step, None
    meter = BudgetMeter(dfa, budget)
    return meter.step, meter
