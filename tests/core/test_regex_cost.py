"""What regex rules may cost: compile time linear in the automaton, a per-stream budget for the
lazy DFA, rule sets compiled once and shared (warm), and a shared DFA stepped from threads."""

from __future__ import annotations

import random
import re
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rxstream import RegexBudget, RegexBudgetError
from rxstream.operators._redact import PRESETS
from rxstream.text import (
    _regex_cache,
    automaton_nodes,
    clear_rule_cache,
    make_replacer,
    make_stop_matcher,
    replace_rules_any,
    rule_cache_info,
    rx,
    stop_rules_any,
)
from rxstream.text._regex import RegexRules, RegexScanner
from tests.core.test_regex_engine import flag_sets, patterns
from tests.reference import batch_replace_mixed

# the rules of the reliability report: within the server's per-rule limits, costly together
COSTLY = [r"(?i)[\w\W]{1,250}z<c>", r"(?:a|b|<c>)*a(?:a|b|\s){12}Q"]

_WORDS = "the capital of France is Paris and a dragon named Zog reads books by the sea".split()


def prose(n: int, seed: int = 0) -> str:
    r = random.Random(seed)
    return " ".join(r.choice(_WORDS) for _ in range(n))


def test_liveness_is_linear_in_the_automaton() -> None:
    """A counted repeat expands to a chain of optional copies; the liveness search walks each node a
    bounded number of times (it was quadratic: 4.7 s for the two rules below, 16 of them)."""
    for hold in (50, 250):
        rules = RegexRules([rf"(?i)[\w\W]{{1,{hold}}}z<c>"], max_hold=hold)
        dfa = rules.dfa
        assert dfa.liveness_steps <= 26 * len(dfa.nfa.kind), (dfa.liveness_steps, len(dfa.nfa.kind))


def test_a_transition_costs_the_automaton_once_not_per_node() -> None:
    """The closure of many chained optional copies is one search: a transition visits each NFA node
    at most once (it re-walked the chain from every copy)."""
    rules = RegexRules([r"[\w\W]{1,200}z"], max_hold=200)
    scanner = RegexScanner(rules)
    scanner.feed(prose(60))
    dfa = rules.dfa
    assert dfa.transitions > 50
    assert dfa.closure_visits <= dfa.transitions * len(dfa.nfa.kind)
    assert dfa.closure_visits <= 2 * dfa.transitions * 410  # 200 copies: a CHAR and a SPLIT each


def test_automaton_nodes_counts_without_building_and_stops_at_the_limit() -> None:
    assert automaton_nodes([COSTLY[0]]) > 500
    with pytest.raises(ValueError, match="more than 100 automaton nodes"):
        automaton_nodes([COSTLY[0]], limit=100)
    assert automaton_nodes(["abc"]) < 10


def test_the_budget_fails_a_costly_stream_and_not_an_ordinary_one() -> None:
    text = prose(400)
    budget = RegexBudget(max_states=150)
    ordinary = replace_rules_any([(rx(p), "[x]") for p, _ in PRESETS.values()], budget=budget)
    replacer = make_replacer(ordinary)
    out = "".join(replacer.feed(text[i : i + 5]) for i in range(0, len(text), 5)) + replacer.flush()
    assert out == text  # no e-mail or card in it: every state it needed was within the budget
    costly = stop_rules_any([rx(p, max_hold=250) for p in COSTLY], budget=budget)
    matcher = make_stop_matcher(costly)
    with pytest.raises(RegexBudgetError, match="more than 150 automaton states"):
        for i in range(0, len(text), 5):
            matcher.feed(text[i : i + 5])


def test_the_cpu_budget_fails_a_costly_stream() -> None:
    costly = stop_rules_any(
        [rx(p.replace("<c>", "<t>"), max_hold=250) for p in COSTLY], budget=RegexBudget(max_seconds=0.001)
    )
    matcher = make_stop_matcher(costly)
    with pytest.raises(RegexBudgetError, match="CPU time"):
        for word in prose(2000).split(" "):
            matcher.feed(word + " ")


def test_a_warm_rule_set_costs_a_stream_nothing() -> None:
    """The second stream of the same rules finds the states the first one built: its budget is
    untouched, so a request repeating rules is never failed for work done before it."""
    text = prose(200, seed=3)
    rules = [rx(r"(?i)[\w\W]{1,60}z<q>", max_hold=60)]
    first = make_stop_matcher(stop_rules_any(rules, budget=RegexBudget(max_states=100_000)))
    first.feed(text)
    second = make_stop_matcher(stop_rules_any(rules, budget=RegexBudget(max_states=1)))
    second.feed(text)  # the same text: every state is in the shared DFA already
    assert second._scanner.meter.states == 0


def test_rule_sets_are_compiled_once_and_shared() -> None:
    clear_rule_cache()
    a = replace_rules_any([(rx(r"\d+"), "#"), ("cat", "dog")])
    b = replace_rules_any([(rx(r"\d+"), "N"), ("cat", "cow")])  # same rules, other replacements
    assert a.regex is b.regex
    c = stop_rules_any([rx(r"\d+"), "cat"])
    assert c.regex is a.regex
    other = replace_rules_any([(rx(r"\d+", max_hold=4), "#"), ("cat", "dog")])
    assert other.regex is not a.regex  # another hold is another automaton
    info = rule_cache_info()
    assert info["hits"] >= 2 and info["entries"] >= 2


def test_the_rule_cache_stays_within_its_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_rule_cache()
    monkeypatch.setattr(_regex_cache, "MAX_CACHED_RULE_SETS", 5)
    for i in range(20):
        stop_rules_any([rx(rf"x{i}\d+")])
    assert rule_cache_info()["entries"] == 5
    monkeypatch.setattr(_regex_cache, "MAX_CACHED_WEIGHT", 1)
    stop_rules_any([rx(r"y\d+")])
    assert rule_cache_info()["entries"] == 1  # the newest stays
    clear_rule_cache()


def test_a_dfa_bounds_what_its_cache_holds() -> None:
    rules = RegexRules([r"(?:a|b)*a(?:a|b){12}"], max_hold=256)
    rules.dfa.max_cells = 4096
    scanner = RegexScanner(rules)
    r = random.Random(1)
    for _ in range(40):
        scanner.feed("".join(r.choice("ab") for _ in range(100)))
        assert rules.dfa.cells < 4096 + 64
    assert rules.dfa.resets > 0


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=30), st.integers(0, 1000))
def test_a_shared_dfa_stepped_from_threads_gives_each_stream_its_own_answer(
    cuts: list[int], seed: int
) -> None:
    """Streams on several threads share one cached rule set and its lazy DFA: each stream's output
    equals the batch result of its own text."""
    clear_rule_cache()
    pairs = [(rx(r"[a-z]+@[a-z]+\.(?:com|org)"), "<e>"), (rx(r"\b\d{3,}\b"), "<n>"), ("Paris", "P")]
    r = random.Random(seed)
    texts = [
        " ".join(r.choice([*_WORDS, "bob@x.com", "12345", "ann@y.org", "77"]) for _ in range(60))
        for _ in range(4)
    ]
    results: list[str | None] = [None] * len(texts)
    start = threading.Barrier(len(texts))

    def run(k: int) -> None:
        replacer = make_replacer(replace_rules_any(pairs))
        text = texts[k]
        start.wait()
        out, pos, i = [], 0, 0
        while pos < len(text):
            step = cuts[i % len(cuts)]
            out.append(replacer.feed(text[pos : pos + step]))
            pos += step
            i += 1
        out.append(replacer.flush())
        results[k] = "".join(out)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for text, got in zip(texts, results, strict=True):
        assert got == batch_replace_mixed(text, pairs)


@settings(max_examples=300, deadline=None)
@given(st.lists(patterns | st.sampled_from(COSTLY), min_size=1, max_size=3), flag_sets)
def test_automaton_nodes_counts_exactly_what_compiling_builds(rules: list[str], flags: int) -> None:
    """The count comes from the parse tree alone (repeats multiplied): exactly the nodes the
    compiled automaton has, so a limit refuses what it says."""
    compiled = [re.compile(p, flags) for p in rules]
    try:
        built = RegexRules(compiled, allow_empty=True).dfa.nfa
    except ValueError:
        return  # a rule that only matches "" (or is not supported): nothing to count
    starts = len(compiled) - 1  # SPLIT nodes that join the rules' starts, added after the count
    assert automaton_nodes(compiled) == len(built.kind) - starts
