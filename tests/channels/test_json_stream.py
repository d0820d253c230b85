"""``JsonStream``: the incremental JSON tokenizer (SEMANTICS §9).

Checked against ``json.loads`` (the values), against itself fed whole (any chunking gives the
same tokens), against the text (each token reported in the feed that holds the character that
settles it, never earlier), and against a brute-force reference for errors (the first prefix
that no completion makes JSON).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rxstream.channels._json_stream import (
    ARR_END,
    ARR_START,
    ERROR,
    KEY,
    KEY_START,
    LIT_START,
    LITERAL,
    NUM_PART,
    NUM_START,
    NUMBER,
    OBJ_END,
    OBJ_START,
    STR_PART,
    STR_START,
    STRING,
    JsonEvent,
    JsonStream,
    decode_units,
)
from tests.channels.json_reference import first_dead

PARTS = (STR_PART, NUM_PART)

# -- strategies ---------------------------------------------------------------------------------
TEXT = st.text(
    alphabet=st.sampled_from([*'ab "\\/\n\t\x01\x1fé€\u2028😀𝄞', "\ud800", "\ud83d", "\ude00"]), max_size=8
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(TEXT, children, max_size=4),
    max_leaves=12,
)


@st.composite
def json_texts(draw: st.DrawFn, values: st.SearchStrategy[Any] = VALUES) -> str:
    value = draw(values)
    return json.dumps(
        value,
        ensure_ascii=draw(st.booleans()),
        indent=draw(st.sampled_from([None, 1, "\t"])),
        separators=draw(st.sampled_from([None, (",", ":"), (" , ", " : ")])),
    )


@st.composite
def cuts(draw: st.DrawFn, text: str) -> list[str]:
    points = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=12)))
    points = [p for p in points if 0 < p < len(text)]
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


# -- helpers ------------------------------------------------------------------------------------
def run(chunks: list[str], *, detail: bool = False, **kw: Any) -> list[JsonEvent]:
    stream = JsonStream(detail=detail, **kw)
    events: list[JsonEvent] = []
    for chunk in chunks:
        events += stream.feed(chunk)
    return events + stream.end()


def build(events: list[JsonEvent]) -> Any:
    """The value the events describe (a reference builder)."""
    stack: list[Any] = []
    keys: list[Any] = []
    result: list[Any] = []

    def put(value: Any) -> None:
        if not stack:
            result.append(value)
        elif isinstance(stack[-1], list):
            stack[-1].append(value)
        else:
            stack[-1][keys[-1]] = value

    for ev in events:
        k = ev[0]
        if k == OBJ_START:
            obj: dict[str, Any] = {}
            put(obj)
            stack.append(obj)
            keys.append(None)
        elif k == ARR_START:
            arr: list[Any] = []
            put(arr)
            stack.append(arr)
            keys.append(None)
        elif k in (OBJ_END, ARR_END):
            stack.pop()
            keys.pop()
        elif k == KEY:
            keys[-1] = ev[3]
        elif k in (STRING, NUMBER, LITERAL):
            put(ev[3])
        elif k == ERROR:
            raise ValueError(ev)
    assert len(result) == 1, result
    return result[0]


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def without_parts(events: list[JsonEvent]) -> list[JsonEvent]:
    return [e for e in events if e[0] not in PARTS]


def error_of(events: list[JsonEvent]) -> int | None:
    errors = [e for e in events if e[0] == ERROR]
    assert len(errors) <= 1 and (not errors or events[-1] is errors[0]), "nothing after an error"
    return errors[0][1] if errors else None


# -- values -------------------------------------------------------------------------------------
@given(json_texts())
@example('{"a": [1, 2.5, -3e2, true, false, null, "x\\n\\u00e9\\ud83d\\ude00"], "b": {}}')
@example('"\\ud800"')  # a lone surrogate, as json.loads keeps it
@example("-0")
@example("1E+400")
def test_events_build_the_value_json_loads_gives(text: str) -> None:
    assert same(build(run([text])), json.loads(text))


@given(st.data(), json_texts())
def test_any_chunking_gives_the_same_tokens(data: st.DataObject, text: str) -> None:
    chunks = data.draw(cuts(text))
    for detail in (False, True):
        whole = run([text], detail=detail)
        assert without_parts(run(chunks, detail=detail)) == without_parts(whole)
        # one feed: no parts, but for a number still open when the feed ends (the text's end)
        assert all(e[0] == NUM_PART and e[2] == len(text) for e in whole if e[0] in PARTS)


@given(st.data(), json_texts())
def test_parts_cover_each_token_that_spans_feeds(data: st.DataObject, text: str) -> None:
    chunks = data.draw(cuts(text))
    events = run(chunks, detail=True)
    parts: list[JsonEvent] = []
    for ev in events:
        k = ev[0]
        if k == STR_PART:
            start, end, units, raw, pending = ev[1:]
            assert end > start or pending
            assert text[start:end] == (raw if raw is not None else units)
            assert decode_units(text[start:end]) == units
            assert text[end : end + len(pending)] == pending and pending[:1] in ("", "\\")
            if parts:
                assert parts[-1][0] == STR_PART and parts[-1][2] == start  # contiguous
            parts.append(ev)
        elif k == NUM_PART:
            assert text[ev[1] : ev[2]] == ev[3]
            if parts:
                assert parts[-1][0] == NUM_PART and parts[-1][2] == ev[1]
            parts.append(ev)
        elif k in (KEY, STRING):
            if parts:  # the parts are exactly the contents between the quotes
                assert parts[0][1] == ev[1] + 1 and parts[-1][2] == ev[2] - 1
                raw = "".join(text[p[1] : p[2]] for p in parts)
                assert raw == (ev[4] if ev[4] is not None else ev[3])
            parts = []
        elif k == NUMBER:
            if parts:
                assert parts[0][1] == ev[1] and parts[-1][2] == ev[2]
                assert "".join(p[3] for p in parts) == ev[4]
            parts = []


@given(json_texts())
@example('{"n": 10, "m": [1.5e3, -0], "t": true}')
def test_each_token_comes_in_the_feed_of_the_character_that_settles_it(text: str) -> None:
    stream = JsonStream(detail=True)
    at: list[tuple[int, JsonEvent]] = []
    for i, c in enumerate(text):
        at += [(i, e) for e in stream.feed(c)]
    at += [(len(text), e) for e in stream.end()]
    for i, ev in at:
        k = ev[0]
        if k in (OBJ_START, OBJ_END, ARR_START, ARR_END, KEY_START, STR_START, NUM_START, LIT_START):
            assert i == ev[1]
        elif k in (KEY, STRING, LITERAL):
            assert i == ev[2] - 1  # the closing quote, the last letter
        elif k == NUMBER:
            assert i == ev[2]  # the character after it, or the end of the text
        elif k == STR_PART:
            assert ev[2] <= i + 1
        elif k == NUM_PART:
            assert ev[2] == i + 1


def test_a_number_is_not_settled_before_the_character_after_it() -> None:
    stream = JsonStream()
    assert stream.feed('{"n": 1') == [(OBJ_START, 0), (KEY, 1, 4, "n", None)]
    assert stream.feed("0") == []  # 1 became 10
    assert stream.feed("}") == [(NUMBER, 6, 8, 10, "10"), (OBJ_END, 8)]
    top = JsonStream()
    assert top.feed("42") == []
    assert top.end() == [(NUMBER, 0, 2, 42, "42")]


def test_true_false_null_are_settled_at_their_last_letter() -> None:
    stream = JsonStream()
    assert stream.feed("[tr") == [(ARR_START, 0)]
    assert stream.feed("u") == []
    assert stream.feed("e") == [(LITERAL, 1, 5, True)]


@pytest.mark.parametrize(
    "text",
    ['"\\ud83d\\ude00"', '{"k\\u00e9y": "v\\"\\\\\\/\\b\\f\\n\\r\\t"}', "[-12.5e+3, 0, 1E-2]", '"😀𝄞é"'],
)
def test_every_split_of_escapes_and_numbers_decodes_the_same(text: str) -> None:
    whole = run([text], detail=True)
    for i in range(1, len(text)):
        for j in range(i, len(text)):
            chunks = [c for c in (text[:i], text[i:j], text[j:]) if c]
            assert without_parts(run(chunks, detail=True)) == whole


def test_a_surrogate_pair_split_over_parts_shows_as_two_units() -> None:
    stream = JsonStream(detail=True)
    events = stream.feed('"a\\ud83d')
    events += stream.feed('\\ude00b"')
    parts = [e[3] for e in events if e[0] == STR_PART]
    assert parts == ["a\ud83d", "\ude00b"]  # UTF-16 units
    assert events[-1][:4] == (STRING, 0, 16, "a😀b")  # the value: one character


def test_an_escape_cut_by_a_feed_goes_to_the_next_part() -> None:
    stream = JsonStream(detail=True)
    first = stream.feed('"ab\\u00')
    assert first == [(STR_START, 0), (STR_PART, 1, 3, "ab", None, "\\u00")]
    assert stream.feed("e") == [(STR_PART, 3, 3, "", None, "\\u00e")]
    second = stream.feed('9c"')
    assert second == [(STR_PART, 3, 10, "éc", "\\u00e9c", ""), (STRING, 0, 11, "abéc", "ab\\u00e9c")]


# -- errors -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "position", "message"),
    [
        ('{"a" 1}', 5, "expected ':'"),
        ("[01]", 2, "after a leading 0"),
        ("[1.]", 3, "expected a digit after '.'"),
        ('{"a": tru}', 9, "expected 'true'"),
        ('"ab\\x"', 4, "invalid escape"),
        ('"\\u12g4"', 5, "hex digit"),
        ("[1,]", 3, "expected a value"),
        ('{"a": 1}x', 8, "after the JSON value"),
        ('"a\nb"', 2, "control character"),
        ("[-]", 2, "expected a digit after '-'"),
        ("{", 1, "ends inside an object"),
        ('{"a": "b', 8, "ends inside a string"),
        ("1e", 2, "ends inside a number"),
        ("  ", 2, "no JSON value"),
        ("{,}", 1, "expected a key or '}'"),
        ('{"a": 1,}', 8, "expected a key"),
        ("[1}", 2, "expected ',' or ']'"),
    ],
)
def test_errors_name_the_first_character_after_which_no_json_can_follow(
    text: str, position: int, message: str
) -> None:
    events = run([text])
    assert events[-1][0] == ERROR
    assert events[-1][1] == position and message in events[-1][2]
    dead = first_dead(text)
    assert (dead - 1 if dead is not None else len(text)) == position  # the brute-force reference


MUTATION_CHARS = list('{}[]":, 0123456789.-+eEtrufalsn\\u\n"x')


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(
        json_texts(
            st.recursive(
                SCALARS,
                lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text("ab", max_size=2), c, max_size=3),
                max_leaves=6,
            )
        )
    )
    for _ in range(draw(st.integers(1, 2))):
        i = draw(st.integers(0, len(text)))
        how = draw(st.sampled_from(["insert", "delete", "replace", "cut"]))
        c = draw(st.sampled_from(MUTATION_CHARS))
        if how == "insert":
            text = text[:i] + c + text[i:]
        elif how == "delete":
            text = text[:i] + text[i + 1 :]
        elif how == "replace":
            text = text[:i] + c + text[i + 1 :]
        else:
            text = text[:i]
    return text


@settings(max_examples=300)
@given(st.data(), mutated())
@example(None, "[1, 2.5e+, 3]")
@example(None, '{"a": [tru]}')
@example(None, '"\\ud83d\\u00"')
def test_error_position_is_the_first_prefix_no_completion_saves(
    data: st.DataObject | None, text: str
) -> None:
    chunks = data.draw(cuts(text)) if data is not None and text else [text]
    position = error_of(run(chunks, detail=True))
    dead = first_dead(text)
    if dead is not None:
        assert position == dead - 1, (text, position, dead)
    else:
        try:
            json.loads(text)
        except ValueError:
            assert position == len(text)  # only the end of the text was missing
        else:
            assert position is None


# -- modes and misuse ---------------------------------------------------------------------------
def test_multiple_values_one_after_another() -> None:
    events = run(['{"a": 1} [2]\n3 ', '"x"'], multiple=True)
    assert build(events[:4]) == {"a": 1}
    values = [e[3] for e in events if e[0] in (NUMBER, STRING)]
    assert values == [1, 2, 3, "x"]
    assert run(["{} ; {}"], multiple=True, separators=";")[-1] == (OBJ_END, 6)
    assert run(["{} ; {}"], multiple=True)[-1][0] == ERROR
    assert run(["  "], multiple=True) == []


def test_nothing_after_an_error_and_no_feed_after_end() -> None:
    stream = JsonStream()
    assert stream.feed("[1 2")[-1] == (ERROR, 3, "expected ',' or ']', got '2'")
    assert stream.error == (3, "expected ',' or ']', got '2'")
    assert stream.feed("]") == [] and stream.end() == []
    done = JsonStream()
    done.feed("1")
    done.end()
    with pytest.raises(ValueError, match=r"after end"):
        done.feed("2")
    with pytest.raises(ValueError, match=r"twice"):
        done.end()


def test_position_depth_count_and_complete() -> None:
    stream = JsonStream()
    stream.feed('{"a": [')
    assert (stream.position, stream.depth, stream.count, stream.complete) == (7, 2, 0, False)
    stream.feed("]}")
    assert (stream.position, stream.depth, stream.count, stream.complete) == (9, 0, 1, True)


def test_huge_integer_is_an_error_like_json_loads() -> None:
    text = "[" + "1" * 5000 + "]"
    with pytest.raises(ValueError):
        json.loads(text)
    assert error_of(run([text])) is not None
    assert error_of(run([text[:10], text[10:]])) is not None


# -- nesting ---------------------------------------------------------------------------------------
def test_nesting_past_max_depth_is_an_error_at_the_bracket() -> None:
    from rxstream.channels._json_stream import ERROR, JsonStream

    text = "[" * 5 + "]" * 5
    ok = JsonStream(max_depth=5)
    assert all(ev[0] != ERROR for ev in ok.feed(text) + ok.end())
    deep = JsonStream(max_depth=4)
    events = deep.feed(text)
    assert events[-1][0] == ERROR and events[-1][1] == 4
    assert "deeper than 4 levels" in events[-1][2]
    with pytest.raises(ValueError, match="max_depth"):
        JsonStream(max_depth=0)


def test_the_default_depth_keeps_json_loads_within_the_recursion_limit() -> None:
    from rxstream.channels._json_stream import DEFAULT_MAX_DEPTH, JsonStream

    stream = JsonStream()
    text = "[" * DEFAULT_MAX_DEPTH + "]" * DEFAULT_MAX_DEPTH
    events = stream.feed(text) + stream.end()
    assert stream.complete and len(events) == 2 * DEFAULT_MAX_DEPTH
    assert json.loads(text)  # what a consumer of the settled value does


@given(
    st.recursive(st.integers() | st.text(alphabet='a"\\[]{}', max_size=4), lambda c: st.lists(c, max_size=3))
)
def test_nesting_depth_skips_strings(value: Any) -> None:
    from rxstream.channels._json_stream import nesting_depth

    def depth(v: Any) -> int:
        return 1 + max(map(depth, v), default=0) if isinstance(v, list) else 0

    assert nesting_depth(json.dumps(value)) == depth(value)


def test_loads_bounded_refuses_deep_text_without_recursion() -> None:
    from rxstream.channels._json_stream import loads_bounded

    assert loads_bounded('{"a": [[1]]}') == {"a": [[1]]}
    with pytest.raises(ValueError, match="nested deeper than 256 levels"):
        loads_bounded("[" * 5000 + "]" * 5000)
