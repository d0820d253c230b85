"""``rxstream serve``: log-probabilities of a chat routed into reasoning, answer and tool calls --
uvicorn on a real socket, raw HTTP and the official ``openai`` client.

A scripted model replays recorded completions as SmolLM2's real token ids through a real chat
template, each id with a log-probability that names its position (``-(position + 1) / 64``,
exact in binary), so a test knows which generated token every entry is. ``content`` entries are
the answer's tokens, ``reasoning_content`` entries the reasoning's; delimiters, tool calls and the
whitespace after a region have none.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import pytest
import reactivex
from reactivex import abc
from reactivex import operators as ops
from tokenizers import Tokenizer

from rxstream import FinishCallback, Piece, SamplingParams
from rxstream.backends import OnnxModel
from rxstream.server import ServerLimits, create_app, run_in_thread
from rxstream.server._logprobs import TokenNames
from tests.scripted_model import CHATML, DEEPSEEK_R1_TEMPLATE, QWEN3_TEMPLATE, ScriptedModel

USER = [{"role": "user", "content": "What is 2 + 2?"}]
REASONING = "\nCheck ✓ the sum: 2 + 2 🦀.\n"
ANSWER = "It is 4 ✓, in Zürich too."
QWEN3_REPLY = f"<think>{REASONING}</think>\n\n{ANSWER}"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
PREFACE = "Let me check ✓.\n"
CALL_REPLY = (
    f"<think>{REASONING}</think>\n\n{PREFACE}"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call>'
)


def position_logprob(position: int) -> float:
    return -(position + 1) / 64


class LogprobModel(ScriptedModel):
    """A :class:`ScriptedModel` that also takes ``logprobs=k``: each id comes as a piece with the
    log-probability of its position and ``k`` alternatives (the id itself, then id + 1, ...)."""

    def generate(  # type: ignore[override]
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams | None = None,
        *,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        logprobs: int | None = None,
    ) -> reactivex.Observable[Any]:
        ids = super().generate(prompt_ids, params, on_finish=on_finish, scheduler=scheduler)
        if logprobs is None:
            return ids
        k = logprobs

        def piece(token: int, position: int) -> Piece:
            lp = position_logprob(position)
            top = tuple((token + j, lp - j) for j in range(k))
            return Piece("", (token,), (lp,), (top,))

        return ids.pipe(ops.map_indexed(piece))


@contextmanager
def serving(model: ScriptedModel, **kwargs: Any) -> Iterator[str]:
    app = create_app(model, model_name="scripted", limits=ServerLimits(max_concurrency=4), **kwargs)
    with run_in_thread(app) as url:
        yield url


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def whole(url: str, **body: Any) -> dict[str, Any]:
    r = httpx.post(f"{url}/v1/chat/completions", json={"messages": USER, **body}, timeout=30)
    assert r.status_code == 200, r.text
    reply: dict[str, Any] = r.json()
    return reply


def streamed(url: str, **body: Any) -> list[dict[str, Any]]:
    """The stream's chunks (one choice each), in order."""
    chunks = []
    payload = {"messages": USER, "stream": True, **body}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=payload, timeout=30) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: {"):
                chunks.append(json.loads(line[6:]))
    return chunks


def reassembled(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """What a client rebuilds from the chunks: texts, entries per channel, finish, tool calls."""
    out: dict[str, Any] = {"content": "", "reasoning": "", "entries": [], "thought_entries": [], "calls": ""}
    for chunk in chunks:
        (choice,) = chunk["choices"]
        delta = choice["delta"]
        out["content"] += delta.get("content") or ""
        out["reasoning"] += delta.get("reasoning_content") or ""
        for call in delta.get("tool_calls") or []:
            out["calls"] += call["function"]["arguments"]
        if choice["finish_reason"] is not None:
            out["finish_reason"] = choice["finish_reason"]
            assert choice["logprobs"] is None  # as OpenAI: no logprobs on the finish chunk
            continue
        logprobs = choice["logprobs"]
        assert logprobs is not None, chunk  # every other chunk carries them, as OpenAI's do
        out["entries"] += logprobs["content"]
        out["thought_entries"] += logprobs.get("reasoning_content") or []
    return out


def rebuilt(entries: list[dict[str, Any]]) -> str:
    """The text the entries' bytes make (strict: a character split across tokens must be whole)."""
    return b"".join(bytes(e["bytes"]) for e in entries).decode("utf-8")


def positions(entries: list[dict[str, Any]]) -> list[int]:
    return [round(-e["logprob"] * 64) - 1 for e in entries]


def token_spans(tokenizer: Tokenizer, text: str) -> list[tuple[int, int]]:
    """Each token of ``text``'s encoding: the characters it covers (a byte of a split character
    covers the whole character)."""
    return list(tokenizer.encode(text, add_special_tokens=False).offsets)


def covered(spans: list[tuple[int, int]], start: int, end: int) -> list[int]:
    """The positions of the tokens whose text lies whole in ``[start, end)``."""
    return [k for k, (a, b) in enumerate(spans) if start <= a and b <= end and a < b]


# -- reasoning and answer ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "reply", "reasoning_at"),
    [
        (QWEN3_TEMPLATE, QWEN3_REPLY, len("<think>")),
        (DEEPSEEK_R1_TEMPLATE, REASONING + "</think>\n\n" + ANSWER, 0),  # the prompt opens <think>
    ],
    ids=["qwen3", "deepseek-r1"],
)
def test_each_channel_gets_the_entries_of_its_own_tokens_streamed_and_not(
    smollm2_tokenizer: Tokenizer, template: str, reply: str, reasoning_at: int
) -> None:
    model = LogprobModel(smollm2_tokenizer, template, reply)
    spans = token_spans(smollm2_tokenizer, reply)
    close = reply.index("</think>")
    answer_at = reply.index(ANSWER)
    with serving(model) as url:
        body = whole(url, logprobs=True, top_logprobs=2)
        chunks = streamed(url, logprobs=True, top_logprobs=2)
    (choice,) = body["choices"]
    message, logprobs = choice["message"], choice["logprobs"]
    assert message["content"] == ANSWER and message["reasoning_content"] == REASONING
    assert set(logprobs) == {"content", "reasoning_content", "refusal"}
    content, thoughts = logprobs["content"], logprobs["reasoning_content"]
    # the bytes rebuild each channel's text exactly (✓ and 🦀 are split across tokens)
    assert rebuilt(content) == ANSWER and rebuilt(thoughts) == REASONING
    # one entry per generated token of each text, in order; delimiters and the blank line have none
    assert positions(thoughts) == covered(spans, reasoning_at, close)
    assert positions(content) == covered(spans, answer_at, len(reply))
    assert body["usage"]["completion_tokens"] == len(spans)
    assert len(spans) > len(content) + len(thoughts)  # <think>, </think>, "\n\n" left out
    names = TokenNames(smollm2_tokenizer)
    ids = smollm2_tokenizer.encode(reply, add_special_tokens=False).ids
    for entry in content + thoughts:
        token = ids[positions([entry])[0]]
        assert entry["bytes"] == names.get(token)[1] and entry["token"] == names.get(token)[0]
        assert [alt["bytes"] for alt in entry["top_logprobs"]] == [names.get(token + j)[1] for j in (0, 1)]
        assert [alt["logprob"] for alt in entry["top_logprobs"]] == [entry["logprob"], entry["logprob"] - 1]
    # streamed: the same texts and entries, each entry once, in the chunk of its text
    got = reassembled(chunks)
    assert (got["content"], got["reasoning"]) == (ANSWER, REASONING)
    assert got["entries"] == content and got["thought_entries"] == thoughts
    assert got["finish_reason"] == choice["finish_reason"] == "stop"
    for chunk in chunks:  # a chunk's entries are those of its own channel only
        (c,) = chunk["choices"]
        if c["logprobs"] is not None:
            assert not c["logprobs"]["content"] or "content" in c["delta"]
            assert not c["logprobs"]["reasoning_content"] or "reasoning_content" in c["delta"]
    # the role chunk: no entries yet (OpenAI sends {"content": [], "refusal": null} there)
    first = chunks[0]["choices"][0]
    assert first["delta"]["role"] == "assistant"
    assert first["logprobs"] == {"content": [], "reasoning_content": [], "refusal": None}


def test_the_official_client_reads_both_channels_entries(smollm2_tokenizer: Tokenizer) -> None:
    model = LogprobModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_REPLY)
    with serving(model) as url:
        reply = client(url).chat.completions.create(
            model="scripted",
            messages=USER,
            logprobs=True,
            top_logprobs=1,  # type: ignore[arg-type]
        )
        stream = client(url).chat.completions.create(
            model="scripted",
            messages=USER,
            logprobs=True,
            stream=True,  # type: ignore[arg-type]
        )
        content: list[Any] = []
        thoughts: list[Any] = []
        text = ""
        for chunk in stream:
            (c,) = chunk.choices
            text += c.delta.content or ""
            if c.logprobs is not None:
                content += c.logprobs.content or []
                thoughts += (c.logprobs.model_extra or {}).get("reasoning_content") or []
    choice = reply.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content is not None
    entries = choice.logprobs.content
    assert b"".join(bytes(e.bytes or []) for e in entries).decode() == choice.message.content == ANSWER
    assert all(len(e.top_logprobs) == 1 for e in entries)
    extra = choice.logprobs.model_extra or {}
    assert b"".join(bytes(e["bytes"]) for e in extra["reasoning_content"]).decode() == REASONING
    assert text == ANSWER
    assert b"".join(bytes(e.bytes or []) for e in content).decode() == ANSWER
    assert b"".join(bytes(e["bytes"]) for e in thoughts).decode() == REASONING
    assert [e.logprob for e in content] == [e.logprob for e in entries]


# -- stop ------------------------------------------------------------------------------------------


def same_tokens(entries: list[dict[str, Any]]) -> list[tuple[str, list[int], list[list[int]]]]:
    """Each entry's token, bytes and alternatives' bytes (its logprobs name its position)."""
    return [(e["token"], e["bytes"], [alt["bytes"] for alt in e["top_logprobs"]]) for e in entries]


@pytest.mark.parametrize("stop", ["ich", "✓,"], ids=["inside-a-token", "inside-a-split-character"])
def test_a_stop_inside_an_answer_token_keeps_the_entries_of_the_whole_tokens(
    smollm2_tokenizer: Tokenizer, stop: str
) -> None:
    """The stop string starts inside a token of the answer: the text before it is sent, that
    token (cut in part) has no entry, and the entries are the answer's tokens the text holds
    whole -- the same entries the plain pipeline gives the same answer and stop. Before ``✓``
    that includes `` \\xe2``, the token of the space and ✓'s first byte: the stop cuts ✓, so its
    bytes are not all in the text and it has no entry either. The same string inside the
    reasoning cuts nothing there."""
    reasoning = REASONING + "Zürich ✓, ich.\n"  # the stop string in the reasoning: not a stop there
    reply = f"<think>{reasoning}</think>\n\n{ANSWER}"
    model = LogprobModel(smollm2_tokenizer, QWEN3_TEMPLATE, reply)
    spans = token_spans(smollm2_tokenizer, reply)
    answer_at = reply.index(ANSWER)
    cut = reply.index(stop, answer_at)
    assert [k for k, (a, b) in enumerate(spans) if a < cut < b], "the stop must start inside a token"
    with serving(model) as url:
        body = whole(url, logprobs=True, top_logprobs=1, stop=[stop])
        got = reassembled(streamed(url, logprobs=True, top_logprobs=1, stop=[stop]))
    with serving(LogprobModel(smollm2_tokenizer, CHATML, ANSWER)) as url:  # not routed
        plain = whole(url, logprobs=True, top_logprobs=1, stop=[stop])["choices"][0]
    (choice,) = body["choices"]
    content = choice["message"]["content"]
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == stop
    assert content == reply[answer_at:cut] == plain["message"]["content"]
    assert choice["message"]["reasoning_content"] == reasoning
    entries = choice["logprobs"]["content"]
    assert same_tokens(entries) == same_tokens(plain["logprobs"]["content"])
    whole_tokens = covered(spans, answer_at, cut)  # the tokens before the cut one
    assert positions(entries) == whole_tokens
    end = spans[whole_tokens[-1]][1]  # their bytes are the text up to the cut token's
    assert rebuilt(entries) == reply[answer_at:end] and len(content) > end - answer_at
    assert rebuilt(choice["logprobs"]["reasoning_content"]) == reasoning
    assert (got["content"], got["reasoning"]) == (content, reasoning)
    assert got["entries"] == entries
    assert got["thought_entries"] == choice["logprobs"]["reasoning_content"]


# -- tokens across a delimiter -------------------------------------------------------------------------


def test_a_token_that_runs_into_a_delimiter_or_trimmed_space_has_no_entry(
    smollm2_tokenizer: Tokenizer,
) -> None:
    """SmolLM2 spells ``. </think>`` with a token `` </``: its text starts in the reasoning and
    runs into the delimiter, so no channel holds it whole and it has no entry (the reasoning's
    last space is sent without one); after the blank line the answer's `` It`` loses its space
    to the framing that is dropped, and has no entry either. Every other token has its entry."""
    reply = "<think>\nHm, fine. </think>\n\n It is 4."
    model = LogprobModel(smollm2_tokenizer, QWEN3_TEMPLATE, reply)
    spans = token_spans(smollm2_tokenizer, reply)
    assert reply[slice(*spans[9])] == " </" and reply[slice(*spans[13])] == " It"
    with serving(model) as url:
        body = whole(url, logprobs=True)
        got = reassembled(streamed(url, logprobs=True))
    (choice,) = body["choices"]
    assert choice["message"]["reasoning_content"] == "\nHm, fine. "
    assert choice["message"]["content"] == "It is 4."
    content, thoughts = choice["logprobs"]["content"], choice["logprobs"]["reasoning_content"]
    assert positions(thoughts) == [3, 4, 5, 6, 7, 8] and rebuilt(thoughts) == "\nHm, fine."
    assert positions(content) == [14, 15, 16, 17] and rebuilt(content) == " is 4."
    assert (got["entries"], got["thought_entries"]) == (content, thoughts)


# -- tool calls ------------------------------------------------------------------------------------


def test_tool_call_tokens_have_no_entries(smollm2_tokenizer: Tokenizer) -> None:
    model = LogprobModel(smollm2_tokenizer, QWEN3_TEMPLATE, CALL_REPLY)
    spans = token_spans(smollm2_tokenizer, CALL_REPLY)
    preface_at = CALL_REPLY.index(PREFACE)
    with serving(model) as url:
        body = whole(url, logprobs=True, tools=[WEATHER])
        chunks = streamed(url, logprobs=True, tools=[WEATHER])
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == PREFACE
    assert json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"]) == {"city": "Zürich"}
    content = choice["logprobs"]["content"]
    assert rebuilt(content) == PREFACE and rebuilt(choice["logprobs"]["reasoning_content"]) == REASONING
    assert positions(content) == covered(spans, preface_at, preface_at + len(PREFACE))
    got = reassembled(chunks)
    assert got["entries"] == content
    assert got["thought_entries"] == choice["logprobs"]["reasoning_content"]
    call_chunks = [c["choices"][0] for c in chunks if c["choices"][0]["delta"].get("tool_calls")]
    assert call_chunks and all(
        c["logprobs"] == {"content": [], "reasoning_content": [], "refusal": None} for c in call_chunks
    )
    assert json.loads(got["calls"]) == {"city": "Zürich"}


def test_a_route_without_reasoning_sends_no_reasoning_entries(smollm2_tokenizer: Tokenizer) -> None:
    """A tool-call route without a reasoning channel (a ChatML template: the fallback prompt,
    Hermes calls): ``logprobs`` has the answer's entries only, as OpenAI's."""
    reply = PREFACE + '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call>'
    model = LogprobModel(smollm2_tokenizer, CHATML, reply)
    with serving(model) as url:
        body = whole(url, logprobs=True, tools=[WEATHER])
        chunks = streamed(url, logprobs=True, tools=[WEATHER])
    (choice,) = body["choices"]
    assert choice["logprobs"]["refusal"] is None and set(choice["logprobs"]) == {"content", "refusal"}
    assert rebuilt(choice["logprobs"]["content"]) == choice["message"]["content"] == PREFACE
    assert chunks[0]["choices"][0]["logprobs"] == {"content": [], "refusal": None}
    assert reassembled(chunks)["entries"] == choice["logprobs"]["content"]


# -- the plain pipeline's role chunk; a real model routed --------------------------------------------


def test_the_role_chunk_of_a_plain_chat_carries_empty_logprobs(smollm2_tokenizer: Tokenizer) -> None:
    model = LogprobModel(smollm2_tokenizer, CHATML, ANSWER)
    with serving(model) as url:
        chunks = streamed(url, logprobs=True)
        plain = streamed(url)
    assert chunks[0]["choices"][0]["logprobs"] == {"content": [], "refusal": None}
    got = reassembled(chunks)
    assert got["content"] == ANSWER and rebuilt(got["entries"]) == ANSWER
    assert plain[0]["choices"][0]["logprobs"] is None  # not asked: null, as before


def test_a_real_model_routed_gives_the_same_entries_as_unrouted(model: OnnxModel) -> None:
    """The tiny model's text has no reasoning delimiters: routed by the ``qwen3`` format it is all
    answer, with the same entries as the plain pipeline gives."""
    body = {"messages": USER, "max_tokens": 24, "logprobs": True, "top_logprobs": 2, "temperature": 1.0}
    body["seed"] = 7
    replies = []
    for fmt in ("qwen3", "none"):
        with run_in_thread(create_app(model, model_name="tiny", reasoning_format=fmt)) as url:
            r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60)
            assert r.status_code == 200, r.text
            replies.append(r.json()["choices"][0])
    routed, plain = replies
    assert routed["message"]["content"] == plain["message"]["content"]
    assert routed["logprobs"]["content"] == plain["logprobs"]["content"]
    assert routed["logprobs"]["reasoning_content"] == []
    assert len(routed["logprobs"]["content"]) == 24


def test_n_routed_choices_each_get_their_own_entries(smollm2_tokenizer: Tokenizer) -> None:
    model = LogprobModel(smollm2_tokenizer, QWEN3_TEMPLATE, QWEN3_REPLY)
    with serving(model) as url:
        body = whole(url, logprobs=True, n=2)
        chunks = streamed(url, logprobs=True, n=2)
    for choice in body["choices"]:
        assert rebuilt(choice["logprobs"]["content"]) == choice["message"]["content"] == ANSWER
        assert rebuilt(choice["logprobs"]["reasoning_content"]) == REASONING
    for i in (0, 1):
        got = reassembled([c for c in chunks if c["choices"][0]["index"] == i])
        assert got["entries"] == body["choices"][i]["logprobs"]["content"]
        assert got["thought_entries"] == body["choices"][i]["logprobs"]["reasoning_content"]


@pytest.mark.parametrize("template", [QWEN3_TEMPLATE, CHATML], ids=["routed", "plain"])
def test_a_budget_that_ends_inside_a_character_keeps_its_tokens_entries(
    smollm2_tokenizer: Tokenizer, template: str
) -> None:
    """``max_tokens`` ends the answer after the first two of ✓'s three byte tokens: the text ends
    with U+FFFD (as ``tokenizer.decode``), and those tokens' entries come in a last chunk before
    the finish: one entry per generated token of the answer, their bytes the answer's."""
    reply = QWEN3_REPLY if template == QWEN3_TEMPLATE else ANSWER
    ids = smollm2_tokenizer.encode(reply, add_special_tokens=False).ids
    answer_ids = smollm2_tokenizer.encode(ANSWER, add_special_tokens=False).ids
    budget = len(ids) - len(answer_ids) + answer_ids.index(smollm2_tokenizer.token_to_id("ľ")) + 1
    model = LogprobModel(smollm2_tokenizer, template, reply)
    with serving(model) as url:
        body = whole(url, logprobs=True, max_tokens=budget)
        chunks = streamed(url, logprobs=True, max_tokens=budget)
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"] == "It is 4 \ufffd"
    entries = choice["logprobs"]["content"]
    assert positions(entries) == list(range(budget - 6, budget))  # It, is, " ", 4, " \\xe2", \\x9c
    assert b"".join(bytes(e["bytes"]) for e in entries) == "It is 4 ✓".encode()[:-1]
    got = reassembled(chunks)
    assert got["content"] == "It is 4 \ufffd" and got["entries"] == entries
    last = [c["choices"][0] for c in chunks][-2]  # the entries that waited, before the finish chunk
    assert [e["token"] for e in last["logprobs"]["content"]] == [" \\xe2", "\\x9c"]
