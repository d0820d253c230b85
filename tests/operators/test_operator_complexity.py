"""Work per character of the stop automaton, counted (never timed): it must not grow with the
length of the stop strings, in either ``include_stop`` mode (SEMANTICS §3)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import reactivex as rx

from rxstream import StopMatcher, replace_text, stop_text
from rxstream.operators import hold_back, replace, stop
from rxstream.text import PatternTrie


class CountingDict(dict[str, int]):
    """A trie node's edges that count every lookup (one automaton step each)."""

    lookups = 0

    def get(self, key: str, default: Any = None) -> Any:
        CountingDict.lookups += 1
        return super().get(key, default)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[CountingDict]]:
    """Every PatternTrie built from now on counts its edge lookups."""
    original = PatternTrie.__init__

    def init(self: PatternTrie, patterns: Any) -> None:
        original(self, patterns)
        self.children = [CountingDict(edges) for edges in self.children]

    monkeypatch.setattr(PatternTrie, "__init__", init)
    CountingDict.lookups = 0
    yield CountingDict


@pytest.mark.parametrize("include", [False, True])
@pytest.mark.parametrize("length", [100, 1000])
def test_stop_work_per_char_does_not_grow_with_stop_length(
    counted: type[CountingDict], include: bool, length: int
) -> None:
    """A run of "a" against the stop "a"*L+"b": every character extends a partial match that
    fails later. Steps per character must stay bounded by a constant, not by L (nor L**2)."""
    m = StopMatcher(["a" * length + "b", "ab"], include)
    counted.lookups = 0
    chars = 3 * length
    out = "".join(m.feed("a") for _ in range(chars))
    assert counted.lookups <= 3 * chars, f"{counted.lookups / chars:.1f} steps per character"
    out += m.feed("b") + m.flush()
    assert (out, m.stop_string) == stop_text("a" * chars + "b", ["a" * length + "b", "ab"], include)


def test_stop_operator_work_is_linear_in_the_stream(counted: type[CountingDict]) -> None:
    """Through the operator, with several chunk sizes: total steps grow linearly with the text."""
    stops = ["x" * 300 + "y", "xz"]
    text = ("x" * 997 + "q") * 4
    for size in (1, 7, 64):
        for include in (False, True):
            counted.lookups = 0
            chunks = [text[i : i + size] for i in range(0, len(text), size)]
            out: list[str] = []
            rx.from_iterable(chunks).pipe(stop(stops, include)).subscribe(out.append)
            assert "".join(out) == text
            assert counted.lookups <= 3 * len(text)


@pytest.mark.parametrize("op", ["replace", "hold_back"])
@pytest.mark.parametrize("length", [50, 200])
def test_replace_work_per_char_does_not_grow_with_pattern_length(
    counted: type[CountingDict], op: str, length: int
) -> None:
    """The same run of "a" through replace / hold_back: a failed partial match must not be
    rescanned from one character after its start (that costs up to L steps per character)."""
    pattern = "a" * length + "b"
    make = (
        (lambda: replace({pattern: "X", "ab": "Y"}))
        if op == "replace"
        else (lambda: hold_back([pattern, "ab"]))
    )
    text = "a" * (3 * length) + "b" + "a" * length
    for size in (1, 5):
        counted.lookups = 0
        chunks = [text[i : i + size] for i in range(0, len(text), size)]
        out: list[str] = []
        rx.from_iterable(chunks).pipe(make()).subscribe(out.append)
        expected = text if op == "hold_back" else replace_text(text, {pattern: "X", "ab": "Y"})
        assert "".join(out) == expected
        assert counted.lookups <= 4 * len(text), f"{counted.lookups / len(text):.1f} steps per character"


def test_replace_rescans_at_most_the_text_after_each_match(counted: type[CountingDict]) -> None:
    """A short match decided only when a longer pattern sharing its start fails: the text after
    the match is scanned again once (less than the longest pattern per match)."""
    rules = {"a": "1", "a" + "b" * 20 + "c": "2"}
    text = ("a" + "b" * 19 + "x") * 50
    counted.lookups = 0
    out: list[str] = []
    rx.from_iterable(list(text)).pipe(replace(rules)).subscribe(out.append)
    assert "".join(out) == replace_text(text, rules)
    assert counted.lookups <= 4 * len(text)
