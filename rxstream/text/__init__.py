"""The text engine: streaming find/replace and stop strings over chunks of text, outside Rx.

What is in it, bottom up:

- :mod:`._trie` -- :class:`PatternTrie`, one trie over all patterns with Aho-Corasick links.
- :mod:`._scanners` -- :class:`StopScanner` (earliest-starting, then longest match) and
  :class:`ReplaceScanner` (leftmost-longest, non-overlapping replacement), resumable between
  chunks, O(1) per character whatever the number of patterns.
- :mod:`._rules` -- checking and compiling rules once: :func:`replace_rules` ->
  :class:`ReplaceRules`, :func:`stop_rules` -> :class:`StopRules` (plus the plain
  :func:`normalize_rules` / :func:`normalize_stops` and the :data:`Rules` type).
- :mod:`._replacer` -- :class:`Replacer` and the batch :func:`replace_text` (SEMANTICS §2).
- :mod:`._stop_matcher` -- :class:`StopMatcher` and the batch :func:`stop_text` (SEMANTICS §3).
- :mod:`._regex` (with ``_regex_*``) -- :class:`RegexScanner`, the streaming leftmost-longest
  regular-expression engine; :mod:`._regex_ops` -- regular-expression rules (:func:`rx`) beside
  literal ones: :func:`replace_rules_any` / :func:`stop_rules_any`, :class:`RegexReplacer`,
  :class:`RegexStopMatcher`, :class:`RegexStop` (SEMANTICS §7); :mod:`._regex_budget` --
  :class:`RegexBudget`, what one stream may spend building the lazy DFA; :mod:`._regex_cache` --
  compiled rule sets kept by their sources (:func:`rule_cache_info`); :mod:`._regex_probe` --
  :func:`probe_budget`, a rule set tried on sample text within a budget before streams run it.

The ``replace``, ``hold_back`` and ``stop`` operators (:mod:`rxstream.operators`) run on these
engines; :class:`Replacer`, :class:`StopMatcher`, :func:`replace_text`, :func:`stop_text` and
:data:`Rules` are also exported from :mod:`rxstream`.
"""

from ._regex import HoldLimitError, automaton_nodes
from ._regex_budget import RegexBudget, RegexBudgetError
from ._regex_cache import clear_rule_cache, rule_cache_info
from ._regex_ops import (
    RegexReplacer,
    RegexReplaceRules,
    RegexRule,
    RegexStop,
    RegexStopMatcher,
    RegexStopRules,
    check_replacement,
    is_regex_rule,
    make_replacer,
    make_stop_matcher,
    replace_rules_any,
    rx,
    stop_rules_any,
)
from ._regex_probe import PROBE_TEXT, probe_budget
from ._replacer import Replacer, replace_text
from ._rules import (
    ReplaceRules,
    Rules,
    StopRules,
    normalize_rules,
    normalize_stops,
    replace_rules,
    stop_rules,
)
from ._scanners import ReplaceScanner, StopScanner
from ._stop_matcher import StopMatcher, stop_text
from ._trie import PatternTrie

__all__ = [
    "PROBE_TEXT",
    "HoldLimitError",
    "PatternTrie",
    "RegexBudget",
    "RegexBudgetError",
    "RegexReplaceRules",
    "RegexReplacer",
    "RegexRule",
    "RegexStop",
    "RegexStopMatcher",
    "RegexStopRules",
    "ReplaceRules",
    "ReplaceScanner",
    "Replacer",
    "Rules",
    "StopMatcher",
    "StopRules",
    "StopScanner",
    "automaton_nodes",
    "check_replacement",
    "clear_rule_cache",
    "is_regex_rule",
    "make_replacer",
    "make_stop_matcher",
    "normalize_rules",
    "normalize_stops",
    "probe_budget",
    "replace_rules",
    "replace_rules_any",
    "replace_text",
    "rule_cache_info",
    "rx",
    "stop_rules",
    "stop_rules_any",
    "stop_text",
]
