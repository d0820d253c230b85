"""Regular-expression rules beside literal ones, for replace, hold_back and stop (SEMANTICS §7).

A rule list may mix literal strings with regular expressions: a compiled ``re.Pattern`` or
``regex.Pattern`` as it is, or :func:`rx` (a pattern with options: ``max_hold``,
``on_hold_limit``, ``shortest``, ``allow_empty``). As soon as one rule of a list is a regular
expression, the whole list runs on one :class:`~rxstream.text._regex.RegexScanner`, the literal
strings as escaped patterns, so one leftmost-longest order holds across all rules (leftmost, then
longest, then the first rule in the list). A list of literal strings alone keeps the literal
engine (:mod:`._scanners`).

- :func:`replace_rules_any` / :func:`stop_rules_any` compile a rule list into the literal
  :class:`~._rules.ReplaceRules` / :class:`~._rules.StopRules`, or into
  :class:`RegexReplaceRules` / :class:`RegexStopRules` when a regular expression is present.
- :class:`RegexReplacer` and :class:`RegexStopMatcher` are the streaming engines over those, with
  the interface of :class:`~rxstream.Replacer` and :class:`~rxstream.StopMatcher`.
- A stop by a regular expression is reported as a :class:`RegexStop` (the rule and the text it
  matched); a stop by a literal string as the string.
"""

from __future__ import annotations

from ._regex_engines import RegexReplacer, RegexStopMatcher, make_replacer, make_stop_matcher
from ._regex_rule import RegexRule, RegexStop, is_regex_rule, rx
from ._regex_rule_sets import (
    RegexReplaceRules,
    RegexStopRules,
    check_replacement,
    replace_rules_any,
    stop_rules_any,
)

__all__ = [
    "RegexReplaceRules",
    "RegexReplacer",
    "RegexRule",
    "RegexStop",
    "RegexStopMatcher",
    "RegexStopRules",
    "check_replacement",
    "is_regex_rule",
    "make_replacer",
    "make_stop_matcher",
    "replace_rules_any",
    "rx",
    "stop_rules_any",
]
