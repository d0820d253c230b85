"""The streaming regex engine (rxstream.text._regex) against the brute-force batch reference."""

from __future__ import annotations

import importlib
import itertools
import re
from collections.abc import Sequence
from typing import Any

import pytest
import regex
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rxstream.text._regex import (
    HoldLimitError,
    RegexMatch,
    RegexRules,
    RegexScanner,
    find_all_leftmost_longest,
)

Triple = tuple[int, int, int]


def stream(rules: RegexRules, text: str, cuts: Sequence[int] = ()) -> tuple[list[Triple], list[int]]:
    """Feed ``text`` split at ``cuts`` then flush: the matches, and ``released`` after each feed."""
    scanner = RegexScanner(rules)
    found: list[Triple] = []
    released: list[int] = []
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < len(text))), len(text)]
    for a, b in itertools.pairwise(bounds):
        result = scanner.feed(text[a:b])
        found += [(m.start, m.end, m.rule) for m in result.matches]
        assert all(m.end <= result.released for m in result.matches)
        released.append(result.released)
    end = scanner.flush()
    found += [(m.start, m.end, m.rule) for m in end.matches]
    assert end.released == len(text)
    return found, released


def state_after(rules: RegexRules, text: str) -> tuple[list[Triple], int]:
    """The matches reported while feeding ``text`` (one character at a time) and ``released``."""
    scanner = RegexScanner(rules)
    found: list[Triple] = []
    released = 0
    for ch in text:
        result = scanner.feed(ch)
        found += [(m.start, m.end, m.rule) for m in result.matches]
        released = result.released
    return found, released


# -- random regular expressions over a small alphabet ------------------------------------------

LEAVES = ["a", "b", "A", " ", "[ab]", "[^a]", ".", "\\w", "\\s", "[a-b ]", "\\W"]
ASSERTIONS = ["\\b", "\\B", "^", "$", "\\A", "\\Z"]


def _combine(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    pair = st.tuples(children, children)
    return st.one_of(
        pair.map(lambda p: p[0] + p[1]),
        pair.map(lambda p: f"(?:{p[0]}|{p[1]})"),
        children.map(lambda x: f"(?:{x})*"),
        children.map(lambda x: f"(?:{x})+"),
        children.map(lambda x: f"(?:{x})?"),
        children.map(lambda x: f"(?:{x}){{1,2}}"),
        children.map(lambda x: f"({x})"),
        children.map(lambda x: f"(?:{x})+?"),
    )


_sre_parse = importlib.import_module("re._parser")
_MAXREPEAT = importlib.import_module("re._constants").MAXREPEAT


def _nested_unbounded(items: Any, inside: bool = False) -> bool:
    """Whether an unbounded repeat lies inside another (``(?:(?:a)*)+``), or an alternation inside
    an unbounded repeat (``(?:.|.)+``, whose branches can take the same text: 2**n ways to split
    n characters): Python's backtracking ``re``, which the brute-force reference asks, takes
    exponential time on those (a pattern the reference pins to an end it cannot reach tries every
    way), so they are left to the tests of the engine's own linear cost
    (``test_linear_steps_on_redos_patterns``)."""
    for op, av in items:
        name = str(op)
        if name in ("MAX_REPEAT", "MIN_REPEAT"):
            unbounded = av[1] == _MAXREPEAT
            if unbounded and inside:
                return True
            if _nested_unbounded(av[2], inside or unbounded):
                return True
        elif name == "SUBPATTERN" and _nested_unbounded(av[3], inside):
            return True
        elif name == "BRANCH" and (inside or any(_nested_unbounded(b, inside) for b in av[1])):
            return True
    return False


patterns = st.recursive(st.sampled_from(LEAVES) | st.sampled_from(ASSERTIONS), _combine, max_leaves=5).filter(
    lambda p: not _nested_unbounded(_sre_parse.parse(p))
)
flag_sets = st.sampled_from([re.M, re.M | re.I, re.M | re.S, re.M | re.I | re.S, re.M | re.A])
TEXT_ALPHABET = "abA \n_"


def make_rules(sources: list[str], flags: int, **options: Any) -> RegexRules | None:
    """Compile the generated patterns; None (the example is skipped) if one matches ""."""
    compiled = [re.compile(s, flags) for s in sources]
    try:
        return RegexRules(compiled, **options)
    except ValueError as exc:
        assert "empty string" in str(exc)
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    st.lists(patterns, min_size=1, max_size=3),
    flag_sets,
    st.text(alphabet=TEXT_ALPHABET, max_size=14),
    st.lists(st.integers(0, 14), max_size=5),
)
def test_streamed_matches_equal_batch_under_any_chunking(
    sources: list[str], flags: int, text: str, cuts: list[int]
) -> None:
    rules = make_rules(sources, flags)
    assume(rules is not None)
    assert rules is not None
    expected = find_all_leftmost_longest(rules.sources, text)
    found, released = stream(rules, text, cuts)
    assert found == expected
    # chunking invariance of the hold-back: released depends on the text so far only
    one_by_one = stream(rules, text, range(len(text)))[1]
    bounds = [*sorted(set(c for c in cuts if 0 < c < len(text))), len(text)]
    assert released == [one_by_one[b - 1] for b in bounds] if text else True


def _valid_prefix(rules: list[Any], text: str, r: int, continuations: list[str]) -> bool:
    """Whether the fate of text[:r] is the same for every continuation (brute force)."""
    seen = None
    for x in continuations:
        decided = [m for m in find_all_leftmost_longest(rules, text + x) if m[0] < r]
        if any(m[1] > r for m in decided):
            return False
        if seen is None:
            seen = decided
        elif decided != seen:
            return False
    return True


def _continuations(alphabet: str, length: int) -> list[str]:
    return ["".join(p) for k in range(length + 1) for p in itertools.product(alphabet, repeat=k)]


CONT_ALPHABET = "a \n_"
SHORT = _continuations(CONT_ALPHABET, 3)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.lists(patterns, min_size=1, max_size=2), flag_sets, st.text(alphabet="ab \n_", max_size=8))
def test_hold_back_is_minimal(sources: list[str], flags: int, text: str) -> None:
    """Released == the longest prefix whose fate no continuation changes (brute-force oracle)."""
    rules = make_rules(sources, flags)
    assume(rules is not None)
    assert rules is not None
    pats = rules.sources
    found, released = state_after(rules, text)
    # sound: every continuation agrees with what was released (and reported)
    for x in SHORT:
        batch = find_all_leftmost_longest(pats, text + x)
        assert [m for m in batch if m[0] < released] == found
        assert all(m[1] <= released for m in batch if m[0] < released)
    # minimal: no longer prefix is decided (continuations up to 3, then up to 5 characters)
    for r in range(released + 1, len(text) + 1):
        if _valid_prefix(pats, text, r, SHORT):
            longer = _continuations(CONT_ALPHABET + "bA", 5)
            assert not _valid_prefix(pats, text, r, longer), (text, r, released)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    st.lists(patterns, min_size=1, max_size=3),
    flag_sets,
    st.text(alphabet=TEXT_ALPHABET, max_size=14),
    st.lists(st.integers(1, 4), min_size=3, max_size=3),
    st.lists(st.integers(0, 14), max_size=4),
)
def test_max_hold_release_caps_match_length(
    sources: list[str], flags: int, text: str, holds: list[int], cuts: list[int]
) -> None:
    holds = holds[: len(sources)]
    rules = make_rules(sources, flags, max_hold=holds)
    assume(rules is not None)
    assert rules is not None
    expected = find_all_leftmost_longest(rules.sources, text, max_hold=holds)
    found, released = stream(rules, text, cuts)
    assert found == expected
    for b, rel in zip(sorted(set(c for c in cuts if 0 < c < len(text))), released, strict=False):
        assert b - rel <= max(holds)  # never more than max_hold characters held


# -- examples ----------------------------------------------------------------------------------


def test_longest_alternative_wins_unlike_re() -> None:
    rules = RegexRules(["ab|abcd"])
    assert re.search("ab|abcd", "abcd").group() == "ab"  # type: ignore[union-attr]
    assert stream(rules, "abcd", range(4))[0] == [(0, 4, 0)]
    scanner = RegexScanner(rules)
    assert scanner.feed("ab").matches == [] and scanner.held == "ab"
    assert scanner.feed("c").released == 0  # "abc" may still become "abcd"
    result = scanner.feed("x")
    assert [m.text for m in result.matches] == ["ab"] and result.released == 4


def test_role_marker_regex() -> None:
    rules = RegexRules([r"\n\s*(?:User|Human):"])
    text = "Sure.\n\n  User: next"
    scanner = RegexScanner(rules)
    releases = [scanner.feed(ch).released for ch in text[:9]]
    assert releases[:5] == [1, 2, 3, 4, 5]  # released at once: no "\n" yet
    assert releases[5:] == [5, 5, 5, 5]  # "\n", "\n ", ... could start a marker
    assert stream(rules, text, range(len(text)))[0] == [(5, 14, 0)]
    assert stream(rules, "a\nUserX", range(7))[0] == []


def test_api_key_one_character_at_a_time() -> None:
    rules = RegexRules([r"sk-[A-Za-z0-9]{20,}"])
    key = "sk-" + "Ab3" * 12 + "x"  # 40 characters
    text = f"my key is {key}. ok"
    scanner = RegexScanner(rules)
    found: list[RegexMatch] = []
    for i, ch in enumerate(text):
        result = scanner.feed(ch)
        found += result.matches
        if 10 <= i < 10 + 40:
            assert result.released == 10  # the key is held while it grows
    found += scanner.flush().matches
    assert [(m.start, m.text) for m in found] == [(10, key)]


def test_back_to_back_matches() -> None:
    rules = RegexRules([r"a+b", r"c"])
    assert stream(rules, "abaabcab", range(8))[0] == [(0, 2, 0), (2, 5, 0), (5, 6, 1), (6, 8, 0)]
    assert stream(rules, "abaabcab")[0] == [(0, 2, 0), (2, 5, 0), (5, 6, 1), (6, 8, 0)]


def test_tie_goes_to_first_rule_and_leftmost_beats_longest() -> None:
    rules = RegexRules([r"b+", r"[ab]+", r"ab"])
    assert stream(rules, "xabbb", range(5))[0] == [(1, 5, 1)]
    assert stream(RegexRules([r"ab", r"[ab]b"]), "ab")[0] == [(0, 2, 0)]


def test_assertions_need_the_next_character() -> None:
    rules = RegexRules([r"\bcat\b", r"(?m)end$"])
    scanner = RegexScanner(rules)
    assert scanner.feed("a cat").released == 2  # "cat" or "cats"?
    assert [m.text for m in scanner.feed(" ").matches] == ["cat"]
    assert scanner.feed("the end").released == 10
    assert [m.text for m in scanner.feed("\n").matches] == ["end"]
    scanner = RegexScanner(RegexRules([r"end\Z"]))
    assert scanner.feed("the end").matches == []
    assert [m.text for m in scanner.flush().matches] == ["end"]


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        (r"(a)\1", "back-reference"),
        (r"(?P<x>a)(?P=x)", "back-reference"),
        (r"(?=a)a", "look-ahead"),
        (r"(?!a)b", "negative look-ahead"),
        (r"(?<=a)b", "look-behind"),
        (r"(?<!a)b", "negative look-behind"),
        (r"(a)?(?(1)a|b)", "conditional"),
        (r"a++", "possessive"),
        (r"a*+b", "possessive"),
        (r"(?>a)", "atomic group"),
        (r"a$", "$ without MULTILINE"),
        (r"a*", "empty string"),
        (r"\b", "empty string"),
        (r"(?m)^$", "empty string"),
        (r"a(", "missing )"),
    ],
)
def test_rejected_constructs_are_named(pattern: str, construct: str) -> None:
    with pytest.raises(ValueError, match=re.escape(construct)):
        RegexRules([pattern])


def test_bad_arguments() -> None:
    with pytest.raises(TypeError):
        RegexRules("abc")
    with pytest.raises(TypeError):
        RegexRules([b"abc"])
    with pytest.raises(ValueError, match="bytes"):
        RegexRules([re.compile(b"abc")])
    with pytest.raises(ValueError, match="at least one"):
        RegexRules([])
    with pytest.raises(ValueError, match="max_hold"):
        RegexRules(["a"], max_hold=0)
    with pytest.raises(ValueError, match="on_hold_limit"):
        RegexRules(["a"], on_hold_limit="drop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mixed"):
        RegexRules(["a", regex.compile("b")])
    with pytest.raises(ValueError, match="FULLCASE"):
        RegexRules([regex.compile("a", regex.FULLCASE | regex.I)])


def test_flags_inline_and_scoped() -> None:
    text = "Foo\nfoo FOO f\noo"
    cases: list[tuple[Any, list[Triple]]] = [
        (r"(?i)foo", [(0, 3, 0), (4, 7, 0), (8, 11, 0)]),
        (r"(?i:f)oo", [(0, 3, 0), (4, 7, 0)]),
        (r"(?s)f.oo", [(12, 16, 0)]),
        (r"(?m)^foo", [(4, 7, 0)]),
        (re.compile(r" f o o # spaced", re.X | re.I), [(0, 3, 0), (4, 7, 0), (8, 11, 0)]),
        (re.compile(r"\w+", re.A), [(0, 3, 0), (4, 7, 0), (8, 11, 0), (12, 13, 0), (14, 16, 0)]),
    ]
    for rule, expected in cases:
        rules = RegexRules([rule])
        assert stream(rules, text, range(len(text)))[0] == expected, rule
        assert find_all_leftmost_longest([rule], text) == expected


def test_unicode_classes_and_case() -> None:
    text = "Ünïcödé ΣΊΣΥΦΟΣ ٣٤ x \u212a k K \u017f s S"
    cases = [r"\w+", r"(?i)σίσυφος", r"\d+", r"[^\W\d]+", r"(?a)\w+", r"[ά-ω]+"]
    for rule in [*cases, r"(?i)k", r"(?i)s", r"(?ia)[k-s]"]:
        rules = RegexRules([rule])
        assert stream(rules, text, range(len(text)))[0] == find_all_leftmost_longest([rule], text), rule


def test_regex_patterns_use_their_own_semantics() -> None:
    word = regex.compile(r"\w+")
    text = "a\u0301b c"  # a combining mark: a word character for regex, not for re
    assert stream(RegexRules([word]), text)[0] == [(0, 3, 0), (4, 5, 0)]
    assert stream(RegexRules([r"\w+"]), text)[0] == [(0, 1, 0), (2, 3, 0), (4, 5, 0)]
    rules = RegexRules([regex.compile(r"(?i)(ab)c|x")])
    assert stream(rules, "xABC", range(4))[0] == [(0, 1, 0), (1, 4, 0)]


def test_rematch_gives_groups_of_the_decided_span() -> None:
    rules = RegexRules([r"(?P<k>[a-z]+)=(\d+)", r"\bx\B"])
    scanner = RegexScanner(rules)
    matches = scanner.feed("key=12 xy k=3").matches + scanner.flush().matches
    m0 = rules.rematch(matches[0])
    assert (m0.group(), m0["k"], m0.group(2), m0.expand(r"\2:\g<k>")) == ("key=12", "key", "12", "12:key")
    assert rules.rematch(matches[1]).group() == "x"  # \B needs the real next character
    assert rules.rematch(matches[2]).groups() == ("k", "3")
    # the alternative re picks first would end elsewhere: the re-match is pinned to the span
    rules = RegexRules([r"(a|ab)(c|bcd)"])
    (m,) = stream_matches(rules, "abcd")
    assert rules.rematch(m).groups() == ("a", "bcd")


def stream_matches(rules: RegexRules, text: str) -> list[RegexMatch]:
    scanner = RegexScanner(rules)
    return [*scanner.feed(text).matches, *scanner.flush().matches]


# -- complexity --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        (r"(a+)+\Z", "a" * 100_000 + "b"),
        (r"(?m)(a+)+$", "a" * 100_000 + "!"),
        (r"(a|a)*b", "a" * 100_000),
        (r"(a|aa)+c", "a" * 100_000),
        (r"(.*a){20}", "a" * 100_000),
        (r"(a|b)*a(a|b){20}", "ab" * 50_000),
    ],
)
def test_linear_steps_on_redos_patterns(pattern: str, text: str) -> None:
    hold = 16
    rules = RegexRules([pattern], max_hold=hold)
    scanner = RegexScanner(rules)
    for i in range(0, len(text), 4096):
        scanner.feed(text[i : i + 4096])
    found = scanner.flush().matches
    assert scanner.steps <= (hold + 2) * len(text)
    assert scanner.held == ""
    assert found == []  # no match of at most 16 characters in these texts
    short = text[:10] + text[-10:]  # the reference backtracks exponentially on these
    expected = find_all_leftmost_longest([pattern], short, max_hold=hold)
    assert stream(rules, short, range(0, len(short), 3))[0] == expected


def test_dfa_state_bound_drops_the_cache_and_keeps_results() -> None:
    pattern = r"(a|b)*a(a|b){12}"
    text = "".join("ab"[(i * 7 + i // 3) % 2] for i in range(600))
    small = RegexRules([pattern], max_states=16, max_hold=40)
    big = RegexRules([pattern], max_hold=40)
    assert stream(small, text)[0] == stream(big, text)[0]
    assert small.dfa.resets > 0
    assert len(small.dfa._table) <= 16


def test_hold_limit_error_policy() -> None:
    rules = RegexRules([r"<think>[^<]*</think>"], max_hold=20, on_hold_limit="error")
    scanner = RegexScanner(rules)
    assert [m.text for m in scanner.feed("<think>short</think>").matches] == ["<think>short</think>"]
    with pytest.raises(HoldLimitError, match="max_hold=20"):
        scanner.feed("<think>" + "x" * 30)
    with pytest.raises(ValueError, match="flushed"):
        scanner.feed("x")  # no use after the error
    released = RegexRules([r"<think>[^<]*</think>"], max_hold=20)
    scanner = RegexScanner(released)
    result = scanner.feed("<think>" + "x" * 30)
    assert result.matches == [] and result.released == 37


# -- shortest and allow_empty modes --------------------------------------------------------------


def make_mode_rules(sources: list[str], flags: int, **options: Any) -> RegexRules | None:
    """Like ``make_rules``; None when a generated pattern cannot be used in the mode."""
    compiled = [re.compile(s, flags) for s in sources]
    try:
        return RegexRules(compiled, **options)
    except ValueError as exc:
        assert "empty string" in str(exc)
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    st.lists(st.tuples(patterns, st.booleans()), min_size=1, max_size=3),
    flag_sets,
    st.text(alphabet=TEXT_ALPHABET, max_size=14),
    st.lists(st.integers(0, 14), max_size=5),
)
def test_shortest_mode_matches_brute_force_under_any_chunking(
    rules_modes: list[tuple[str, bool]], flags: int, text: str, cuts: list[int]
) -> None:
    """Per rule leftmost-shortest (or -longest), the longest of the rules' matches at a position."""
    sources = [s for s, _ in rules_modes]
    modes = [m for _, m in rules_modes]
    rules = make_mode_rules(sources, flags, shortest=modes)
    assume(rules is not None)
    assert rules is not None
    expected = find_all_leftmost_longest(rules.sources, text, shortest=modes)
    found, released = stream(rules, text, cuts)
    assert found == expected
    one_by_one = stream(rules, text, range(len(text)))[1]
    bounds = [*sorted(set(c for c in cuts if 0 < c < len(text))), len(text)]
    assert released == [one_by_one[b - 1] for b in bounds] if text else True


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    st.lists(patterns, min_size=1, max_size=3),
    flag_sets,
    st.booleans(),
    st.text(alphabet=TEXT_ALPHABET, max_size=14),
    st.lists(st.integers(0, 14), max_size=5),
)
def test_allow_empty_reports_only_non_empty_matches(
    sources: list[str], flags: int, shortest: bool, text: str, cuts: list[int]
) -> None:
    """Patterns that match "" stand for their non-empty matches (the reference never takes "")."""
    rules = make_mode_rules(sources, flags, allow_empty=True, shortest=shortest)
    assume(rules is not None)
    assert rules is not None
    expected = find_all_leftmost_longest(rules.sources, text, shortest=shortest)
    assert stream(rules, text, cuts)[0] == expected
    # the same rules with their empty alternative removed where the pattern allows it: unchanged
    # results for the rules that never match "" (allow_empty changes nothing for them)
    plain = make_mode_rules(sources, flags, shortest=shortest)
    if plain is not None:
        assert stream(plain, text, cuts)[0] == expected


def _valid_prefix_modes(
    rules: list[Any], text: str, r: int, continuations: list[str], shortest: Sequence[bool]
) -> bool:
    seen = None
    for x in continuations:
        decided = [m for m in find_all_leftmost_longest(rules, text + x, shortest=shortest) if m[0] < r]
        if any(m[1] > r for m in decided):
            return False
        if seen is None:
            seen = decided
        elif decided != seen:
            return False
    return True


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    st.lists(st.tuples(patterns, st.booleans()), min_size=1, max_size=2),
    flag_sets,
    st.text(alphabet="ab \n_", max_size=8),
)
def test_shortest_mode_hold_back_is_minimal(
    rules_modes: list[tuple[str, bool]], flags: int, text: str
) -> None:
    sources = [s for s, _ in rules_modes]
    modes = [m for _, m in rules_modes]
    rules = make_mode_rules(sources, flags, shortest=modes, allow_empty=True)
    assume(rules is not None)
    assert rules is not None
    pats = rules.sources
    found, released = state_after(rules, text)
    for x in SHORT:
        batch = find_all_leftmost_longest(pats, text + x, shortest=modes)
        assert [m for m in batch if m[0] < released] == found
        assert all(m[1] <= released for m in batch if m[0] < released)
    for r in range(released + 1, len(text) + 1):
        if _valid_prefix_modes(pats, text, r, SHORT, modes):
            longer = _continuations(CONT_ALPHABET + "bA", 5)
            assert not _valid_prefix_modes(pats, text, r, longer, modes), (text, r, released)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    st.lists(st.tuples(patterns, st.booleans()), min_size=1, max_size=3),
    flag_sets,
    st.text(alphabet=TEXT_ALPHABET, max_size=14),
    st.lists(st.integers(1, 4), min_size=3, max_size=3),
)
def test_shortest_mode_with_max_hold(
    rules_modes: list[tuple[str, bool]], flags: int, text: str, holds: list[int]
) -> None:
    sources = [s for s, _ in rules_modes]
    modes = [m for _, m in rules_modes]
    holds = holds[: len(sources)]
    rules = make_mode_rules(sources, flags, shortest=modes, max_hold=holds, allow_empty=True)
    assume(rules is not None)
    assert rules is not None
    expected = find_all_leftmost_longest(rules.sources, text, shortest=modes, max_hold=holds)
    assert stream(rules, text, range(len(text)))[0] == expected


GPT_OSS_TOOL = r"<\|channel\|>commentary to=functions\.(?P<name>\w+).*?<\|message\|>"


def test_shortest_ends_at_the_first_terminator_and_is_decided_at_once() -> None:
    text = (
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        '{"q": "<|message|>"}<|call|>'
    )
    end = text.index("<|message|>") + len("<|message|>")
    rules = RegexRules([GPT_OSS_TOOL], shortest=True, max_hold=4096)
    scanner = RegexScanner(rules)
    released = []
    for i, ch in enumerate(text):
        result = scanner.feed(ch)
        released.append(result.released)
        if result.matches:
            assert i + 1 == end  # reported with the last character of the first <|message|>
            (m,) = result.matches
            assert (m.start, m.end) == (0, end)
            assert rules.rematch(m)["name"] == "get_weather"
    assert released[end - 2] == 0 and released[end - 1] == end
    assert released[-1] == len(text)  # nothing held after it: "<|message|>" again is plain text
    # the longest mode runs to the last <|message|> and holds everything until then
    longest = RegexRules([GPT_OSS_TOOL], max_hold=4096)
    assert stream(longest, text)[0] == [(0, text.rindex("<|message|>") + 11, 0)]


def test_shortest_lazy_and_greedy_examples() -> None:
    def spans(pattern: str, text: str, **options: Any) -> list[str]:
        scanner = RegexScanner(RegexRules([pattern], **options))
        return [m.text for m in scanner.feed(text).matches + scanner.flush().matches]

    assert spans(r"<b>.*?</b>", "<b>x</b>y</b>", shortest=True) == ["<b>x</b>"]
    assert spans(r"<b>.*?</b>", "<b>x</b>y</b>") == ["<b>x</b>y</b>"]
    assert spans(r"a+", "aaa", shortest=True) == ["a", "a", "a"]
    assert spans(r"ab|abcd", "abcd", shortest=True) == ["ab"]
    # across rules the longest candidate still wins: a longest rule beside a shortest one
    rules = RegexRules([r"<x>.*?</x>", r"<x>.*"], shortest=[True, False])
    assert stream(rules, "<x>a</x>b")[0] == [(0, 9, 1)]
    rules = RegexRules([r"<x>.*?</x>", r"<x>"], shortest=[True, False])
    assert stream(rules, "<x>a</x>b</x>")[0] == [(0, 8, 0)]


def test_allow_empty_examples_and_the_start_of_the_stream() -> None:
    ernie = RegexRules([r"(?:^|<think>\s*)"], allow_empty=True)
    assert ernie.empty == (frozenset({(True, False), (True, True)}),)  # only at the start
    assert stream(ernie, "<think>\n a</think>b<think>c")[0] == [(0, 9, 0), (19, 26, 0)]
    anchored = RegexRules([r"^<think>"])
    assert stream(anchored, "<think>x<think>")[0] == [(0, 7, 0)]  # ^: the stream's start only
    assert RegexRules([r"x*"], allow_empty=True).empty[0] == frozenset(
        {(True, True), (True, False), (False, True), (False, False)}
    )
    assert RegexRules([r"(?:\n?</r>|\Z)"], allow_empty=True).empty[0] == frozenset(
        {(True, True), (False, True)}  # at the end only
    )
    assert RegexRules([r"<a>"]).empty == (frozenset(),)
    assert stream(RegexRules([r"b*"], allow_empty=True), "abba")[0] == [(1, 3, 0)]
    with pytest.raises(ValueError, match="only the empty string"):
        RegexRules([r"^"], allow_empty=True)
    with pytest.raises(ValueError, match="only the empty string"):
        RegexRules([r"(?:\A|\Z)"], allow_empty=True)
    with pytest.raises(ValueError, match="allow_empty=True"):
        RegexRules([r"(?:^|<think>)"])
    with pytest.raises(ValueError, match="shortest"):
        RegexRules(["a", "b"], shortest=[True])
    with pytest.raises(ValueError, match="allow_empty"):
        RegexRules(["a"], allow_empty=1)  # type: ignore[arg-type]


def test_modes_reach_the_stop_matcher_and_the_replacer() -> None:
    from rxstream.text import make_replacer, make_stop_matcher, replace_rules_any, rx, stop_rules_any

    tool = rx(GPT_OSS_TOOL, shortest=True, max_hold=1024)
    think = rx(r"(?:^|<think>\s*)", allow_empty=True)
    assert repr(tool).endswith("max_hold=1024, shortest=True)")
    assert repr(think) == r"rx('(?:^|<think>\\s*)', allow_empty=True)"
    text = "I will call it.<|channel|>commentary to=functions.f x<|message|>{}<|message|>"
    rules = stop_rules_any(["<|end|>", tool, think])
    for include in (False, True):
        matcher = make_stop_matcher(rules, include_stop=include)
        out = "".join(matcher.feed(ch) for ch in text) + matcher.flush()
        first = text.index("<|message|>") + len("<|message|>")
        assert out == (text[:first] if include else "I will call it.")
        stop = matcher.stop_string
        assert stop is not None and not isinstance(stop, str)
        assert stop.text == text[15:first]
    matcher = make_stop_matcher(rules, include_stop=True)
    assert matcher.feed("<think>") == "" and not matcher.stopped  # "\\s*" may still extend it
    assert matcher.feed(" \n") == "" and not matcher.stopped
    assert matcher.feed("x") == "<think> \n" and matcher.stopped
    replacer = make_replacer(replace_rules_any([(tool, "[call]"), (think, "[think]")]))
    out = "".join(replacer.feed(ch) for ch in "a<think> b" + text) + replacer.flush()
    assert out == "a[think]bI will call it.[call]{}<|message|>"
    with pytest.raises(ValueError, match="empty string"):
        rx(r"(?:^|<think>)")
    with pytest.raises(ValueError, match="only the empty string"):
        rx(r"\A", allow_empty=True)
    with pytest.raises(ValueError, match="shortest must be a bool"):
        rx("a", shortest="yes")  # type: ignore[arg-type]


# -- runs that share a future ----------------------------------------------------------------------

SPREADING = st.sampled_from(
    [
        r"[^<]*<a>",
        r"(?:<m>)?[^<]*<t>",
        r".*b",
        r"\w+c",
        r"a*ab",
        r"[ab]*?b",
        r"(?:x|[^<x])+<",  # unambiguous: the `re` reference backtracks exponentially on (?:x|[^<])+
        r"\s*<a>",
        r"x|xxxxb",
        r"[^<x]*<a>",
    ]
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    st.lists(st.tuples(SPREADING | patterns, st.booleans(), st.integers(1, 9)), min_size=1, max_size=3),
    st.lists(
        st.sampled_from(["x", "xxx", "a", "b", "c", " ", "<", "<a>", "<t>", "<m>", "_"]), max_size=16
    ).map("".join),
    st.lists(st.integers(0, 40), max_size=6),
)
def test_runs_started_everywhere_match_the_reference(
    rules_modes: list[tuple[str, bool, int]], text: str, cuts: list[int]
) -> None:
    """Patterns a run can start at (almost) every character of: runs in one state share a future
    and are stepped once (the later ones follow the earliest), whatever the holds and modes."""
    sources = [s for s, _, _ in rules_modes]
    modes = [m for _, m, _ in rules_modes]
    holds = [h for _, _, h in rules_modes]
    rules = make_mode_rules(sources, re.M, shortest=modes, max_hold=holds, allow_empty=True)
    assume(rules is not None)
    assert rules is not None
    expected = find_all_leftmost_longest(rules.sources, text, shortest=modes, max_hold=holds)
    found, released = stream(rules, text, cuts)
    assert found == expected
    one_by_one = stream(rules, text, range(len(text)))[1]
    bounds = [*sorted(set(c for c in cuts if 0 < c < len(text))), len(text)]
    assert released == [one_by_one[b - 1] for b in bounds] if text else True


def _per_char(rules: RegexRules, text: str, follow: bool) -> tuple[list[Triple], list[int]]:
    scanner = RegexScanner(rules)
    scanner._follow = follow
    found: list[Triple] = []
    released = []
    for ch in text:
        result = scanner.feed(ch)
        found += [(m.start, m.end, m.rule) for m in result.matches]
        released.append(result.released)
    found += [(m.start, m.end, m.rule) for m in scanner.flush().matches]
    return found, released


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    st.lists(st.tuples(SPREADING | patterns, st.booleans(), st.integers(1, 12)), min_size=1, max_size=3),
    st.lists(st.sampled_from(["x", "xxx", "a", "b", "<", "<a>", "<t>", "<m>", "\n"]), max_size=30).map(
        "".join
    ),
)
def test_following_runs_change_nothing_but_the_cost(
    rules_modes: list[tuple[str, bool, int]], text: str
) -> None:
    """Stepping runs of one state as one gives the same matches, released after every character,
    as stepping each run on its own (the engine's plain definition)."""
    sources = [s for s, _, _ in rules_modes]
    rules = make_mode_rules(
        sources,
        re.M,
        shortest=[m for _, m, _ in rules_modes],
        max_hold=[h for _, _, h in rules_modes],
        allow_empty=True,
    )
    assume(rules is not None)
    assert rules is not None
    assert _per_char(rules, text, True) == _per_char(rules, text, False)


def test_runs_in_one_state_cost_one_step() -> None:
    """``[^<]*<a>`` can start at every character: the runs all share one state and are stepped
    as one, so plain text costs a few steps per character, not one per live run."""
    rules = RegexRules([r"(?:<m>)?[^<]*<t>", "<e>"], max_hold=4096)
    scanner = RegexScanner(rules)
    text = "x" * 50_000
    for i in range(0, len(text), 7):
        scanner.feed(text[i : i + 7])
    assert scanner.steps <= 3 * len(text)
    assert len(scanner.held) == 4096  # held for the earliest start the hold allows, no more
    found = scanner.feed("<t>").matches
    assert [(m.start, m.end) for m in found] == [(len(text) - 4093, len(text) + 3)]


def test_runs_following_a_covered_run_go_on_past_the_match() -> None:
    """The runs at 1..4 follow one another (one state); the match [0, 2) is decided at 4 and covers
    the run at 1 only: the one at 2 is the earliest left, and it matches."""
    rules = RegexRules(["qz|qzzzw", "[^<q]*<a>"])
    text = "qzzzv<a>"
    expected = [(0, 2, 0), (2, 8, 1)]
    assert find_all_leftmost_longest(rules.sources, text) == expected
    assert _per_char(rules, text, True) == _per_char(rules, text, False)
    assert _per_char(rules, text, True)[0] == expected
