"""``json_patches``: a streamed JSON document as its settled values (RFC 6902 ``add``
operations). Applying them gives ``json.loads`` of the whole text for every chunking, and each
value comes at the character that settles it."""

from __future__ import annotations

import json
from typing import Any

import pytest
import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops

from rxstream.channels import ToolCallDelta, ToolCallEnd, ToolCallStart
from rxstream.chat import TextDelta
from rxstream.operators import JsonPatch, json_patches
from rxstream.testing import MarbleTest

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


def patches(chunks: list[Any], **kw: Any) -> list[JsonPatch]:
    out: list[JsonPatch] = rx.from_iterable(chunks).pipe(json_patches(**kw), ops.to_list()).run()
    return out


def rebuild(items: list[JsonPatch]) -> Any:
    doc: Any = None
    for p in items:
        doc = p.apply(doc)
    return doc


def cut(text: str, points: list[int]) -> list[str]:
    points = sorted({p % (len(text) + 1) for p in points})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True) if b > a]


@settings(max_examples=300)
@given(value=_JSON, points=st.lists(st.integers(0, 10_000), max_size=12), indent=st.sampled_from([None, 1]))
def test_applying_the_patches_gives_the_document_for_every_chunking(
    value: Any, points: list[int], indent: int | None
) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    whole = patches([text])
    chunked = patches(cut(text, points))
    assert chunked == whole  # the same operations, whatever the chunking
    assert rebuild(chunked) == json.loads(text)


@settings(max_examples=100)
@given(value=st.dictionaries(st.text(max_size=4), _JSON, min_size=1, max_size=4))
def test_each_value_comes_at_the_character_that_settles_it(value: dict[str, Any]) -> None:
    """Fed one character at a time, a value's patch comes with its last character (a number's
    with the character after it); the document rebuilt so far is always a part of the whole."""
    text = json.dumps(value)
    doc: Any = None
    final = json.loads(text)
    sink: list[JsonPatch] = []
    source: rx.subject.Subject[str] = rx.subject.Subject()
    source.pipe(json_patches()).subscribe(sink.append)
    for ch in text:
        before = len(sink)
        source.on_next(ch)
        for p in sink[before:]:
            doc = p.apply(doc)
            target: Any = final
            for part in p.pointer:
                target = target[part]
            if not isinstance(p.value, dict | list):
                assert p.value == target or p.value is target
    source.on_completed()
    assert rebuild(sink) == final


def test_marble_timing() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-c-|", {"a": '{"s": "ab', "b": 'c", "n": 4', "c": "2}"})
    values = {"x": JsonPatch((), {}), "y": JsonPatch(("s",), "abc"), "z": JsonPatch(("n",), 42)}
    m.expect(src.pipe(json_patches()), "-x-y-z-|", values)
    m.expect_subscriptions(src, "^------!")


def test_a_top_level_number_settles_at_the_end() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-|", {"a": "4", "b": "2"})
    m.expect(src.pipe(json_patches()), "-----(x|)", {"x": JsonPatch((), 42)})


def test_paths_are_json_pointers() -> None:
    items = patches(['{"a/b": {"~x": [10, {"": null}]}}'])
    assert [p.path for p in items] == ["", "/a~1b", "/a~1b/~0x", "/a~1b/~0x/0", "/a~1b/~0x/1", "/a~1b/~0x/1/"]
    assert items[3].operation() == {"op": "add", "path": "/a~1b/~0x/0", "value": 10}


def test_duplicate_keys_end_as_json_loads_does() -> None:
    text = '{"k": [1], "k": 2}'
    assert rebuild(patches([text])) == json.loads(text) == {"k": 2}


def test_chat_items_answer_and_tool_calls() -> None:
    items = [
        TextDelta("reasoning", "thinking {not json"),
        TextDelta("content", '{"ok": tr'),
        ToolCallStart(0, "call_0", "f"),
        ToolCallDelta(0, '{"city": "Pa'),
        TextDelta("content", "ue}"),
        ToolCallDelta(0, 'ris"}'),
        ToolCallEnd(0, "call_0", "f", {"city": "Paris"}, '{"city": "Paris"}'),
    ]
    out = patches(items)
    answer = rebuild([p for p in out if p.call is None])
    call = rebuild([p for p in out if p.call == 0])
    assert answer == {"ok": True} and call == {"city": "Paris"}


@pytest.mark.parametrize(
    ("chunks", "words"),
    [
        (['{"a": 1,, '], "not JSON in the answer at character 8"),
        (['{"a": '], "the answer at character 6: the text ends inside an object"),
        (["[1] 2"], "not JSON"),
    ],
)
def test_bad_json_is_an_error_naming_the_position(chunks: list[str], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        patches(chunks)


def test_nesting_is_bounded() -> None:
    with pytest.raises(ValueError, match="not JSON"):
        patches(["[" * 100], max_depth=64)
    with pytest.raises(ValueError, match="max_depth must be a positive int"):
        json_patches(max_depth=0)
    with pytest.raises(TypeError, match="expected text or tool-call deltas"):
        patches([3])
