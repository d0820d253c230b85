"""Parity with openai-harmony, the harmony format's own streaming parser.

Each transcript's token ids are real: rendered by openai-harmony's ``HARMONY_GPT_OSS`` encoding
(``HarmonyEncoding.render`` per message), or encoded with tiktoken's ``o200k_harmony`` (special
tokens allowed) for the forms its renderer does not write (a recipient after the channel, a
message its successor's start ends). The ids are the assistant's part: what a model generates
after the prompt's ``<|start|>assistant``. openai-harmony's ``StreamableParser`` reads them one
at a time; rxstream reads them per token and in random groups through ``detokenize`` (special
tokens' text kept), ``route`` and ``tool_calls`` of the harmony family. Every message must come
out the same: its channel, recipient and content, with no special token in any name or content.

How the channels correspond (rxstream's channel, the recipient, the content):

* analysis, no recipient -> reasoning;
* final, and commentary without a recipient (a preamble) -> content;
* recipient ``functions.NAME`` (commentary or analysis) -> a tool call ``NAME``, its arguments
  text the content;
* any other recipient (``browser.search``, ``python``) -> reasoning, the recipient the open
  event's ``recipient`` capture.

The vocabulary is rebuilt from the npm registry (:mod:`tests.tiktoken_vocab`), hence ``network``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops

from rxstream.channels import Segment, ToolCallEnd, ToolCallInvalid, ToolCallStart
from rxstream.families import family
from rxstream.operators import detokenize, route, tool_calls
from tests.tiktoken_vocab import harmony_encoding, tiktoken_encoding

oh = pytest.importorskip("openai_harmony", reason="openai-harmony is not installed")

pytestmark = pytest.mark.network

SPEC = family("harmony").spec
Msg = tuple[str, str | None, str]
"""A message as both sides are compared: rxstream's channel, the recipient, the content."""

# ------------------------------------------------------------------ transcripts


def _m(content: str, channel: str, recipient: str | None = None, content_type: str | None = None) -> Any:
    msg = oh.Message.from_role_and_content(oh.Role.ASSISTANT, content).with_channel(channel)
    if recipient is not None:
        msg = msg.with_recipient(recipient)
    if content_type is not None:
        msg = msg.with_content_type(content_type)
    return msg


def rendered(*messages: Any, last: str | None = "<|return|>") -> Callable[[], list[int]]:
    """The messages as openai-harmony renders them, after the first ``<|start|>assistant``.
    ``last``: what ends the last message instead of what the renderer wrote (``<|return|>``, a
    final answer's end), or None to leave it unclosed (a stop token the server did not emit)."""

    def build() -> list[int]:
        enc = harmony_encoding()
        ids = [i for msg in messages for i in enc.render(msg)]
        head = enc.encode("<|start|>assistant", allowed_special="all")
        assert ids[: len(head)] == head
        ids = ids[len(head) :]
        assert enc.is_special_token(ids[-1])  # <|end|> or <|call|>
        return ids[:-1] + ([] if last is None else enc.encode(last, allowed_special="all"))

    return build


def encoded(text: str) -> Callable[[], list[int]]:
    """``text`` encoded by tiktoken's o200k_harmony, its special tokens as special ids."""
    return lambda: list(tiktoken_encoding("o200k_harmony").encode(text, allowed_special="all"))


WEATHER = '{"location": "Tokyo", "unit": "celsius"}'
MIXED = "Ça marche : 東京は 22°C ☀️ — a < b | c, 👍🏽 e\u0301"

TRANSCRIPTS: dict[str, Callable[[], list[int]]] = {
    "analysis then final": rendered(
        _m("The user asks for 2+2. That is 4.", "analysis"), _m("2 + 2 = 4.", "final")
    ),
    "preamble, then a function call with <|constrain|>json": rendered(
        _m("Need the weather; call the tool.", "analysis"),
        _m("Let me check the weather in Tokyo.", "commentary"),
        _m(WEATHER, "commentary", "functions.get_weather", "<|constrain|>json"),
        last="<|call|>",
    ),
    "function call, recipient after the channel": encoded(
        f"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{WEATHER}<|call|>"
    ),
    "function call with a json content type": rendered(
        _m("{}", "commentary", "functions.list_files", "json"), last="<|call|>"
    ),
    "function call on the analysis channel": encoded(
        f"<|channel|>analysis to=functions.get_weather code<|message|>{WEATHER}<|call|>"
    ),
    "browser.search and python, then the answer": rendered(
        _m("Search first.", "analysis"),
        _m('{"query": "harmony format", "topn": 3}', "analysis", "browser.search", "code"),
        _m("Now compute.", "analysis"),
        _m("import math\nprint(math.sqrt(2))", "analysis", "python", "code"),
        _m(MIXED, "final"),
    ),
    "built-in recipient after the channel": encoded(
        '<|channel|>analysis to=browser.open code<|message|>{"id": 4, "cursor": 1}<|call|>'
    ),
    "python call left unclosed (its stop token not emitted)": rendered(
        _m("Run it.", "analysis"), _m("print('hi')", "analysis", "python", "code"), last=None
    ),
    "final left unclosed": rendered(_m("think", "analysis"), _m(MIXED, "final"), last=None),
    "analysis left unclosed": rendered(_m(f"still thinking… {MIXED}", "analysis"), last=None),
    "function call left unclosed": rendered(
        _m(WEATHER, "commentary", "functions.get_weather", "<|constrain|>json"), last=None
    ),
    "two calls, a preamble and an answer": rendered(
        _m("Two lookups.", "commentary"),
        _m('{"city": "Paris"}', "commentary", "functions.get_weather", "<|constrain|>json"),
        _m('{"city": "Rome"}', "commentary", "functions.get_time", "<|constrain|>json"),
        _m("Paris is sunny; it is noon in Rome.", "final"),
    ),
    # the divergent ones (DIVERGENT below)
    "analysis ended by the next message's start": encoded(
        "<|channel|>analysis<|message|>think"
        "<|start|>assistant<|channel|>final<|message|>The answer.<|return|>"
    ),
    "final with <|constrain|>json": rendered(
        _m("ok", "analysis"), _m('{"answer": 4}', "final", content_type="<|constrain|>json")
    ),
}

DIVERGENT: dict[str, tuple[str, list[Msg], list[Msg]]] = {
    # name: (why, openai-harmony's messages, rxstream's messages)
    "analysis ended by the next message's start": (
        "openai-harmony ends a message only at <|end|>, <|call|> or <|return|>: the next message's "
        "<|start|>assistant<|channel|>final<|message|> lands in the analysis content as text "
        "(special tokens in content); rxstream ends the analysis there (a server that does not "
        "emit <|end|>) and routes the answer to content",
        [("reasoning", None, "think<|start|>assistant<|channel|>final<|message|>The answer.")],
        [("reasoning", None, "think"), ("content", None, "The answer.")],
    ),
    "final with <|constrain|>json": (
        "openai-harmony's parser does not read back its own rendering of a final message with "
        "content_type '<|constrain|>json': it reports the recipient '<|constrain|>json' (a "
        "special token in a name) and no content type; rxstream gives content without a recipient",
        [("reasoning", None, "ok"), ("content", "<|constrain|>json", '{"answer": 4}')],
        [("reasoning", None, "ok"), ("content", None, '{"answer": 4}')],
    ),
}

# ------------------------------------------------------------------ the two parsers


def harmony_messages(ids: Sequence[int]) -> list[tuple[str | None, str | None, str | None, str]]:
    """openai-harmony's messages (channel, recipient, content type, text), one token at a time."""
    parser = oh.StreamableParser(harmony_encoding(), oh.Role.ASSISTANT)
    for i in ids:
        parser.process(i)
    parser.process_eos()
    out = []
    for msg in parser.messages:
        assert msg.author.role == oh.Role.ASSISTANT
        text = "".join(c.text for c in msg.content)
        out.append((msg.channel, msg.recipient, msg.content_type, text))
    return out


def as_compared(channel: str | None, recipient: str | None, text: str) -> Msg:
    """openai-harmony's message as rxstream routes it (the module docstring's table)."""
    if recipient is not None and recipient.startswith("functions."):
        return ("tool_call", recipient, text)
    if recipient is not None and channel in ("analysis", "commentary"):
        return ("reasoning", recipient, text)
    return ({"analysis": "reasoning"}.get(channel or "", "content"), recipient, text)


def rxstream_messages(items: Sequence[int | list[int]], unclosed_ok: bool) -> list[Msg]:
    """rxstream's messages: a region's open event, or a tool call's start, begins one."""
    tokenizer = tiktoken_encoding("o200k_harmony")
    out = (
        rx.from_iterable(items)
        .pipe(
            detokenize(tokenizer, skip_special_tokens=False),
            route(SPEC),
            tool_calls(format=SPEC.tool_format),
            ops.to_list(),
        )
        .run()
    )
    messages: list[list[Any]] = []
    other, bad = [], []
    for o in out:
        if isinstance(o, Segment):
            if o.event == "open":
                messages.append([o.channel, o.captures.get("recipient"), ""])
            elif o.event == "chunk" and o.channel == SPEC.default:
                other.append(o.text)
            elif o.event == "chunk":
                assert messages and messages[-1][0] == o.channel
                messages[-1][2] += o.text
            elif o.event == "malformed" and not (unclosed_ok and o.text == "" and "not closed" in o.reason):
                bad.append(o)
        elif isinstance(o, ToolCallStart):
            assert "<|" not in o.name and "|>" not in o.name
            messages.append(["tool_call", f"functions.{o.name}", ""])
        elif isinstance(o, ToolCallEnd):
            messages[-1][2] = o.arguments_text
        elif isinstance(o, ToolCallInvalid):
            bad.append(o)
    assert (other, bad) == ([], [])
    return [(c, r, t) for c, r, t in messages]


def no_special_token(messages: Sequence[Msg]) -> bool:
    return not any("<|" in (r or "") + t or "|>" in (r or "") + t for _, r, t in messages)


def groups(ids: list[int], cuts: Sequence[int]) -> list[int | list[int]]:
    """``ids`` in groups cut at ``cuts`` (a group of one is a bare id, as a backend sends it)."""
    bounds = sorted({c % (len(ids) + 1) for c in cuts} | {0, len(ids)})
    parts = [ids[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    return [p[0] if len(p) == 1 else p for p in parts]


# ------------------------------------------------------------------ the tests

AGREED = [n for n in TRANSCRIPTS if n not in DIVERGENT]


def _param(name: str) -> Any:
    if name in DIVERGENT:
        return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=DIVERGENT[name][0]))
    return pytest.param(name)


@pytest.mark.parametrize("name", [_param(n) for n in TRANSCRIPTS])
def test_same_messages_per_token(name: str) -> None:
    ids = TRANSCRIPTS[name]()
    expected = [as_compared(c, r, t) for c, r, _, t in harmony_messages(ids)]
    assert no_special_token(expected)
    got = rxstream_messages(ids, unclosed_ok="unclosed" in name)
    assert no_special_token(got)
    assert got == expected


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(AGREED), st.lists(st.integers(0, 1000), max_size=12))
def test_same_messages_in_random_groups(name: str, cuts: list[int]) -> None:
    ids = TRANSCRIPTS[name]()
    expected = [as_compared(c, r, t) for c, r, _, t in harmony_messages(ids)]
    assert rxstream_messages(groups(ids, cuts), unclosed_ok="unclosed" in name) == expected


@pytest.mark.parametrize("name", list(DIVERGENT))
def test_divergences_are_as_documented(name: str) -> None:
    """Where the two differ, each gives exactly what DIVERGENT says (and rxstream leaks nothing)."""
    _, theirs, ours = DIVERGENT[name]
    ids = TRANSCRIPTS[name]()
    assert [as_compared(c, r, t) for c, r, _, t in harmony_messages(ids)] == theirs
    assert rxstream_messages(ids, unclosed_ok=False) == ours
    assert no_special_token(ours)


def test_content_types() -> None:
    """openai-harmony's content types, which rxstream keeps in the open event's text: the
    constraint keeps its special token there (openai-harmony renders it back from that string)."""
    got = [
        ct
        for name in (
            "preamble, then a function call with <|constrain|>json",
            "browser.search and python, then the answer",
        )
        for _, _, ct, _ in harmony_messages(TRANSCRIPTS[name]())
    ]
    assert got == [None, None, "<|constrain|>json", None, "code", None, "code", None]
