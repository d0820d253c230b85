"""``route``: channels split exactly, whatever the chunking, with every id in one segment."""

from __future__ import annotations

from typing import Any

import pytest
import reactivex as rx
from hypothesis import given
from hypothesis import strategies as st
from reactivex import operators as ops

from rxstream import FinishReason, FinishRecorder, Piece
from rxstream.channels import (
    PRESETS,
    Router,
    RouteSpec,
    Segment,
    SpecialToken,
    merge_chunks,
    preset,
    route_spec,
    route_text,
)
from rxstream.operators import channels, detokenize, replace, route, stop
from rxstream.testing import MarbleTest
from rxstream.testing.tokenizers import bytelevel
from tests.channels import recorded

THINK_TOOL = route_spec({"reasoning": ("<think>", "</think>"), "tool_call": ("<tool_call>", "</tool_call>")})


def stream(spec: Any, chunks: list[str], prompt: str = "") -> list[Segment]:
    r = Router(spec, prompt=prompt)
    out: list[Segment] = []
    for c in chunks:
        out += r.feed(c)
    return out + r.finish()


def channel_text(segs: list[Segment], channel: str) -> str:
    return "".join(s.text for s in segs if s.channel == channel and s.event == "chunk")


def splits(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    parts, last = [], 0
    for p in points:
        parts.append(text[last:p])
        last = p
    parts.append(text[last:])
    return parts


# -- recorded outputs of each family --------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(recorded.ALL))
def test_recorded_outputs_route_the_same_per_char_per_chunk_and_whole(name: str) -> None:
    text, prompt = recorded.ALL[name]
    spec = preset(recorded.preset_of(name))
    whole = route_text(text, spec, prompt=prompt)
    per_char = stream(spec, list(text), prompt)
    assert merge_chunks(per_char) == whole
    assert "".join(s.text for s in per_char) == text  # nothing lost, nothing added
    for size in (2, 3, 7, 16):
        chunks = [text[i : i + size] for i in range(0, len(text), size)]
        assert merge_chunks(stream(spec, chunks, prompt)) == whole


def test_qwen3_channels() -> None:
    segs = route_text(recorded.QWEN3, preset("qwen3"))
    assert channel_text(segs, "reasoning").startswith("\nThe user wants")
    assert "(not </thinking>)" in channel_text(segs, "reasoning")  # a lookalike is not a close
    assert channel_text(segs, "content") == "\n\nLet me check both cities.\n\n\n"
    calls = [s for s in segs if s.channel == "tool_call" and s.event == "chunk"]
    assert [s.region for s in calls] == [0, 1, 2]
    assert calls[2].text == '\n{"name": "get_time", "arguments": {}}\n'
    assert not [s for s in segs if s.event == "malformed"]


def test_deepseek_prompt_opens_the_reasoning() -> None:
    segs = route_text(recorded.DEEPSEEK_R1, preset("deepseek-r1"), prompt=recorded.DEEPSEEK_R1_PROMPT)
    assert channel_text(segs, "reasoning") == "Okay, 2 + 2. That's 4, emoji 🎉 fine.\n"
    assert channel_text(segs, "content") == "\n\nThe answer is **4**."
    # without the prompt the close has no open: reported, the text is still delivered
    bare = route_text(recorded.DEEPSEEK_R1, preset("deepseek-r1"))
    bad = [s for s in bare if s.event == "malformed"]
    assert [s.text for s in bad] == ["</think>"] and "none is open" in bad[0].reason
    assert "".join(s.text for s in bare) == recorded.DEEPSEEK_R1


def test_harmony_tool_call_name_is_captured() -> None:
    segs = route_text(recorded.HARMONY, preset("harmony"))
    opens = [s for s in segs if s.event == "open"]
    assert [s.channel for s in opens] == ["reasoning", "tool_call"]
    assert opens[1].captures == {"name": "get_weather"}
    assert channel_text(segs, "tool_call") == '{"location": "San Francisco", "unit": "c"}'
    final = route_text(recorded.HARMONY_FINAL, preset("harmony"))
    assert channel_text(final, "content") == "Hello! How can I help?"
    assert channel_text(final, "other") == ""


def test_mistral_tool_calls_run_to_the_end() -> None:
    segs = route_text(recorded.MISTRAL, preset("mistral"))
    assert channel_text(segs, "content") == "Checking now."
    assert channel_text(segs, "tool_call").startswith('[{"name": "get_price"')
    # [TOOL_CALLS] is closed by </s>, the end-of-sequence token a generator stops at without
    # emitting it: the end of the stream closes the region (not malformed)
    assert segs[-1] == Segment("tool_call", "close", "", None, None, 0)
    assert not [s for s in segs if s.event == "malformed"]


def test_an_unclosed_region_is_malformed_unless_the_end_closes_it() -> None:
    segs = route_text("<think>still thinking", preset("qwen3"))
    assert segs[-1].event == "malformed" and "not closed" in segs[-1].reason
    closed = route_text("<|channel|>final<|message|>Hello", preset("harmony"))
    assert closed[-1] == Segment("content", "close", "", None, None, 0)


# -- properties -----------------------------------------------------------------------------------

PIECES = [
    "<think>",
    "</think>",
    "<th",
    "ink>",
    "</",
    "<tool_call>",
    "</tool_call>",
    "<",
    ">",
    "a",
    " ",
    "é",
    "t",
]


@given(st.lists(st.sampled_from(PIECES), max_size=30), st.lists(st.integers(0, 400), max_size=12))
def test_chunking_never_changes_the_result(parts: list[str], cuts: list[int]) -> None:
    text = "".join(parts)
    whole = route_text(text, THINK_TOOL)
    segs = stream(THINK_TOOL, splits(text, cuts))
    assert merge_chunks(segs) == whole
    assert "".join(s.text for s in segs) == text


@given(st.lists(st.sampled_from(PIECES), max_size=30), st.lists(st.integers(0, 400), max_size=12))
def test_held_text_is_only_a_possible_delimiter(parts: list[str], cuts: list[int]) -> None:
    """Text goes out as soon as no delimiter can claim it: what is held is a proper prefix of a
    delimiter watched in the current state (so never longer than the longest one minus 1)."""
    text = "".join(parts)
    r = Router(THINK_TOOL)
    longest = max(len(d) for reg in THINK_TOOL.regions for d in (*reg.open, *reg.close) if isinstance(d, str))
    for chunk in splits(text, cuts):
        r.feed(chunk)
        held = r.held
        assert len(held) < longest
        if held:
            region = r.region
            watched = (
                [d for reg in THINK_TOOL.regions for d in (*reg.open, *reg.close)]
                if region is None
                else list(region.close)
            )
            assert any(isinstance(d, str) and d.startswith(held) and d != held for d in watched), (
                held,
                watched,
            )


@given(st.lists(st.sampled_from(PIECES), max_size=25), st.data())
def test_every_id_is_in_exactly_one_segment(parts: list[str], data: st.DataObject) -> None:
    tok = _bytelevel()
    text = "".join(parts)
    ids = tok.encode(text).ids
    group = data.draw(st.integers(1, 4))
    source = rx.from_iterable([ids[i : i + group] for i in range(0, len(ids), group)])
    segs: list[Segment] = source.pipe(detokenize(tok, aligned=True), route(THINK_TOOL), ops.to_list()).run()
    got = [i for s in segs for i in (s.ids or ())]
    assert got == ids
    assert "".join(s.text for s in segs) == tok.decode(ids)
    assert merge_chunks([_strip(s) for s in segs]) == route_text(tok.decode(ids), THINK_TOOL)


def _strip(s: Segment) -> Segment:
    return Segment(s.channel, s.event, s.text, None, None, s.region, s.captures, s.reason)


_TOKS: dict[str, Any] = {}


def _bytelevel() -> Any:
    if "b" not in _TOKS:
        _TOKS["b"] = bytelevel(600, 60_000)
    return _TOKS["b"]


@pytest.mark.network  # the default model's tokenizer: pulled into the cache once
@pytest.mark.parametrize("name", sorted(recorded.ALL))
def test_real_tokenizer_per_token_and_grouped(name: str, smollm2_tokenizer: Any) -> None:
    text, prompt = recorded.ALL[name]
    spec = preset(recorded.preset_of(name))
    ids = smollm2_tokenizer.encode(text).ids
    for group in (1, 3):
        batches = [ids[i : i + group] for i in range(0, len(ids), group)]
        segs: list[Segment] = (
            rx.from_iterable(batches)
            .pipe(detokenize(smollm2_tokenizer, aligned=True), route(spec, prompt=prompt), ops.to_list())
            .run()
        )
        assert [i for s in segs for i in (s.ids or ())] == ids
        # a skipped special token (its text "") rides in an empty chunk: its id is not lost
        shown = [_strip(s) for s in segs if s.text or s.event != "chunk"]
        assert merge_chunks(shown) == route_text(smollm2_tokenizer.decode(ids), spec, prompt=prompt)


def test_logprobs_travel_with_their_ids() -> None:
    pieces = [
        Piece("ok<th", (1, 2), (-0.1, -0.2)),
        Piece("ink>x", (3,), (-0.3,)),
        Piece("</think>", (4,), (-0.4,)),
    ]
    segs: list[Segment] = rx.from_iterable(pieces).pipe(route(THINK_TOOL), ops.to_list()).run()
    assert [(s.channel, s.event, s.text, s.ids, s.logprobs) for s in segs] == [
        ("content", "chunk", "ok", (1, 2), (-0.1, -0.2)),
        ("reasoning", "open", "<think>", (3,), (-0.3,)),
        ("reasoning", "chunk", "x", (), None),
        ("reasoning", "close", "</think>", (4,), (-0.4,)),
    ]


# -- special-token delimiters ------------------------------------------------------------------------


def test_special_token_delimiters_match_the_id_not_the_spelling() -> None:
    spec = route_spec({"reasoning": (SpecialToken(7, "<think>"), SpecialToken(8, "</think>"))})
    pieces = [
        Piece("a<think>", (1, 2)),
        Piece("<think>", (7,)),
        Piece("why", (3,)),
        Piece("", (8,)),
        Piece("b", (4,)),
    ]
    segs: list[Segment] = rx.from_iterable(pieces).pipe(route(spec), ops.to_list()).run()
    assert [(s.channel, s.event, s.text, s.ids) for s in segs] == [
        ("content", "chunk", "a<think>", (1, 2)),  # spelled out of ordinary tokens: text
        ("reasoning", "open", "<think>", (7,)),
        ("reasoning", "chunk", "why", (3,)),
        ("reasoning", "close", "", (8,)),  # skipped special token: no text, its id still travels
        ("content", "chunk", "b", (4,)),
    ]
    # on plain text the token's text is the delimiter
    assert channel_text(route_text("a<think>why</think>b", spec), "reasoning") == "why"


# -- the channels' views ---------------------------------------------------------------------------


def test_a_stop_in_the_reasoning_does_not_cut_the_answer() -> None:
    """A stop string meant for the answer, applied to the answer only, ignores the reasoning."""
    text = "<think>Plan: say hi.\n\nUser: maybe</think>Hello!\n\nUser: more"
    views = rx.from_iterable(list(text)).pipe(route(THINK_TOOL), channels("reasoning", "content"))
    thoughts: list[str] = []
    answer: list[str] = []
    views["reasoning"].subscribe(thoughts.append)
    views["content"].pipe(stop("\n\nUser:")).subscribe(answer.append)
    assert "".join(thoughts) == "Plan: say hi.\n\nUser: maybe"
    assert "".join(answer) == "Hello!"


def test_stop_on_the_answer_cancels_the_generation_at_the_deciding_token() -> None:
    tok = _bytelevel()
    ids = tok.encode("<think>x</think>Yes. And more text that should never be generated.").ids
    pulled: list[int] = []
    source = rx.from_iterable(ids).pipe(ops.do_action(pulled.append))
    views = source.pipe(detokenize(tok, aligned=True), route(THINK_TOOL), channels("reasoning", "content"))
    answer: list[str] = []
    views["reasoning"].subscribe()
    views["content"].pipe(stop("."), ops.map(lambda p: p.text)).subscribe(answer.append)
    assert "".join(answer) == "Yes"
    assert tok.decode(pulled).endswith("Yes.")  # nothing generated after the deciding token


def test_replace_on_one_channel_only() -> None:
    text = "<think>secret: 42</think>The secret: 42"
    views = rx.from_iterable([text]).pipe(route(THINK_TOOL), channels("reasoning", "content"))
    r: list[str] = []
    c: list[str] = []
    views["reasoning"].subscribe(r.append)
    views["content"].pipe(replace({"42": "[hidden]"})).subscribe(c.append)
    assert "".join(r) == "secret: 42" and "".join(c) == "The secret: [hidden]"


def test_view_disposal_marbles() -> None:
    """on_dispose="any": a view leaving early disposes the upstream and completes the others;
    "all": the others go on and the upstream goes when the last one leaves."""
    vals = {
        "a": Segment("reasoning", "chunk", "r1"),
        "b": Segment("content", "chunk", "c1"),
        "c": Segment("reasoning", "chunk", "r2"),
        "d": Segment("content", "chunk", "c2"),
    }
    for policy, reasoning_result, upstream in (
        ("any", "-a-|", "^--!"),
        ("all", "-a---c---|", "^--------!"),
    ):
        m = MarbleTest()
        src = m.cold("-a-b-c-d-|", vals)
        views = src.pipe(channels("reasoning", "content", on_dispose=policy))  # type: ignore[arg-type]
        first: list[Any] = []
        views["content"].pipe(ops.take(1)).subscribe(first.append)  # leaves at its first item
        m.expect(views.segments("reasoning"), reasoning_result, {"a": vals["a"], "c": vals["c"]})
        m.expect_subscriptions(src, upstream)
        assert first == ["c1"]


def test_channel_views_share_one_subscription_and_end_together() -> None:
    m = MarbleTest()
    vals = {"a": Segment("reasoning", "chunk", "r"), "b": Segment("content", "chunk", "c")}
    src = m.cold("-a-b-|", vals)
    views = src.pipe(channels("reasoning", "content"))
    r: list[Any] = []
    c: list[Any] = []
    done: list[str] = []
    views["reasoning"].subscribe(r.append, on_completed=lambda: done.append("r"))
    views["content"].subscribe(c.append, on_completed=lambda: done.append("c"))
    m.scheduler.start()
    assert r == ["r"] and c == ["c"] and sorted(done) == ["c", "r"]
    assert len(src.subscriptions) == 1


# -- errors ------------------------------------------------------------------------------------------


def test_bad_specs_fail_at_construction_with_one_line() -> None:
    with pytest.raises(ValueError, match="unknown preset 'qwen9'; known:"):
        route("qwen9")
    with pytest.raises(ValueError, match="cannot be empty"):
        route({"reasoning": ("", "</think>")})
    with pytest.raises(TypeError, match="a delimiter is a str"):
        route({"reasoning": (3, "</think>")})
    with pytest.raises(ValueError, match=r"expected \(open, close\)"):
        route({"reasoning": "<think>"})
    with pytest.raises(TypeError, match="spec must be"):
        route(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_dispose"):
        channels(on_dispose="some")  # type: ignore[arg-type]


def test_mixed_items_go_to_on_error_and_the_finish_reports_it() -> None:
    rec = FinishRecorder()
    errors: list[Exception] = []
    rx.from_iterable(["a", Piece("b", (1,))]).pipe(route(THINK_TOOL, on_finish=rec)).subscribe(
        on_error=errors.append
    )
    assert len(errors) == 1 and "a stream of str items got Piece" in str(errors[0])
    assert rec.finish is not None and rec.finish.reason == FinishReason.ERROR


def test_presets_are_valid_specs() -> None:
    assert {"qwen3", "deepseek-r1", "mistral", "hermes", "qwen3-coder", "llama3", "harmony"} <= set(PRESETS)
    for spec in PRESETS.values():
        assert isinstance(spec, RouteSpec) and spec.channel_of("reasoning") in (None, "reasoning")
    assert preset("gpt-oss") is PRESETS["harmony"]


# -- regressions reported against other servers' parsers --------------------------------------------

QWEN = preset("qwen3")


@pytest.mark.parametrize(
    "chunks",
    [
        ["<think>a</thi", "nk>answer"],  # a closing tag split across deltas
        ["<thi", "nk>a", "</think>answer"],  # an opening tag split across deltas
        ["<think>a</think>answer"],  # both tags inside one multi-token delta
        ["<", "t", "h", "i", "n", "k", ">", "a", "<", "/", "think", ">", "answer"],  # one char each
    ],
)
def test_reasoning_never_leaks_into_the_answer(chunks: list[str]) -> None:
    segs = stream(QWEN, chunks)
    assert channel_text(segs, "reasoning") == "a"
    assert channel_text(segs, "content") == "answer"


def test_content_after_a_tool_call_is_content() -> None:
    text = 'Sure.<tool_call>{"name": "f", "arguments": {}}</tool_call>Done, see above.'
    for chunks in ([text], list(text)):
        segs = stream(QWEN, chunks)
        assert channel_text(segs, "content") == "Sure.Done, see above."
        assert channel_text(segs, "tool_call") == '{"name": "f", "arguments": {}}'


def test_a_tag_inside_the_reasoning_text_does_not_end_it() -> None:
    """Only the region's own closing delimiter ends it: an opening tag inside is text."""
    segs = route_text("<think>I could write <tool_call> here</think>ok", QWEN)
    assert channel_text(segs, "reasoning") == "I could write <tool_call> here"
    assert channel_text(segs, "content") == "ok"


def test_channel_views_keep_parity() -> None:
    """The content view's text does not depend on how the model's output was chunked."""
    from rxstream.testing import check_parity

    text, prompt = recorded.QWEN3, ""
    batch = channel_text(route_text(text, QWEN), "content")

    def content_only(source: rx.Observable[str]) -> rx.Observable[str]:
        return rx.defer(lambda _: source.pipe(route(QWEN, prompt=prompt), channels("content"))["content"])

    check_parity(
        text,
        operator=content_only,
        reference=lambda t: channel_text(route_text(t, QWEN), "content"),
        delimiters=["<think>", "</think>", "<tool_call>", "</tool_call>"],
        tokenizer=_bytelevel(),
    )
    assert batch


def test_a_long_text_fed_whole_is_routed_in_linear_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regex delimiters, a long text in one chunk: after each delimiter the router feeds the rest
    to the next state's matcher, which reads only up to its first match (it read the whole rest
    each time: quadratic, 3.6 s for 18 000 characters of harmony output)."""
    from rxstream.text import _regex

    stepped = [0]
    original = _regex.RegexScanner._scan

    def counted(self: Any, chunk: str, found: Any, until: Any = None) -> None:
        before = self.steps
        original(self, chunk, found, until)
        stepped[0] += self.steps - before

    monkeypatch.setattr(_regex.RegexScanner, "_scan", counted)
    text = recorded.HARMONY * 80
    segs = route_text(text, preset("harmony"))
    assert "".join(s.text for s in segs) == text
    assert stepped[0] < 6 * len(text), (stepped[0], len(text))
