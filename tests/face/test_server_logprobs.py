"""``rxstream serve``: log-probabilities in OpenAI's shapes, ``n`` choices, SSE keep-alive --
uvicorn on a real socket, the tiny ONNX model, the official ``openai`` client and raw HTTP."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
import reactivex
from reactivex import operators as ops

from rxstream import FinishRecorder, Piece
from rxstream.backends import OnnxModel
from rxstream.operators import detokenize, replace, stop
from rxstream.server import ServerLimits, create_app, run_in_thread
from rxstream.server._logprobs import ChatLogprobs, CompletionLogprobs, TokenNames, clamp
from rxstream.testing.tokenizers import bytelevel
from tests.face.test_server import SlowModel
from tests.scripted_model import QWEN3_TEMPLATE, ScriptedModel

SAMPLING: dict[str, Any] = {"temperature": 1.0, "seed": 1234}
MESSAGES = [{"role": "user", "content": "Tell me a story"}]


@pytest.fixture(scope="module")
def server(model: OnnxModel) -> Iterator[str]:
    with run_in_thread(create_app(model, model_name="tiny", limits=ServerLimits(max_concurrency=4))) as url:
        yield url


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def expected_pieces(
    model: OnnxModel, prompt: list[int], max_tokens: int, k: int, seed: int = 1234
) -> list[Piece]:
    """What the model generates with logprobs for this prompt, one piece per id."""
    kw = {**SAMPLING, "seed": seed}
    pieces: list[Piece] = (
        model.generate(prompt, max_new_tokens=max_tokens, logprobs=k, **kw).pipe(ops.to_list()).run()
    )
    return pieces


def test_chat_logprobs_are_the_models_numbers_with_each_tokens_bytes(server: str, model: OnnxModel) -> None:
    prompt = model.encode_chat(MESSAGES)
    want = expected_pieces(model, prompt, 24, 3)
    r = client(server).chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=24, logprobs=True, top_logprobs=3, **SAMPLING
    )
    choice = r.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content is not None
    entries = choice.logprobs.content
    names = TokenNames(model.tokenizer)
    # one entry per generated token (an EOS that ended the run is not a token of the text)
    assert len(entries) == r.usage.completion_tokens == len(want)
    for entry, piece in zip(entries, want, strict=True):
        token = piece.ids[0]
        assert entry.bytes == list(names.get(token)[1])
        assert entry.token == bytes(entry.bytes).decode("utf-8", "backslashreplace")
        assert entry.logprob == pytest.approx(piece.logprobs[0])
        assert len(entry.top_logprobs) == 3
        for alt, (alt_id, alt_lp) in zip(entry.top_logprobs, piece.top_logprobs[0], strict=True):
            assert alt.bytes == list(names.get(alt_id)[1]) and alt.logprob == pytest.approx(alt_lp)
    # the bytes rebuild the text, characters split across tokens included
    content = choice.message.content or ""
    assert b"".join(bytes(e.bytes) for e in entries).decode("utf-8", "replace") == content
    assert content == model.tokenizer.decode([p.ids[0] for p in want])


def test_chat_stream_carries_each_tokens_entry_once_with_its_text(server: str, model: OnnxModel) -> None:
    whole = client(server).chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=24, logprobs=True, top_logprobs=2, **SAMPLING
    )
    stream = client(server).chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=24, logprobs=True, top_logprobs=2, stream=True, **SAMPLING
    )
    entries: list[Any] = []
    text = ""
    finishes = []
    for chunk in stream:
        (choice,) = chunk.choices
        if choice.finish_reason is not None:
            finishes.append(choice.finish_reason)
            assert choice.logprobs is None
            continue
        text += choice.delta.content or ""
        if choice.logprobs is not None:
            entries += choice.logprobs.content or []
    assert text == whole.choices[0].message.content
    assert [e.model_dump() for e in entries] == [e.model_dump() for e in whole.choices[0].logprobs.content]
    assert finishes == [whole.choices[0].finish_reason]


def test_chat_logprobs_without_top_logprobs(server: str) -> None:
    r = client(server).chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=5, logprobs=True)
    entries = r.choices[0].logprobs.content
    assert entries and all(e.top_logprobs == [] for e in entries)
    plain = client(server).chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=5)
    assert plain.choices[0].logprobs is None


@pytest.mark.parametrize("stream", [False, True])
def test_completions_logprobs_shapes_and_offsets(server: str, model: OnnxModel, stream: bool) -> None:
    prompt = "Once upon a time"
    want = expected_pieces(model, model.encode(prompt), 20, 2)
    body = {"prompt": prompt, "max_tokens": 20, "logprobs": 2, "stream": stream, **SAMPLING}
    if stream:
        text, lists = "", {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        with httpx.stream("POST", f"{server}/v1/completions", json=body, timeout=30) as r:
            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                (choice,) = json.loads(line[6:])["choices"]
                text += choice["text"]
                if choice["logprobs"] is not None:
                    for key in lists:
                        lists[key] += choice["logprobs"][key]
    else:
        choice = httpx.post(f"{server}/v1/completions", json=body, timeout=30).json()["choices"][0]
        text, lists = choice["text"], choice["logprobs"]
    if stream:  # the same lists as the whole response's, offsets included
        whole = httpx.post(f"{server}/v1/completions", json={**body, "stream": False}, timeout=30).json()
        assert lists == whole["choices"][0]["logprobs"] and text == whole["choices"][0]["text"]
    names = TokenNames(model.tokenizer)
    assert lists["tokens"] == [names.get(p.ids[0])[0] for p in want]
    assert lists["token_logprobs"] == pytest.approx([p.logprobs[0] for p in want])
    for top, piece in zip(lists["top_logprobs"], want, strict=True):
        alternatives = {names.get(i)[0]: lp for i, lp in piece.top_logprobs[0]}
        alternatives.setdefault(
            names.get(piece.ids[0])[0], piece.logprobs[0]
        )  # the sampled one is always there
        assert top == pytest.approx(alternatives)
    offsets = lists["text_offset"]
    assert offsets == sorted(offsets) and all(0 <= o <= len(text) for o in offsets)
    # a token after a whole one starts where its own text does (after a partial one, where the
    # character that token completes starts)
    checked = 0
    for k, (token, offset) in enumerate(zip(lists["tokens"], offsets, strict=True)):
        if k and "\\x" not in token and "\\x" not in lists["tokens"][k - 1]:
            assert text[offset : offset + len(token)] == token
            checked += 1
    assert checked > 5


def test_a_stop_inside_a_token_keeps_only_the_tokens_before_it(server: str, model: OnnxModel) -> None:
    """The stop string starts inside a token: the text before it is sent, but that token (cut in
    part) has no entry, like every token after it; the entries are the tokens the text holds whole."""
    prompt = model.encode_chat(MESSAGES)
    want = expected_pieces(model, prompt, 40, 1)
    ids = [p.ids[0] for p in want]

    def text_of(n: int) -> str:
        return "".join(
            reactivex.from_iterable(ids[:n])
            .pipe(detokenize(model.tokenizer, prompt_ids=prompt), ops.to_list())
            .run()
        )

    at = stop_string = None
    for k in range(1, len(ids)):
        before, token_text = text_of(k), text_of(k + 1)[len(text_of(k)) :]
        if (
            len(token_text) >= 2
            and "\ufffd" not in token_text
            and (before + token_text).find(token_text[1:]) == len(before) + 1
        ):
            at, stop_string = k, token_text[1:]
            break
    assert at is not None and stop_string is not None, "no token to cut inside; pick another prompt"
    r = client(server).chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=40, logprobs=True, stop=[stop_string], **SAMPLING
    )
    choice = r.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.content == text_of(at + 1)[: len(text_of(at)) + 1]  # up to inside the token
    entries = choice.logprobs.content
    assert len(entries) == at  # the tokens before it, not the one the stop cuts
    assert [e.logprob for e in entries] == pytest.approx([p.logprobs[0] for p in want[:at]])


def test_replace_rewrites_the_text_and_keeps_one_entry_per_token(server: str, model: OnnxModel) -> None:
    prompt = "Once upon a time"
    want = expected_pieces(model, model.encode(prompt), 20, 0)
    text = model.tokenizer.decode([p.ids[0] for p in want])
    old = next(text[i : i + 2] for i in range(len(text) - 2) if "\ufffd" not in text[i : i + 2])
    body = {
        "prompt": prompt,
        "max_tokens": 20,
        "logprobs": 0,
        "rxstream": {"replace": {old: "<>"}},
        **SAMPLING,
    }
    choice = httpx.post(f"{server}/v1/completions", json=body, timeout=30).json()["choices"][0]
    assert choice["text"] == text.replace(old, "<>")  # one literal rule: str.replace's result
    assert len(choice["logprobs"]["tokens"]) == len(want)
    assert all(len(top) == 1 for top in choice["logprobs"]["top_logprobs"])  # k=0: the sampled token
    assert all(0 <= o <= len(choice["text"]) for o in choice["logprobs"]["text_offset"])


# -- n choices ---------------------------------------------------------------------------------------


def choice_texts(model: OnnxModel, prompt: list[int], n: int, max_tokens: int) -> list[tuple[str, str, int]]:
    """Each choice's text, finish reason and token count, made directly: choice i samples with seed + i."""
    out = []
    for i in range(n):
        rec = FinishRecorder()
        ids: list[int] = (
            model.generate(prompt, max_new_tokens=max_tokens, on_finish=rec, **{**SAMPLING, "seed": 1234 + i})
            .pipe(ops.to_list())
            .run()
        )
        text = "".join(
            reactivex.from_iterable(ids)
            .pipe(detokenize(model.tokenizer, prompt_ids=prompt), ops.to_list())
            .run()
        )
        assert rec.finish is not None
        out.append((text, rec.finish.openai_reason, len(ids)))
    return out


def test_n_choices_each_with_its_own_index_text_and_finish(server: str, model: OnnxModel) -> None:
    prompt = model.encode_chat(MESSAGES)
    want = choice_texts(model, prompt, 3, 16)
    assert len({t for t, _, _ in want}) == 3  # seed + i: the choices differ
    r = client(server).chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=16, n=3, **SAMPLING
    )
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert [(c.message.content, c.finish_reason) for c in r.choices] == [(t, f) for t, f, _ in want]
    assert r.usage.prompt_tokens == len(prompt)  # once, not per choice
    assert r.usage.completion_tokens == sum(n for _, _, n in want)
    # streamed: every chunk carries one choice; each choice has its own role, text and finish chunks
    texts = ["", "", ""]
    finishes: dict[int, str] = {}
    roles = []
    for chunk in client(server).chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=16, n=3, stream=True, **SAMPLING
    ):
        (choice,) = chunk.choices
        assert choice.index not in finishes  # nothing of a choice after its finish
        if choice.delta.role:
            roles.append(choice.index)
        texts[choice.index] += choice.delta.content or ""
        if choice.finish_reason:
            finishes[choice.index] = choice.finish_reason
    assert sorted(roles) == [0, 1, 2]
    assert [(t, finishes[i]) for i, t in enumerate(texts)] == [(t, f) for t, f, _ in want]


def test_n_choices_each_stop_on_their_own(server: str, model: OnnxModel) -> None:
    prompt = "Once upon a time"
    ids = model.encode(prompt)
    want = choice_texts(model, ids, 2, 30)
    first = want[0][0]
    stop_string = next(
        first[i : i + 3]
        for i in range(5, len(first) - 3)
        if "\ufffd" not in first[i : i + 3] and first[i : i + 3] not in want[1][0]
    )
    body = {"prompt": prompt, "max_tokens": 30, "n": 2, "stop": [stop_string], "logprobs": 1, **SAMPLING}
    choices = httpx.post(f"{server}/v1/completions", json=body, timeout=30).json()["choices"]
    assert choices[0]["finish_reason"] == "stop" and choices[0]["stop_reason"] == stop_string
    assert choices[0]["text"] == first[: first.index(stop_string)]
    assert choices[1]["finish_reason"] == want[1][1] and choices[1]["text"] == want[1][0]
    # one entry per generated token of the unstopped choice; the stopped one's cover its text
    assert len(choices[1]["logprobs"]["tokens"]) == want[1][2]
    offsets = choices[0]["logprobs"]["text_offset"]
    assert offsets == sorted(offsets) and all(o < len(choices[0]["text"]) for o in offsets)
    assert 0 < len(choices[0]["logprobs"]["tokens"]) < want[0][2]


def test_n_choices_are_streamed_interleaved_as_they_come(model: OnnxModel) -> None:
    """Each choice is a generation of its own, running at the same time: their chunks interleave."""
    app = create_app(SlowModel(model, 0.02), model_name="tiny", limits=ServerLimits(max_concurrency=4))
    with run_in_thread(app) as url:
        body = {"prompt": "Go", "max_tokens": 12, "n": 3, "stream": True}
        order = []
        with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    (choice,) = json.loads(line[6:])["choices"]
                    order.append(choice["index"])
        assert sorted(set(order)) == [0, 1, 2]
        assert order != sorted(order)  # not one choice after the other
        assert app.state.stats.snapshot()["finished"] == {"length": 3}


# -- keep-alive ----------------------------------------------------------------------------------------


def test_keep_alive_comments_while_a_request_waits_for_a_slot(model: OnnxModel) -> None:
    """One slot, held by a slow generation: a second streamed request waits for it, and gets
    ``: keep-alive`` comments meanwhile; the official client ignores them."""
    limits = ServerLimits(max_concurrency=1, keepalive_interval=0.1)
    app = create_app(SlowModel(model, 0.05), model_name="tiny", limits=limits)
    with run_in_thread(app) as url:
        holder = threading.Thread(
            target=httpx.post,
            args=(f"{url}/v1/completions",),
            kwargs={"json": {"prompt": "Go", "max_tokens": 20}, "timeout": 30},
        )
        holder.start()
        deadline = time.monotonic() + 10
        while app.state.stats.snapshot()["active"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        lines = []
        started = time.monotonic()
        body = {"prompt": "Go", "max_tokens": 3, "stream": True}
        with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=30) as r:
            for line in r.iter_lines():
                lines.append((time.monotonic() - started, line))
        holder.join()
        comments = [t for t, line in lines if line == ": keep-alive"]
        first_data = next(t for t, line in lines if line.startswith("data: "))
        assert len(comments) >= 3 and comments[0] < first_data  # while it waited, well before the slot
        assert [line for _, line in lines if line][-1] == "data: [DONE]"
        # the official client reads past them
        threading.Thread(
            target=httpx.post,
            args=(f"{url}/v1/completions",),
            kwargs={"json": {"prompt": "Go", "max_tokens": 10}, "timeout": 30},
        ).start()
        time.sleep(0.2)
        out = client(url).completions.create(model="tiny", prompt="Go", max_tokens=3, stream=True)
        chunks = list(out)
        assert chunks and chunks[-1].choices[0].finish_reason == "length"


# -- refusals and units ------------------------------------------------------------------------------


def test_a_model_without_logprobs_refuses_them(model: OnnxModel) -> None:
    class IdsOnly:
        def __getattr__(self, name: str) -> Any:
            return getattr(model, name)

        def generate(
            self, prompt_ids: Any, params: Any = None, *, on_finish: Any = None, scheduler: Any = None
        ) -> Any:
            return model.generate(prompt_ids, params, on_finish=on_finish, scheduler=scheduler)

    with run_in_thread(create_app(IdsOnly(), model_name="tiny")) as url:
        r = httpx.post(f"{url}/v1/completions", json={"prompt": "hi", "logprobs": 1})
        assert r.status_code == 400 and r.json()["error"]["param"] == "logprobs"
        assert httpx.post(f"{url}/v1/completions", json={"prompt": "hi", "max_tokens": 2}).status_code == 200


def test_split_characters_get_escaped_names_and_exact_bytes() -> None:
    tok = bytelevel()
    ids = tok.encode("aӜx", add_special_tokens=False).ids
    assert len(ids) == 4  # "Ӝ" is two byte tokens
    pieces: list[Piece] = (
        reactivex.from_iterable([Piece("", (i,), (-0.5,), (((i, -0.5),),)) for i in ids])
        .pipe(detokenize(tok, aligned=True), replace({"a": "A"}), stop("zzz"), ops.to_list())
        .run()
    )
    names = TokenNames(tok)
    chat = [e for p in pieces for e in ChatLogprobs(names).entries(p)]
    assert b"".join(bytes(e["bytes"]) for e in chat) == "aӜx".encode()
    assert [e["token"] for e in chat] == ["a", "\\xd3", "\\x9c", "x"]  # a part of Ӝ: escaped
    lists = CompletionLogprobs(names)
    parts = [lists.entries(p) for p in pieces]
    joined = CompletionLogprobs.join(parts)
    assert joined["text_offset"] == [0, 1, 1, 2]  # both bytes of Ӝ start after "A"
    assert clamp(float("-inf")) == -9999.0 and clamp(float("nan")) == -9999.0 and clamp(-1.5) == -1.5


# -- routed chats (reasoning, tool calls) ------------------------------------------------------------


def test_a_routed_chat_serves_n_choices(smollm2_tokenizer: Any) -> None:
    """``n`` choices work on a chat routed into reasoning and answer, each routed (its
    log-probabilities: tests/face/test_server_routed_logprobs.py)."""
    answer = "<think>\nTwo and two.\n</think>\n\nIt is 4."
    scripted = ScriptedModel(smollm2_tokenizer, QWEN3_TEMPLATE, answer)
    with run_in_thread(create_app(scripted, model_name="scripted")) as url:
        reply = client(url).chat.completions.create(model="scripted", messages=MESSAGES, n=2)
        assert [c.index for c in reply.choices] == [0, 1]
        for c in reply.choices:
            assert c.message.content == "It is 4."
            assert getattr(c.message, "reasoning_content", None) == "\nTwo and two.\n"
            assert c.finish_reason == "stop"
        content = {0: "", 1: ""}
        for chunk in client(url).chat.completions.create(
            model="scripted", messages=MESSAGES, n=2, stream=True
        ):
            (c,) = chunk.choices
            content[c.index] += c.delta.content or ""
        assert content == {0: "It is 4.", 1: "It is 4."}
