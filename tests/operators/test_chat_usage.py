"""``chat_pipeline(..., usage=...)``: every id the pipeline receives is counted in exactly one
bucket (answer, reasoning, tool calls, delimiters), for every grouping of the ids, with real
byte-level and SentencePiece-style tokenizers and routed outputs (SEMANTICS §10, "Usage adds up")."""

from __future__ import annotations

from typing import Any

import pytest
import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as rxops

from rxstream import Piece
from rxstream.channels import ToolCallEnd, ToolCallStart
from rxstream.chat import ChatPlan, TextDelta, TokenUsage
from rxstream.families import family
from rxstream.operators import chat_pipeline
from rxstream.testing.tokenizers import bytelevel, llama

WORDS = [
    "<think>",
    "</think>",
    "\n\n",
    "<tool_call>",
    '\n{"name": "f", "arguments": {"a": 1}}\n',
    "</tool_call>",
    "<|im_end|>",
    "Hello",
    " world",
    " café",
    " 🗼",
    " 中文",
    "STOP",
    "<",
    "/",
    "think",
    ">",
    " ",
]
QWEN3 = family("qwen3").spec


def tokenizer(name: str) -> Any:
    return bytelevel() if name == "bytelevel" else llama()


def items_of(ids: list[int], sizes: list[int], pieces: bool) -> list[Any]:
    """The ids in items of 1-3 ids: an int (a list for a group), or pieces with logprobs."""
    items: list[Any] = []
    k = 0
    for n in [*sizes, *([1] * len(ids))]:
        if k >= len(ids):
            break
        group = ids[k : k + n]
        k += n
        if pieces:
            items.append(Piece("", tuple(group), tuple(-0.5 for _ in group)))
        else:
            items.append(group[0] if len(group) == 1 else group)
    return items


def size(item: Any) -> int:
    return item.size if isinstance(item, Piece) else (1 if isinstance(item, int) else len(item))


def run(items: list[Any], tok: Any, plan: ChatPlan, **kwargs: Any) -> tuple[list[Any], list[TokenUsage], int]:
    """The pipeline's items, its usage reports and how many ids it received."""
    reports: list[TokenUsage] = []
    entered = [0]

    def count(item: Any) -> None:
        entered[0] += size(item)

    out: list[Any] = []
    rx.from_iterable(items).pipe(
        rxops.do_action(on_next=count), chat_pipeline(tok, plan, usage=reports.append, **kwargs)
    ).subscribe(out.append)
    return out, reports, entered[0]


def shown(out: list[Any]) -> tuple[str, str, list[Any]]:
    """What a client sees: the answer, the reasoning, the completed calls (ids aside)."""
    content = "".join(d.text for d in out if isinstance(d, TextDelta) and d.kind == "content")
    reasoning = "".join(d.text for d in out if isinstance(d, TextDelta) and d.kind == "reasoning")
    calls = [(e.name, e.arguments) for e in out if isinstance(e, ToolCallEnd)]
    return content, reasoning, calls


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(WORDS), max_size=16),
    st.lists(st.integers(1, 3), max_size=40),
    st.sampled_from(["bytelevel", "llama"]),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_the_buckets_add_up_to_the_ids_for_every_grouping(
    words: list[str], sizes: list[int], name: str, logprobs: bool, parallel: bool, stops: bool
) -> None:
    tok = tokenizer(name)
    ids = tok.encode("".join(words), add_special_tokens=False).ids
    plan = ChatPlan(QWEN3, parse_tools=True, parallel_tool_calls=parallel, logprobs=logprobs)
    stop = ["STOP"] if stops else []
    out, reports, entered = run(items_of(ids, sizes, logprobs), tok, plan, stop=stop)
    assert len(reports) == 1
    assert reports[0].total == entered
    if not stops and parallel:
        assert entered == len(ids)
    # asking for usage changes nothing a client sees
    plain: list[Any] = []
    rx.from_iterable(items_of(ids, sizes, logprobs)).pipe(chat_pipeline(tok, plan, stop=stop)).subscribe(
        plain.append
    )
    assert shown(out) == shown(plain)
    if logprobs:  # a delta's tokens are those it holds whole: never more than its bucket
        for kind, bucket in (("content", reports[0].content), ("reasoning", reports[0].reasoning)):
            whole = sum(d.piece.size for d in out if isinstance(d, TextDelta) and d.kind == kind and d.piece)
            assert whole <= bucket
    else:
        assert all(d.piece is None and d.text for d in out if isinstance(d, TextDelta))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(WORDS), max_size=16),
    st.lists(st.integers(1, 3), max_size=40),
    st.sampled_from(["bytelevel", "llama"]),
)
def test_a_complete_streams_buckets_do_not_depend_on_the_grouping(
    words: list[str], sizes: list[int], name: str
) -> None:
    tok = tokenizer(name)
    ids = tok.encode("".join(words), add_special_tokens=False).ids
    plan = ChatPlan(QWEN3, parse_tools=True)
    _, grouped, _ = run(items_of(ids, sizes, False), tok, plan)
    _, single, _ = run(list(ids), tok, plan)
    assert grouped == single


def test_each_token_counts_where_its_first_character_is() -> None:
    tok = bytelevel()
    text = '<think>\nhm.\n</think>\n\nThe answer.<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    pieces = ["<think>", "\nhm.\n", "</think>", "\n\n", "The answer.", "<tool_call>"]
    pieces += ['\n{"name": "f", "arguments": {}}\n', "</tool_call>"]
    assert "".join(pieces) == text
    ids = [tok.encode(p, add_special_tokens=False).ids for p in pieces]
    _, reports, _ = run([i for group in ids for i in group], tok, ChatPlan(QWEN3, parse_tools=True))
    n = [len(g) for g in ids]
    assert reports == [
        TokenUsage(content=n[4], reasoning=n[1], tool_calls=n[6], delimiters=n[0] + n[2] + n[3] + n[5] + n[7])
    ]


def test_without_usage_nothing_is_counted_and_a_bad_callback_is_refused() -> None:
    with pytest.raises(TypeError, match="usage"):
        chat_pipeline(bytelevel(), ChatPlan(QWEN3), usage=3)  # type: ignore[arg-type]


def test_a_tool_call_that_ends_the_generation_counts_the_held_ids_in_the_call() -> None:
    tok = bytelevel()
    ids = tok.encode(
        '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>More', add_special_tokens=False
    ).ids
    out, reports, entered = run(ids, tok, ChatPlan(QWEN3, parse_tools=True, parallel_tool_calls=False))
    assert [type(e) for e in out][-1] is ToolCallEnd
    assert sum(isinstance(e, ToolCallStart) for e in out) == 1
    assert reports[0].total == entered < len(ids)
    assert reports[0].content == 0


def test_an_error_reports_the_usage_before_it_is_passed_on() -> None:
    tok = bytelevel()
    ids = tok.encode("<think>abc</think>Hi", add_special_tokens=False).ids
    seen: list[str] = []
    source = rx.concat(rx.from_iterable(ids), rx.throw(RuntimeError("model failed")))
    source.pipe(
        chat_pipeline(tok, ChatPlan(QWEN3), usage=lambda u: seen.append(f"usage {u.total}"))
    ).subscribe(on_error=lambda e: seen.append(f"error {e}"))
    assert seen == [f"usage {len(ids)}", "error model failed"]


def test_disposal_reports_the_usage_once() -> None:
    tok = bytelevel()
    subject: rx.subject.Subject[int] = rx.subject.Subject()
    reports: list[TokenUsage] = []
    opening = tok.encode("<think>", add_special_tokens=False).ids
    held = tok.encode("</th", add_special_tokens=False).ids  # could still become "</think>"
    sub = subject.pipe(chat_pipeline(tok, ChatPlan(QWEN3), usage=reports.append)).subscribe()
    for i in [*opening, *tok.encode("abc", add_special_tokens=False).ids, *held]:
        subject.on_next(i)
    sub.dispose()
    sub.dispose()
    # the held ids count in the reasoning: the stream ended before their text was a delimiter
    assert reports == [TokenUsage(reasoning=1 + len(held), delimiters=len(opening))]


def test_a_source_that_ends_the_chat_while_it_is_subscribed_is_still_disposed() -> None:
    """The call ends the chat (``parallel_tool_calls=False``) while the source is still inside
    ``subscribe`` (as a generation on another thread may be): its subscription is disposed once
    it exists, which cancels the generation."""
    tok = bytelevel()
    ids = tok.encode(
        '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>More', add_special_tokens=False
    ).ids
    disposed: list[bool] = []

    def eager(observer: Any, _scheduler: Any = None) -> Any:
        for i in ids:
            observer.on_next(i)
        observer.on_completed()
        return rx.disposable.Disposable(lambda: disposed.append(True))

    reports: list[TokenUsage] = []
    plan = ChatPlan(QWEN3, parse_tools=True, parallel_tool_calls=False)
    out: list[Any] = []
    rx.create(eager).pipe(chat_pipeline(tok, plan, usage=reports.append)).subscribe(out.append)
    assert disposed and isinstance(out[-1], ToolCallEnd) and 0 < reports[0].total < len(ids)
