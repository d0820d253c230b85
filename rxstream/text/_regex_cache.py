"""Compiled regex rule sets kept by their source, so repeated rules start warm.

Compiling a rule set (parsing, the alphabet, the liveness test) costs milliseconds, and its lazy
DFA learns its states from the text it sees. A server that receives the same rules with many
requests should pay for that once: :func:`cached_rules` returns the one :class:`RegexRules` for
a key built from the rules' sources and options, compiling it on the first request. The cache
is bounded by entries and by what the entries hold (NFA nodes plus the DFA's cached cells), least
recently used first out; a DFA shared by several streams is safe to step from several threads
(states are complete before they are shared, :mod:`rxstream.text._regex_dfa`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

from ._regex import RegexRules

__all__ = ["MAX_CACHED_RULE_SETS", "MAX_CACHED_WEIGHT", "cached_rules", "clear_rule_cache", "rule_cache_info"]

MAX_CACHED_RULE_SETS = 128
"""The most rule sets the cache keeps."""

MAX_CACHED_WEIGHT = 1 << 22
"""The most NFA nodes and DFA cells the cached rule sets hold together (a few tens of bytes each)."""

_lock = threading.Lock()
_cache: OrderedDict[Hashable, RegexRules] = OrderedDict()
_stats = {"hits": 0, "misses": 0}


def _weight(rules: RegexRules) -> int:
    return len(rules.dfa.nfa.kind) + rules.dfa.cells


def cached_rules(key: Hashable, build: Callable[[], RegexRules]) -> RegexRules:
    """The rule set for ``key``: the cached one, or ``build()``'s (then kept)."""
    with _lock:
        got = _cache.get(key)
        if got is not None:
            _cache.move_to_end(key)
            _stats["hits"] += 1
            _trim()  # its DFA (and the others') may have grown since
            return got
        _stats["misses"] += 1
    rules = build()  # outside the lock: a slow compile holds up no other stream
    with _lock:
        got = _cache.get(key)
        if got is not None:  # compiled meanwhile by another thread: keep one
            return got
        _cache[key] = rules
        _trim()
    return rules


def _trim() -> None:
    """Drop the least recently used entries past the bounds (the newest always stays)."""
    total = sum(_weight(r) for r in _cache.values())
    while len(_cache) > 1 and (len(_cache) > MAX_CACHED_RULE_SETS or total > MAX_CACHED_WEIGHT):
        _, dropped = _cache.popitem(last=False)
        total -= _weight(dropped)


def clear_rule_cache() -> None:
    """Forget every cached rule set (tests, or to give the memory back)."""
    with _lock:
        _cache.clear()
        _stats["hits"] = _stats["misses"] = 0


def rule_cache_info() -> dict[str, int]:
    """``entries``, ``weight`` (NFA nodes and DFA cells held), ``hits`` and ``misses``."""
    with _lock:
        return {
            "entries": len(_cache),
            "weight": sum(_weight(r) for r in _cache.values()),
            "hits": _stats["hits"],
            "misses": _stats["misses"],
        }
