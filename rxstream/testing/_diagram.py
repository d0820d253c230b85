"""Marble diagrams: parse them into timed events and render events back into diagrams.

Grammar: every token is one frame (one tick of virtual time).

==============  ======================================================================
token           meaning
==============  ======================================================================
``-``           a frame where nothing happens
``a``           one value: ``values["a"]`` if given, else the character itself
``[Hello ]``    one value, the literal text between the brackets (any length)
``(ab|)``       several events in the same frame, in order
``|``           completion
``#``           error (the ``error`` given, else a generic exception)
``^``           subscription point (hot sources and subscription marbles)
``!``           unsubscription / disposal point (subscription marbles)
==============  ======================================================================

Spaces are ignored, so diagrams can be aligned freely.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Event", "parse", "render", "render_subscription"]

Kind = Literal["N", "C", "E"]


@dataclass(frozen=True, slots=True)
class Event:
    """One notification at a frame: ``kind`` N (next, with ``value``), C (completed) or E (error)."""

    frame: int
    kind: Kind
    value: Any = None


def parse(
    diagram: str,
    values: Mapping[str, Any] | None = None,
    error: BaseException | None = None,
    *,
    origin: int | None = None,
) -> list[Event]:
    """Parse ``diagram`` into events. Frames count from ``^`` when present (else from 0),
    shifted by ``origin`` when given."""
    values = values or {}
    tokens = _tokens(diagram)
    caret = next((i for i, t in enumerate(tokens) if t == ["^"]), None)
    zero = caret if caret is not None else 0
    if origin is not None:
        zero -= origin
    events: list[Event] = []
    for frame, group in enumerate(tokens):
        for tok in group:
            if tok in ("-", "^", "!"):
                continue
            if tok == "|":
                events.append(Event(frame - zero, "C"))
            elif tok == "#":
                events.append(Event(frame - zero, "E", error if error is not None else Exception("error")))
            elif tok.startswith("["):
                events.append(Event(frame - zero, "N", tok[1:-1]))
            else:
                events.append(Event(frame - zero, "N", values.get(tok, tok)))
    return events


def subscription_frames(diagram: str) -> tuple[int | None, int | None]:
    """``(subscribe_frame, unsubscribe_frame)`` of a subscription marble such as ``"^---!"``."""
    tokens = _tokens(diagram)
    sub = next((i for i, t in enumerate(tokens) if "^" in t), None)
    unsub = next((i for i, t in enumerate(tokens) if "!" in t), None)
    return sub, unsub


def _tokens(diagram: str) -> list[list[str]]:
    """Split a diagram into frames; each frame is a list of tokens (a group has several)."""
    frames: list[list[str]] = []
    group: list[str] | None = None
    i = 0
    text = diagram
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch == "[":
            end = text.find("]", i + 1)
            if end < 0:
                raise ValueError(f"marble diagram {diagram!r}: '[' at {i} is never closed")
            tok = text[i : end + 1]
            i = end + 1
        elif ch == "(":
            if group is not None:
                raise ValueError(f"marble diagram {diagram!r}: nested '(' at {i}")
            group = []
            i += 1
            continue
        elif ch == ")":
            if group is None:
                raise ValueError(f"marble diagram {diagram!r}: ')' at {i} without '('")
            frames.append(group)
            group = None
            i += 1
            continue
        else:
            tok = ch
            i += 1
        if group is not None:
            group.append(tok)
        else:
            frames.append([tok])
    if group is not None:
        raise ValueError(f"marble diagram {diagram!r}: '(' is never closed")
    return frames


def render(events: Sequence[Event], legend: dict[str, Any], *, until: int | None = None) -> str:
    """Render ``events`` as a diagram, naming values through ``legend`` (name -> value).

    Values not in the legend are written as ``[text]`` (strings) or get a new letter that is
    added to ``legend``. Frames before 0 are not drawn.
    """
    if not events:
        return "-" * ((until or 0) + 1)
    last = max(max(e.frame for e in events), until or 0)
    by_frame: dict[int, list[str]] = {}
    for e in events:
        by_frame.setdefault(e.frame, []).append(_token(e, legend))
    out = []
    for frame in range(min(0, min(by_frame)), last + 1):
        toks = by_frame.get(frame)
        if not toks:
            out.append("-")
        elif len(toks) == 1:
            out.append(toks[0])
        else:
            out.append("(" + "".join(toks) + ")")
    return "".join(out)


def render_subscription(sub: int | None, unsub: int | None) -> str:
    """Render a subscription as ``^---!`` (frames counted from 0)."""
    if sub is None:
        return "(never subscribed)"
    marks = ["-"] * (max(sub, unsub if unsub is not None else sub) + 1)
    marks[sub] = "^"
    if unsub is not None:
        marks[unsub] = "(^!)" if unsub == sub else "!"
    return "".join(marks)


def _token(e: Event, legend: dict[str, Any]) -> str:
    if e.kind == "C":
        return "|"
    if e.kind == "E":
        return "#"
    for name, value in legend.items():
        if type(value) is type(e.value) and value == e.value:
            return name
    v = e.value
    if isinstance(v, str) and len(v) == 1 and v not in "-|#^!()[] " and v not in legend:
        return v
    if isinstance(v, str) and "]" not in v and "[" not in v and v.isprintable():
        return f"[{v}]"
    for name in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA":
        if name not in legend:
            legend[name] = v
            return name
    return "?"
