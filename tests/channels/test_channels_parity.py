"""The parity kit (``rxstream.testing``) on this layer's operators: ``route`` on every preset's
recorded output, and ``route`` + ``tool_calls`` on every tool-call format -- per character, per
token of a real tokenizer, in multi-token groups, split inside delimiters and at random cuts;
streamed == batch, nothing retracted, nothing held at the end."""

from __future__ import annotations

import dataclasses
from itertools import count
from typing import Any

import pytest
import reactivex as rx
from hypothesis import settings
from reactivex import operators as ops

from rxstream.channels import CompiledRoute, Router, Segment, ToolCallEnd, ToolCallInvalid, route_text
from rxstream.families import family, family_names
from rxstream.operators import route, tool_calls
from rxstream.testing import check_parity
from rxstream.testing.tokenizers import bytelevel
from tests.channels import recorded

QUICK = settings(max_examples=25, derandomize=True)
TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("get_weather", "get_time", "get_price", "get_news", "write_file", "search", "a", "b")
]

_TOK: list[Any] = []


def tok() -> Any:
    if not _TOK:
        _TOK.append(bytelevel(800, 80_000))
    return _TOK[0]


def delimiters(spec: CompiledRoute) -> list[str]:
    return [d for r in spec.spec.regions for d in (*r.open, *r.close) if isinstance(d, str) and len(d) > 1]


def _spec(rec: recorded.Recording) -> Any:
    f = family(rec.family)
    return f.with_tools() if rec.with_tools else f.spec


@pytest.mark.parametrize("name", sorted(recorded.RECORDINGS))
def test_route_keeps_parity_on_every_recording(name: str) -> None:
    rec = recorded.RECORDINGS[name]
    text, prompt = rec.completion, rec.prompt
    spec = CompiledRoute(_spec(rec))
    check_parity(
        text,
        factory=lambda: Router(spec, prompt=prompt),
        reference=lambda t: route_text(t, spec, prompt=prompt),
        tokenizer=tok(),
        delimiters=delimiters(spec),
        settings=QUICK,
    )


def _events(e: Any) -> Any:
    """Events as comparable records: text-bearing ones keep a ``text`` key the kit merges."""
    kind = type(e).__name__
    if kind == "Segment":
        return {"kind": ("seg", e.channel, e.event, e.region), "text": e.text}
    if kind == "ToolCallDelta":
        return {"kind": ("delta", e.index), "text": e.text}
    fields = [f.name for f in dataclasses.fields(e) if f.name != "raw"]
    return {"kind": (kind, *[repr(getattr(e, f)) for f in fields]), "text": None}


@pytest.mark.parametrize("name", sorted(n for n, r in recorded.RECORDINGS.items() if r.expected["calls"]))
def test_route_and_tool_calls_keep_parity(name: str) -> None:
    rec = recorded.RECORDINGS[name]
    text, prompt = rec.completion, rec.prompt
    spec = _spec(rec)
    assert spec.tool_format is not None

    def pipeline(source: rx.Observable[str]) -> rx.Observable[Any]:
        ids = count()
        return source.pipe(
            route(spec, prompt=prompt),
            tool_calls(TOOLS, format=spec.tool_format, id_factory=lambda i: f"call_{next(ids)}"),
            ops.map(_events),
        )

    def batch(t: str) -> list[Any]:
        out: list[Any] = rx.from_iterable([t] if t else []).pipe(pipeline, ops.to_list()).run()
        return out

    whole = batch(text)
    ends = [e for e in whole if e["kind"][0] == "ToolCallEnd"]
    assert ends, whole  # the recorded output holds calls, parsed without error
    assert not [e for e in whole if e["kind"][0] == "ToolCallInvalid"], whole
    check_parity(
        text,
        operator=pipeline,
        reference=batch,
        tokenizer=tok(),
        delimiters=delimiters(CompiledRoute(spec)),
        settings=QUICK,
    )


def test_every_family_has_recorded_outputs() -> None:
    assert set(family_names()) <= recorded.FAMILIES, set(family_names()) - recorded.FAMILIES


@pytest.mark.parametrize("name", sorted(recorded.RECORDINGS))
def test_each_recording_gives_its_recorded_result(name: str) -> None:
    """The batch result of each recording is the one recorded with it (channel texts, calls and
    their arguments, no invalid call)."""
    rec = recorded.RECORDINGS[name]
    spec = _spec(rec)
    steps: list[Any] = [route(spec, prompt=rec.prompt)]
    if spec.tool_format is not None:
        steps.append(tool_calls(format=spec.tool_format))
    out = rx.from_iterable([rec.completion]).pipe(*steps, ops.to_list()).run()
    channels: dict[str, str] = {}
    for o in out:
        if isinstance(o, Segment) and o.event == "chunk" and o.text:
            channels[o.channel] = channels.get(o.channel, "") + o.text
    calls = [[o.name, o.arguments] for o in out if isinstance(o, ToolCallEnd)]
    invalid = len([o for o in out if isinstance(o, ToolCallInvalid)])
    assert {"channels": channels, "calls": calls, "invalid": invalid} == rec.expected
    for o in out:  # no special token leaks into a call's name or a channel's text
        if isinstance(o, ToolCallEnd):
            assert "<|" not in o.name and "<｜" not in o.name
