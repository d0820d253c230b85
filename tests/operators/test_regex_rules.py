"""Regular-expression rules beside literal ones in ``replace``, ``hold_back`` and ``stop`` (SEMANTICS §7)."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
import reactivex as rx_
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops

from rxstream import Finish, FinishReason, FinishRecorder, HoldLimitError, Piece, RegexStop, rx
from rxstream.operators import hold_back, replace, stop
from rxstream.testing import MarbleTest
from rxstream.text import ReplaceRules, StopRules, replace_rules_any, stop_rules_any
from tests.operators.test_operator_properties import chunked, run_steps
from tests.reference import batch_replace_mixed, batch_stop_mixed, mixed_matches

ALPHA = "ab<>|\n "
texts = st.text(alphabet=ALPHA, max_size=40)
REGEXES = [
    r"a+",
    r"<[ab]*>",
    r"ab|abab",
    r"a.b",
    r"\n\s*b",
    r"(?:ab)+?",
    r"b{2,3}",
    r"[^<\n]+>",
    r"<\|?",
    r"(a|b)b?",
]
literals = st.text(alphabet=ALPHA, min_size=1, max_size=4)
mixed_rule = st.one_of(literals, st.sampled_from(REGEXES).map(rx))
mixed_rules = st.lists(mixed_rule, min_size=1, max_size=5).filter(
    lambda rules: any(not isinstance(r, str) for r in rules)
)
replacement = st.text(alphabet="XY", max_size=3)


def run(op: Any, chunks: list[Any]) -> list[Any]:
    out: list[Any] = rx_.from_iterable(chunks).pipe(op, ops.to_list()).run()
    return out


# -- batch equivalence and chunking invariance -------------------------------------------------
@settings(max_examples=250, deadline=None)
@given(chunked(texts), mixed_rules, st.lists(replacement, min_size=5, max_size=5))
def test_replace_mixed_rules_equal_batch_under_any_chunking(
    chunks: list[str], rules: list[Any], reps: list[str]
) -> None:
    pairs = list(zip(rules, reps, strict=False))
    text = "".join(chunks)
    expected = batch_replace_mixed(text, pairs)
    assert "".join(run(replace(pairs), chunks)) == expected
    assert "".join(run(replace(pairs), list(text))) == expected
    assert "" not in run(replace(pairs), chunks)


@settings(max_examples=250, deadline=None)
@given(chunked(texts), mixed_rules, st.booleans())
def test_stop_mixed_rules_equal_batch_under_any_chunking(
    chunks: list[str], rules: list[Any], include: bool
) -> None:
    text = "".join(chunks)
    expected, rule, matched = batch_stop_mixed(text, rules, include)
    for pieces in (chunks, list(text)):
        rec = FinishRecorder()
        assert "".join(run(stop(rules, include, on_finish=rec), pieces)) == expected
        assert rec.finish is not None
        if rule is None:
            assert rec.finish.reason is FinishReason.EOS
        elif isinstance(rule, str):
            assert rec.finish == Finish(FinishReason.STOP, stop=rule)
        else:
            assert rec.finish == Finish(FinishReason.STOP, stop=RegexStop(rule.source, matched or ""))


@settings(max_examples=200, deadline=None)
@given(chunked(texts), mixed_rules)
def test_hold_back_mixed_rules_is_identity(chunks: list[str], rules: list[Any]) -> None:
    assert "".join(run(hold_back(rules), chunks)) == "".join(chunks)


# -- minimal hold-back at the operator level (brute-force continuation oracle) ---------------------
def _continuations(alphabet: str, length: int) -> list[str]:
    return ["".join(p) for k in range(length + 1) for p in itertools.product(alphabet, repeat=k)]


SHORT = _continuations(ALPHA, 2)
LONG = _continuations(ALPHA, 4)


def _fate_fixed(rules: list[Any], text: str, r: int, conts: list[str]) -> bool:
    """Whether the matches starting before ``r`` are the same, and end by ``r``, for every continuation."""
    seen = None
    for x in conts:
        decided = [m for m in mixed_matches(text + x, rules) if m[0] < r]
        if any(m[1] > r for m in decided) or (seen is not None and decided != seen):
            return False
        seen = decided
    return True


@settings(max_examples=120, deadline=None)
@given(st.text(alphabet=ALPHA, max_size=7), st.lists(mixed_rule, min_size=1, max_size=2))
def test_hold_back_releases_exactly_the_decided_prefix(text: str, rules: list[Any]) -> None:
    if all(isinstance(r, str) for r in rules):
        rules = [*rules, rx("a+")]
    steps, _, _ = run_steps(list(text) or [""], hold_back(rules))
    emitted = len("".join(steps[-1]))
    assert _fate_fixed(rules, text, emitted, SHORT)  # sound: nothing released too early
    for r in range(emitted + 1, len(text) + 1):  # minimal: nothing longer is decided
        if _fate_fixed(rules, text, r, SHORT):
            assert not _fate_fixed(rules, text, r, LONG), (text, r, emitted)


# -- the examples ---------------------------------------------------------------------------------
KEY = "sk-" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz1bCd4fGh7jKl"  # 41 characters


def test_api_key_one_character_at_a_time_is_redacted() -> None:
    text = f"try {KEY} now"
    steps, out, _ = run_steps(list(text), replace({rx(r"sk-[A-Za-z0-9]{20,}"): "[KEY]", "<NL>": "\n"}))
    assert "".join(out) == "try [KEY] now"
    # nothing of the key ever goes out: "s" is held from the moment it arrives
    assert all("s" not in "".join(step) for step in steps[: len("try ") + len(KEY)])
    # and the key is released with the first character that cannot extend it
    assert "".join(steps[len("try ") + len(KEY)]) == "try [KEY] "


def test_back_to_back_values() -> None:
    other = "sk-" + "Z" * 24
    chunks = [c for c in re.findall(".{1,4}", f"{KEY}{other} x", re.S)]
    out = run(replace({rx(r"sk-[A-Za-z0-9]{20,}"): "[KEY]"}), chunks)
    # the first key takes the "sk" of the second (longest), and "-" ends it
    assert "".join(out) == "[KEY]-" + "Z" * 24 + " x"
    out = run(replace({rx(r"sk-[A-Za-z0-9]{20,}"): "[KEY]"}), [KEY, " ", other, "."])
    assert "".join(out) == "[KEY] [KEY]."
    emails = run(replace({rx(r"[a-z]+@[a-z]+\.com"): "[EMAIL]"}), list("a@b.comc@d.com!"))
    assert "".join(emails) == "[EMAIL]c@d.com!".replace("c@d.com", "[EMAIL]")


def test_role_marker_stop() -> None:
    rec = FinishRecorder()
    out = run(stop([rx(r"\n\s*(User|Human):")], on_finish=rec), list("Sure.\n \t Human: hi"))
    assert "".join(out) == "Sure."
    assert rec.finish == Finish(FinishReason.STOP, stop=RegexStop(r"\n\s*(User|Human):", "\n \t Human:"))


def test_literal_and_regex_share_one_leftmost_longest_order() -> None:
    # leftmost beats longest: the literal starts first
    assert run(replace({"ab": "L", rx("b+c"): "R"}), ["abbc"]) == ["LR"]
    # longest at the same start: the regex wins over the shorter literal
    assert "".join(run(replace({"ab": "L", rx("ab+"): "R"}), ["abbb!"])) == "R!"
    # a tie in length goes to the first rule in the list
    assert "".join(run(replace([("ab", "L"), (rx("a."), "R")]), ["ab"])) == "L"
    assert "".join(run(replace([(rx("a."), "R"), ("ab", "L")]), ["ab"])) == "R"
    rec = FinishRecorder()
    run(stop(["ab", rx("a[bc]d")], on_finish=rec), ["xabd"])
    assert rec.finish == Finish(FinishReason.STOP, stop=RegexStop("a[bc]d", "abd"))
    # POSIX longest, unlike re: ab|abcd matches abcd
    assert "".join(run(replace({rx("ab|abcd"): "[\\g<0>]"}), ["ab", "cd ab"])) == "[abcd] [ab]"


def test_compiled_patterns_as_rules_and_group_templates() -> None:
    rules = {re.compile(r"(?P<user>\w+)@(\w+)\.com", re.I): r"\2:\g<user>", "<NL>": "\n"}
    assert "".join(run(replace(rules), ["mail bob@ex", "ample.COM<N", "L>"])) == "mail example:bob\n"
    assert (
        "".join(run(replace({rx(r"\d+"): lambda m: str(int(m.group()) * 2)}), list("a 21 b 5")))
        == "a 42 b 10"
    )
    # a literal replacement is not a template, even beside regex rules
    assert "".join(run(replace({"x": r"\1", rx("y+"): "Y"}), ["xyy"])) == r"\1Y"


def test_literal_only_rules_keep_the_literal_engine() -> None:
    assert isinstance(replace_rules_any({"a": "b", "c": "d"}), ReplaceRules)
    assert isinstance(stop_rules_any(["a", "b"]), StopRules)
    assert isinstance(stop_rules_any("a"), StopRules)
    assert not isinstance(replace_rules_any({"a": "b", rx("c"): "d"}), ReplaceRules)
    assert not isinstance(stop_rules_any(rx("c")), StopRules)


# -- timing ---------------------------------------------------------------------------------------
def test_regex_stop_marble_emission_and_upstream_disposal() -> None:
    m = MarbleTest()
    rec = FinishRecorder()
    src = m.cold("-a-b-c-d-|", {"a": "Hi", "b": "!\n ", "c": " User: x", "d": "more"})
    m.expect(src.pipe(stop([rx(r"\n\s*(?:User|Human):")], on_finish=rec)), "-a-b-|", {"a": "Hi", "b": "!"})
    m.expect_subscriptions(src, "^----!")
    assert rec.finish == Finish(FinishReason.STOP, stop=RegexStop(r"\n\s*(?:User|Human):", "\n  User:"))


def test_regex_replace_marble_waits_only_while_a_longer_match_is_possible() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-c-|", {"a": "x 12", "b": "3", "c": " y"})
    m.expect(src.pipe(replace({rx(r"\d+"): "#"})), "-a---c-|", {"a": "x ", "c": "# y"})


def test_regex_stop_decides_at_the_character_that_ends_the_match() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-c-|", {"a": "ok <", "b": "end", "c": "> more"})
    m.expect(src.pipe(stop([rx("<end>"), "<e"])), "-a---|", {"a": "ok "})
    m.expect_subscriptions(src, "^----!")


# -- Piece alignment ------------------------------------------------------------------------------
def test_piece_alignment_with_a_regex_stop() -> None:
    pieces = [
        Piece("Hi", (1,)),
        Piece("!\n", (2,)),
        Piece("  Hu", (3,)),
        Piece("man: x", (4,)),
        Piece("y", (5,)),
    ]
    rec = FinishRecorder()
    out = run(stop([rx(r"\n\s*(?:User|Human):")], on_finish=rec), pieces)
    assert "".join(p.text for p in out) == "Hi!"
    assert [i for p in out for i in p.ids] == [1]
    assert rec.finish is not None and rec.finish.reason is FinishReason.STOP
    assert rec.finish.dropped == (2, 3, 4)
    assert rec.finish.stop == RegexStop(r"\n\s*(?:User|Human):", "\n  Human:")


def test_piece_alignment_with_regex_replace() -> None:
    pieces = [Piece("a sk-", (1,), (-0.1,)), Piece("A" * 20, (2,), (-0.2,)), Piece(" b", (3,), (-0.3,))]
    out = run(replace({rx(r"sk-[A-Za-z0-9]{20,}"): "[KEY]"}), pieces)
    # id 1's text ("a sk-") is complete only with the key: its id travels with "[KEY]"
    assert out == [Piece("a ", (), ()), Piece("[KEY] b", (1, 2, 3), (-0.1, -0.2, -0.3))]


# -- the hold limit -------------------------------------------------------------------------------
def test_hold_limit_release_gives_the_rule_up() -> None:
    out = run(replace({rx(r"<[^>]*>", max_hold=6): "T"}), list("<ab> <abcdefgh> x"))
    assert "".join(out) == "T <abcdefgh> x"


def test_hold_limit_error_goes_to_on_error() -> None:
    rec = FinishRecorder()
    errors: list[Exception] = []
    rx_.from_iterable(list("<abcdefgh>")).pipe(
        stop([rx(r"<[^>]*>", max_hold=6, on_hold_limit="error")], on_finish=rec)
    ).subscribe(on_error=errors.append)
    assert len(errors) == 1 and isinstance(errors[0], HoldLimitError)
    assert "max_hold=6" in str(errors[0]) and "<[^>]*>" in str(errors[0])
    assert rec.finish is not None and rec.finish.reason is FinishReason.ERROR


# -- bad rules at construction --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: rx("a("), "invalid pattern"),
        (lambda: rx("a(?=b)"), "look"),
        (lambda: rx("a*"), "empty string"),
        (lambda: rx("a", max_hold=0), "max_hold"),
        (lambda: rx("a", on_hold_limit="drop"), "on_hold_limit"),  # type: ignore[arg-type]
        (lambda: rx(re.compile("a"), re.I), "flags"),
        (lambda: replace({rx(r"(a)"): r"\2"}), "replacement"),
        (lambda: stop(["x", re.compile(r"(a)\1")]), "back-reference"),
        (lambda: stop(["", rx("a")]), "non-empty"),
    ],
)
def test_bad_rules_are_named_at_construction(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


def test_bad_rule_types() -> None:
    with pytest.raises(TypeError):
        replace({rx("a"): 3})
    with pytest.raises(TypeError):
        stop([rx("a"), 3])
    with pytest.raises(TypeError):
        rx(3)  # type: ignore[arg-type]


def test_callable_returning_non_str_goes_to_on_error() -> None:
    errors: list[Exception] = []
    rx_.from_iterable(["a1b"]).pipe(replace({rx(r"\d"): lambda m: 1})).subscribe(on_error=errors.append)
    assert len(errors) == 1 and isinstance(errors[0], TypeError) and "expected str" in str(errors[0])


def test_prompt_and_skip_initial_with_regex_stops() -> None:
    rules = [rx(r"User:\s*"), "<|end|>"]
    # a stop wholly inside the prompt does not fire; one in the generation does
    assert run(stop(rules, prompt="User: hi\nBot:"), [" Sure", ". User: x"]) == [" Sure", ". "]
    # one that starts in the prompt and ends in the stream fires, and cuts at the stream's start
    rec = FinishRecorder()
    assert run(stop([rx(r"Bot:\s+Done")], prompt="Bot:", on_finish=rec), [" Do", "ne!"]) == []
    assert rec.finish == Finish(FinishReason.STOP, stop=RegexStop(r"Bot:\s+Done", "Bot: Done"))
    # skip_initial: the first item is output, and its own matches do not fire
    out = run(stop(rules, skip_initial=True), ["User: hi\n", "ok User: more"])
    assert "".join(out) == "User: hi\nok "


@settings(max_examples=150, deadline=None)
@given(chunked(texts), mixed_rules, st.booleans(), st.booleans())
def test_piece_ids_are_emitted_or_dropped_exactly_once(
    chunks: list[str], rules: list[Any], use_stop: bool, include: bool
) -> None:
    """Every id that entered comes out once, in order: in a piece or in Finish.dropped (SEMANTICS §5)."""
    pieces = [Piece(c, (i,), (-float(i),)) for i, c in enumerate(chunks)]
    rec = FinishRecorder()
    op = stop(rules, include, on_finish=rec) if use_stop else replace({r: "X" for r in rules}, on_finish=rec)
    out = run(op, pieces)
    text = "".join(chunks)
    if use_stop:
        assert "".join(p.text for p in out) == batch_stop_mixed(text, rules, include)[0]
    else:
        assert "".join(p.text for p in out) == batch_replace_mixed(text, [(r, "X") for r in rules])
    assert rec.finish is not None
    seen = [i for p in out for i in p.ids] + list(rec.finish.dropped)
    # a stop consumes no item after the one that decided it; every item before it is accounted for
    assert seen == list(range(len(seen)))
    if rec.finish.reason is FinishReason.EOS:
        assert seen == list(range(len(chunks))) and rec.finish.dropped == ()
