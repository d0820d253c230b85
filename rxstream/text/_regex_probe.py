"""Trying a compiled rule set on sample text before any stream runs it (:func:`probe_budget`).

A rule set whose lazy DFA blows up usually does so on ordinary text: every position starts a run,
and the runs' states differ. Feeding a short sample of the text a model writes (words in both
cases, digits, punctuation, spaces and newlines, a few accented and non-Latin letters) through a
scanner with the stream's :class:`~rxstream.text.RegexBudget` finds most such sets *before* a
request is admitted, for the price of the budget at most, and the states it builds are the ones
the streams will need first. A set that passed once is not tried again (its DFA holds those
states). Rules that are cheap on the sample and costly on some other text are still bounded
while they stream.
"""

from __future__ import annotations

from ._regex import RegexRules, RegexScanner
from ._regex_budget import RegexBudget

__all__ = ["PROBE_TEXT", "probe_budget"]

PROBE_TEXT = (
    "The capital of France is Paris. In 2024, about 2,100,000 people lived there (11.3% more?).\n"
    'Here\'s a list:\n1. First item - with a dash; 2) second: "quoted" & <tagged> {braced} [x]\n'
    "ZOË wrote: naïve café, straße, Ελληνικά, русский, 中文, 日本語 — done!\n"
    "    def f(x): return x * 2  # code_sample @user #tag $5 ~50/50 a|b \\n\tend.\n"
)
"""A sample of the text a model writes (about 340 characters)."""

_PASSED_ATTR = "_probe_passed"


def probe_budget(rules: RegexRules, budget: RegexBudget | None, text: str = PROBE_TEXT) -> None:
    """Run ``rules`` over ``text`` within ``budget``.

    Raises:
        RegexBudgetError: the rule set needs more than ``budget`` on the sample text already.
    """
    if budget is None or getattr(rules, _PASSED_ATTR, False):
        return
    scanner = RegexScanner(rules, budget)
    scanner.feed(text)
    scanner.flush()
    setattr(rules, _PASSED_ATTR, True)
