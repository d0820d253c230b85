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

The ``replace``, ``hold_back`` and ``stop`` operators (:mod:`rxstream.operators`) run on these
engines; :class:`Replacer`, :class:`StopMatcher`, :func:`replace_text`, :func:`stop_text` and
:data:`Rules` are also exported from :mod:`rxstream`.
"""

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
    "PatternTrie",
    "ReplaceRules",
    "ReplaceScanner",
    "Replacer",
    "Rules",
    "StopMatcher",
    "StopRules",
    "StopScanner",
    "normalize_rules",
    "normalize_stops",
    "replace_rules",
    "replace_text",
    "stop_rules",
    "stop_text",
]
