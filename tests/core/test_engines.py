"""The non-Rx engines against the plain references: batch equivalence, chunking invariance and
earliest emission after every chunk (SEMANTICS §1–§3)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rxstream.text import Replacer, StopMatcher, replace_text, stop_text
from tests.reference import batch_replace, batch_stop, replace_emitted, stop_state

ALPHA = "ab<>"
texts = st.text(alphabet=ALPHA, max_size=40)
patterns = st.text(alphabet=ALPHA, min_size=1, max_size=5)
rules_st = st.lists(st.tuples(patterns, st.text(alphabet="XYZ", max_size=3)), min_size=1, max_size=6)
stops_st = st.lists(patterns, min_size=1, max_size=5)


def chunkings(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts})
    out, last = [], 0
    for p in points:
        out.append(text[last:p])
        last = p
    out.append(text[last:])
    return out


@settings(max_examples=400, deadline=None)
@given(texts, rules_st, st.lists(st.integers(0, 40), max_size=12))
def test_replacer_matches_reference_after_every_chunk(text: str, rules, cuts) -> None:
    r = Replacer(rules)
    seen = ""
    out = ""
    for chunk in chunkings(text, cuts):
        seen += chunk
        out += r.feed(chunk)
        assert out == replace_emitted(seen, rules), (seen, rules)
    out += r.flush()
    assert out == batch_replace(text, rules)
    assert replace_text(text, rules) == out


@settings(max_examples=400, deadline=None)
@given(texts, stops_st, st.booleans(), st.lists(st.integers(0, 40), max_size=12))
def test_stop_matches_reference_after_every_chunk(text: str, stops, include, cuts) -> None:
    m = StopMatcher(stops, include)
    seen = ""
    out = ""
    for chunk in chunkings(text, cuts):
        seen += chunk
        out += m.feed(chunk)
        expected, decided = stop_state(seen, stops, include)
        assert out == expected, (seen, stops, include)
        assert m.stopped == decided
        if decided:
            break
    out += m.flush()
    assert (out, m.stop_string) == batch_stop(text if not m.stopped else seen, stops, include)
    assert stop_text(text, stops, include) == batch_stop(text, stops, include)


@settings(max_examples=300, deadline=None)
@given(texts, texts, stops_st, st.booleans(), st.lists(st.integers(0, 40), max_size=8))
def test_stop_with_prompt(prompt: str, text: str, stops, include, cuts) -> None:
    """A stop lying wholly inside the prompt never fires; output never contains prompt text."""
    m = StopMatcher(stops, include, prompt=prompt)
    out = "".join(m.feed(c) for c in chunkings(text, cuts)) + m.flush()
    full = prompt + text
    # Reference: the earliest-start (then longest) occurrence that ends after the prompt.
    best = None
    for s in stops:
        start = full.find(s)
        while start >= 0:
            if start + len(s) > len(prompt):
                if best is None or start < best[0] or (start == best[0] and len(s) > len(best[1])):
                    best = (start, s)
                break
            start = full.find(s, start + 1)
    if best is None:
        assert (out, m.stop_string) == (text, None)
    else:
        start, s = best
        end = start + len(s) if include else start
        assert (out, m.stop_string) == (full[len(prompt) : max(end, len(prompt))], s)


def test_tokflow_article_example() -> None:
    chunks = ["He", "llo", " ", "t", "h", "ere", "!<", "N", "L>m", "y ", "nam", "e ", "is", " tokfl", "ow."]
    r = Replacer({"<NL>": "\n"})
    outs = [r.feed(c) for c in chunks]
    assert outs[:9] == ["He", "llo", " ", "t", "h", "ere", "!", "", "\nm"]
    assert "".join(outs) + r.flush() == "Hello there!\nmy name is tokflow."


@pytest.mark.parametrize(
    ("rules", "error"),
    [
        ({"": "x"}, ValueError),
        ({1: "x"}, TypeError),
        ({"a": 2}, TypeError),
        ("ab", TypeError),
        (5, TypeError),
    ],
)
def test_bad_rules_raise_at_construction(rules, error) -> None:
    with pytest.raises(error, match="replace"):
        Replacer(rules)
