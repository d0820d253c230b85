"""Rules compiled with the ``regex`` module: its Unicode property and POSIX classes stream exactly,
its other syntax is refused naming the construct, and its flags mean what they mean to it."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from rxstream.text import make_replacer, replace_rules_any, rx
from rxstream.text._regex_alphabet import _engine_intervals, _intervals
from rxstream.text._regex_rules import find_all_leftmost_longest

PROPERTY_RULES = [
    r"\p{Lu}\p{Ll}+",
    r"[\p{N}.]+",
    r"\P{L}+",
    r"[[:digit:]]+",
    r"(?<w>\p{Greek}+)",
    r"\pL+",
    r"(?i)\p{Lu}+",
    r"[^\p{L}\s]+",
    r"\p{Script=Han}+",
    r"(?a)\w+",
    r"(?i)straße",
]
TEXT_ALPHABET = "aZéÉß ẞ12.αΩ漢字_-\nK\u212a"


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(PROPERTY_RULES),
    st.text(alphabet=TEXT_ALPHABET, max_size=24),
    st.lists(st.integers(1, 5), min_size=1, max_size=8),
)
def test_property_classes_stream_as_the_regex_engine_matches(
    pattern: str, text: str, cuts: list[int]
) -> None:
    compiled = regex.compile(pattern)
    replacer = make_replacer(replace_rules_any([(rx(compiled), "<>")]))
    out, pos, i = [], 0, 0
    while pos < len(text):
        out.append(replacer.feed(text[pos : pos + cuts[i % len(cuts)]]))
        pos += cuts[i % len(cuts)]
        i += 1
    out.append(replacer.flush())
    expected, last = [], 0
    for start, end, _ in find_all_leftmost_longest([compiled], text):
        expected += [text[last:start], "<>"]
        last = end
    expected.append(text[last:])
    assert "".join(out) == "".join(expected)


@pytest.mark.parametrize(
    ("pattern", "named"),
    [
        (r"\X", r"\X (a grapheme cluster)"),
        (r"a\Kb", r"\K"),
        (r"(*SKIP)a", "backtracking control verb (*SKIP)"),
        (r"(?|a|b)", "branch reset"),
        (r"(a)(?1)", "recursion"),
        (r"(?P<name>a)(?&name)", "recursion"),
        (r"abc{e<=1}", "fuzzy matching {e<=1}"),
        (r"(?r)abc", "REVERSE"),
        (r"a(?V1:b)", "VERSION1"),
        (r"\mword", r"\m"),
    ],
)
def test_other_regex_syntax_is_refused_naming_the_construct(pattern: str, named: str) -> None:
    with pytest.raises(ValueError, match=r"not supported|does not support") as err:
        rx(regex.compile(pattern))
    assert named in str(err.value)
    assert "position" not in str(err.value)  # not the parser's raw text


def test_a_re_pattern_with_a_property_class_says_to_use_regex() -> None:
    with pytest.raises(ValueError, match=r"\\p\{L\} \(a Unicode property class\).*regex\.compile"):
        rx(r"\p{L}+")
    with pytest.raises(ValueError, match=r"\\X \(a grapheme cluster\).*does not support"):
        rx(r"\X")


def test_regex_flags_keep_their_meaning() -> None:
    """regex numbers ASCII as re numbers DEBUG: a regex rule with ASCII was parsed as re's DEBUG
    (printing its parse tree) and matched Unicode word characters."""
    code = (
        "import regex\n"
        "from rxstream.text import rx, replace_rules_any, make_replacer\n"
        "m = make_replacer(replace_rules_any([(rx(regex.compile(r'\\w+', regex.ASCII)), '<>')]))\n"
        "print(repr(m.feed('héllo wörld') + m.flush()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == repr(regex.sub(r"\w+", "<>", "héllo wörld", flags=regex.ASCII))


@pytest.mark.parametrize("engine", [re, regex])
@pytest.mark.parametrize("flags", [0, re.IGNORECASE, re.IGNORECASE | re.ASCII, re.ASCII])
@pytest.mark.parametrize(
    "source",
    [
        "[\\U0000004b]",
        "[\\U00000073]",
        "[\\U000000df]",
        "[\\U000003a3]",
        "[^\\U00000069]",
        "[\\U00000041-\\U0000005a\\d]",
        "[\\w\\W]",
        "[^\\s\\U00000130]",
        "[\\U000001c4-\\U000001cc]",
    ],
)
def test_leaf_sets_by_union_equal_the_engine_over_every_code_point(
    engine: object, flags: int, source: str
) -> None:
    """A class is computed as the union of its items, with folding asked of the engine only for the
    characters folding can change: the same set as running the engine over all code points."""
    _intervals.cache_clear()
    assert _intervals(engine, source, flags) == _engine_intervals(engine, source, flags)


def test_property_items_of_a_class_are_asked_once() -> None:
    _intervals.cache_clear()
    got = _intervals(regex, "[\\p{Greek}\\p{N}\\U00000078]", re.IGNORECASE)
    assert got == _engine_intervals(regex, "[\\p{Greek}\\p{N}\\U00000078]", re.IGNORECASE)
