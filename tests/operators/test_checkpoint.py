"""Snapshot and restore (SEMANTICS §13): cut a stream at a random token, snapshot its state, build
a fresh pipeline from the same arguments, restore, feed it the rest: the output is exactly the
uninterrupted one — for every operator and the channel layer, with a real tokenizer. The state
is small and does not grow with the generation; a snapshot of another pipeline is refused."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import reactivex as rx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reactivex import operators as ops
from reactivex.subject import Subject
from tokenizers import Tokenizer

import rxstream
from rxstream import FinishRecorder
from rxstream.chat import ChatPlan
from rxstream.families import family
from rxstream.operators import (
    Checkpoint,
    SnapshotError,
    chat_pipeline,
    checkpoint,
    deltas,
    detokenize,
    hold_back,
    max_tokens,
    messages_events,
    redact,
    replace,
    responses_events,
    serialize,
    snapshots,
    stop,
    stop_on_tokens,
    text_pipeline,
)

PIECES = [
    "Hello there, ",
    "the answer is 42. ",
    "<think>let me think: 2+2</think>",
    "mail me at a.b@example.com ",
    "or x@y.io, not a.b@example.com ",
    "<NL>",
    "x##y ",
    "aaab ",
    "€ and 日本 ",
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich", "days": 3}}\n</tool_call>',
    "\n\n",
    "done.",
]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
]


@pytest.fixture(scope="module")
def tok(tiny_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(str(tiny_dir / "tokenizer.json"))


def _qwen3_plan(**kw: Any) -> ChatPlan:
    spec = family("qwen3").spec
    return ChatPlan(spec, **kw)


Stages = Callable[[Tokenizer], list[Any]]

CASES: dict[str, Stages] = {
    "detokenize": lambda t: [detokenize(t)],
    "detokenize aligned": lambda t: [detokenize(t, aligned=True)],
    "stop and replace, literal and regex": lambda t: [
        detokenize(t),
        stop(["##", rxstream.rx(r"4\d\.")]),
        replace({"<NL>": "\n", rxstream.rx(r"a+b"): "X"}),
    ],
    "hold_back, redact, deltas/snapshots": lambda t: [
        detokenize(t),
        hold_back(["<tool_call>"]),
        redact(),
        snapshots(),
        deltas(),
    ],
    "redact keyed": lambda t: [detokenize(t), redact(["email", "ipv4"], keyed=True)],
    "token operators": lambda t: [stop_on_tokens([10_000]), max_tokens(400), serialize(), detokenize(t)],
    "text_pipeline aligned": lambda t: [
        text_pipeline(t, stop=["\n\n"], replace={"<NL>": "\n"}, aligned=True, on_finish=FinishRecorder())
    ],
    "chat_pipeline: reasoning, answer, tool calls": lambda t: [
        chat_pipeline(
            t,
            _qwen3_plan(tools=tuple(TOOLS), parse_tools=True),
            stop=["done"],
            replace={"<NL>": "\n"},
            usage=lambda _u: None,
        )
    ],
    "Responses events": lambda t: [
        chat_pipeline(t, _qwen3_plan(tools=tuple(TOOLS), parse_tools=True)),
        responses_events("resp_1", created_at=1, model="m"),
    ],
    "Messages events": lambda t: [
        chat_pipeline(t, _qwen3_plan(tools=tuple(TOOLS), parse_tools=True)),
        messages_events("msg_1", "m"),
    ],
}


def _ids(tok: Tokenizer, picks: list[int]) -> list[int]:
    return tok.encode("".join(PIECES[p] for p in picks), add_special_tokens=False).ids


def _stable(item: Any) -> Any:
    """An item as comparable data, with the random part of tool-call ids left out (a restored
    call keeps its id: the state holds it; the uninterrupted run drew another)."""
    return re.sub(r"call_[0-9a-f]{24}", "call_*", repr(item))


def _open(stages: list[Any], cp: Checkpoint) -> tuple[Subject[int], list[Any], list[Any]]:
    source: Subject[int] = Subject()
    out: list[Any] = []
    ends: list[Any] = []
    source.pipe(checkpoint(cp, *stages)).subscribe(
        lambda v: out.append(_stable(v)),
        lambda e: ends.append(("error", repr(e))),
        lambda: ends.append("done"),
    )
    return source, out, ends


def _uninterrupted(stages: list[Any], ids: list[int]) -> tuple[list[Any], list[Any]]:
    src, out, ends = _open(stages, Checkpoint())
    for i in ids:
        src.on_next(i)
    src.on_completed()
    return out, ends


def _resumed(
    make: Callable[[], list[Any]], ids: list[int], cut: int, via_json: bool = True
) -> tuple[list[Any], list[Any], int] | None:
    cp = Checkpoint()
    src, first, ends = _open(make(), cp)
    for i in ids[:cut]:
        src.on_next(i)
    if ends:  # the stream ended before the cut (a stop): nothing to resume
        return None
    snap = cp.snapshot()
    if via_json:
        json.loads(snap)  # plain JSON
    src2, rest, ends2 = _open(make(), Checkpoint(restore=snap))
    for i in ids[cut:]:
        src2.on_next(i)
        if ends2:
            break
    src2.on_completed()
    return first + rest, ends2, len(snap)


@pytest.mark.parametrize("case", list(CASES))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_restored_stream_goes_on_exactly_as_the_uninterrupted_one(
    tok: Tokenizer, case: str, data: Any
) -> None:
    picks = data.draw(st.lists(st.integers(0, len(PIECES) - 1), min_size=1, max_size=6), label="pieces")
    ids = _ids(tok, picks)
    cut = data.draw(st.integers(0, len(ids)), label="cut")
    make = lambda: CASES[case](tok)  # noqa: E731
    whole, ends = _uninterrupted(make(), ids)
    resumed = _resumed(make, ids, cut)
    if resumed is None:
        return
    out, ends2, _size = resumed
    assert out == whole
    assert ends2 == ends


@pytest.mark.parametrize("case", list(CASES))
def test_every_cut_of_one_stream(tok: Tokenizer, case: str) -> None:
    ids = _ids(tok, [2, 0, 9, 3, 4, 3, 8, 5, 7, 6, 11])
    make = lambda: CASES[case](tok)  # noqa: E731
    whole, ends = _uninterrupted(make(), ids)
    for cut in range(len(ids) + 1):
        resumed = _resumed(make, ids, cut, via_json=False)
        if resumed is None:
            break
        out, ends2, _size = resumed
        assert (cut, out, ends2) == (cut, whole, ends)


def test_the_state_does_not_grow_with_the_generation(tok: Tokenizer) -> None:
    """1k, 10k and 100k tokens of prose through the chat pipeline: the snapshot's size is the
    same (the state is what is held, not what went by)."""
    prose = tok.encode("Hello there, the answer is 42. " * 8, add_special_tokens=False).ids
    sizes = []
    for n in (1_000, 10_000, 100_000):
        cp = Checkpoint()
        stages = [chat_pipeline(tok, _qwen3_plan(tools=tuple(TOOLS), parse_tools=True), stop=["##"])]
        src, out, _ = _open(stages, cp)
        fed = 0
        while fed < n:
            chunk = prose[: n - fed]
            for i in chunk:
                src.on_next(i)
            fed += len(chunk)
        sizes.append(len(cp.snapshot()))
        src.on_completed()
        assert out
    assert max(sizes) - min(sizes) <= 16, sizes  # counters' digits at most
    assert max(sizes) < 16_000, sizes


def test_a_snapshot_restores_in_another_process(tok: Tokenizer, tiny_dir: Path) -> None:
    ids = _ids(tok, [0, 2, 1, 4, 6])
    make = CASES["stop and replace, literal and regex"]
    whole, _ = _uninterrupted(make(tok), ids)
    cut = len(ids) // 2
    cp = Checkpoint()
    src, first, _ = _open(make(tok), cp)
    for i in ids[:cut]:
        src.on_next(i)
    script = f"""
import json, sys
import rxstream
from reactivex.subject import Subject
from tokenizers import Tokenizer
from rxstream.operators import Checkpoint, checkpoint, detokenize, replace, stop
tok = Tokenizer.from_file({str(tiny_dir / "tokenizer.json")!r})
rules = {{"<NL>": "\\n", rxstream.rx(r"a+b"): "X"}}
stages = [detokenize(tok), stop(["##", rxstream.rx(r"4\\d\\.")]), replace(rules)]
src = Subject()
out = []
cp = Checkpoint(restore=sys.stdin.buffer.read())
src.pipe(checkpoint(cp, *stages)).subscribe(lambda v: out.append(repr(v)))
for i in {ids[cut:]!r}:
    src.on_next(i)
src.on_completed()
print(json.dumps(out))
"""
    run = subprocess.run(
        [sys.executable, "-c", script], input=cp.snapshot(), capture_output=True, timeout=120, check=True
    )
    assert first + json.loads(run.stdout) == whole


def test_another_pipelines_snapshot_is_refused(tok: Tokenizer) -> None:
    cp = Checkpoint()
    src, _, _ = _open([detokenize(tok), stop(["##"])], cp)
    src.on_next(_ids(tok, [0])[0])
    snap = cp.snapshot()
    errors: list[Exception] = []
    other: Subject[int] = Subject()
    other.pipe(checkpoint(Checkpoint(restore=snap), detokenize(tok), replace({"a": "b"}))).subscribe(
        on_error=errors.append
    )
    assert len(errors) == 1 and isinstance(errors[0], SnapshotError) and "stage 2" in str(errors[0])
    with pytest.raises(SnapshotError, match="not a snapshot"):
        Checkpoint(restore=b"{nope")
    with pytest.raises(SnapshotError, match="this version"):
        Checkpoint(restore=b'{"v": 99, "stages": []}')
    bad = json.loads(snap)
    bad["stages"][0][0][1]["det"] = {"$o": "os:system", "i": 0, "a": {}}
    errors.clear()
    other2: Subject[int] = Subject()
    other2.pipe(checkpoint(Checkpoint(restore=json.dumps(bad)), detokenize(tok), stop(["##"]))).subscribe(
        on_error=errors.append
    )
    assert len(errors) == 1 and "outside rxstream" in str(errors[0])


def test_a_snapshot_needs_a_running_stream(tok: Tokenizer) -> None:
    cp = Checkpoint()
    with pytest.raises(SnapshotError, match="no stream is running"):
        cp.snapshot()
    rx.from_iterable(_ids(tok, [0])).pipe(checkpoint(cp, detokenize(tok)), ops.to_list()).run()
    with pytest.raises(SnapshotError, match="no stream is running"):
        cp.snapshot()
    with pytest.raises(TypeError, match="must be a Checkpoint"):
        checkpoint("cp", detokenize(tok))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one stage"):
        checkpoint(Checkpoint())
