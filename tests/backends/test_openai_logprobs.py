"""OpenAIBackend keeps log-probabilities from servers that name tokens by text (OpenAI, vLLM) or
by id (llama.cpp, vLLM's token_id:N), on streams in each server's format served from a real
socket; with a tokenizer, tokens named by their bytes get their ids."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops

from rxstream import FinishReason, FinishRecorder, Piece
from rxstream.backends.openai import OpenAIBackend
from rxstream.operators import detokenize, replace, stop
from rxstream.testing.tokenizers import bytelevel

STREAMS = Path(__file__).parent / "data" / "streams"
TEXT = "The capital of France is Paris Ӝ!"
LOGPROBS = [
    -0.0021,
    -0.0004,
    -0.0153,
    -0.0001,
    -0.0002,
    -0.0,
    -0.0011,
    -0.0,
    -0.0,
    -0.0,
    -0.0172,
    -0.0003,
    -0.0,
]
LOGPROBS += [-1.2, -0.91, -0.05, -0.27]
TOKENS = [
    "T",
    "he",
    " ca",
    "p",
    "it",
    "al",
    " of",
    " F",
    "ran",
    "ce",
    " is",
    " P",
    "aris",
    " ",
    "\\xd3",
    "\\x9c",
    "!",
]
LLAMA_IDS = [51, 383, 2211, 79, 275, 278, 315, 435, 6713, 346, 374, 393, 24588, 220, 145, 250, 0]


@pytest.fixture
def replay() -> Iterator[Any]:
    """A server on a real socket that answers every POST with a recorded stream, byte for byte."""
    state: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            data = state["body"]
            for at in range(0, len(data), 97):  # in pieces that cut events and characters
                self.wfile.write(data[at : at + 97])
                self.wfile.flush()
            self.close_connection = True

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()

    def serve(name: str) -> str:
        state["body"] = (STREAMS / name).read_bytes()
        return f"http://127.0.0.1:{httpd.server_address[1]}/v1"

    try:
        yield serve
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def stream(
    url: str, name: str, tokenizer: Any = None, rec: FinishRecorder | None = None
) -> reactivex.Observable[Piece]:
    backend = OpenAIBackend(url, tokenizer=tokenizer)
    if "chat" in name:
        return backend.chat(
            [{"role": "user", "content": "Capital of France?"}], pieces=True, logprobs=True, on_finish=rec
        )
    return backend.completions("The capital of France is", pieces=True, logprobs=1, on_finish=rec)


def tokens_of(pieces: list[Piece]) -> list[int | str]:
    return [t for p in pieces for t in (p.ids or p.tokens or ())]


@pytest.mark.parametrize("name", sorted(p.name for p in STREAMS.glob("*.sse")))
def test_every_servers_logprobs_are_kept_with_their_text(replay: Any, name: str) -> None:
    rec = FinishRecorder()
    pieces: list[Piece] = stream(replay(name), name, rec=rec).pipe(ops.to_list()).run()
    assert "".join(p.text for p in pieces) == TEXT
    assert [x for p in pieces for x in (p.logprobs or ())] == LOGPROBS
    assert all(p.top_logprobs is not None and len(p.top_logprobs) == p.size for p in pieces if p.size)
    best = [top[0][1] for p in pieces for top in (p.top_logprobs or ())]
    assert len(best) == len(LOGPROBS)
    assert rec.finish is not None and rec.finish.reason in (FinishReason.EOS, FinishReason.LENGTH)
    if name.startswith("llamacpp"):  # llama.cpp names every token by id
        assert tokens_of(pieces) == LLAMA_IDS
    elif name == "vllm_completions.sse":  # token_id:N
        assert tokens_of(pieces) == LLAMA_IDS
        assert pieces[0].top_logprobs == (((51, -0.0021), (1051, -6.31)),)
    else:  # named by text only: the tokens are kept with their text
        assert all(not p.ids for p in pieces)
        got = tokens_of(pieces)
        if name == "vllm_chat.sse":
            assert got == [t if "\\x" not in t else "\ufffd" for t in TOKENS]
        elif name == "openai_completions.sse":
            assert got == [t if "\\x" not in t else "bytes:" + t for t in TOKENS]
        else:
            assert got == TOKENS


@pytest.mark.parametrize("name", ["openai_chat.sse", "openai_completions.sse", "vllm_chat.sse"])
def test_a_tokenizer_turns_token_bytes_into_ids(replay: Any, name: str) -> None:
    tok = bytelevel()
    ids = tok.encode(TEXT, add_special_tokens=False).ids
    pieces: list[Piece] = stream(replay(name), name, tokenizer=tok).pipe(ops.to_list()).run()
    if name == "vllm_chat.sse":
        # U+FFFD stands for bytes the server did not send: those two tokens stay named by text
        assert [p.tokens for p in pieces if p.tokens] == [("\ufffd",), ("\ufffd",)]
        assert [i for p in pieces for i in p.ids] == ids[:14] + ids[16:]
        return
    assert [i for p in pieces for i in p.ids] == ids
    assert all(p.tokens is None for p in pieces)
    text = reactivex.from_iterable(pieces).pipe(detokenize(tok), ops.to_list()).run()
    assert "".join(text) == TEXT
    # alternatives named by the tokenizer's ids where it has them, else by their text
    second = next(p for p in pieces if p.ids == (ids[1],))  # "he"; its alternative "his" is no token
    assert second.top_logprobs == (((ids[1], -0.0004), ("his", -8.12)),)


@pytest.mark.parametrize("name", ["openai_chat.sse", "vllm_completions.sse"])
def test_stop_and_replace_keep_the_logprobs_of_the_text_they_send(replay: Any, name: str) -> None:
    """ "Paris" starts inside the token " P": the text before it is sent, the tokens before it keep
    their logprobs, " P" and the rest are cut."""
    rec = FinishRecorder()
    out: list[Piece] = (
        stream(replay(name), name)
        .pipe(replace({"capital": "CAPITAL"}), stop("Paris", on_finish=rec), ops.to_list())
        .run()
    )
    assert "".join(p.text for p in out) == "The CAPITAL of France is "
    assert [x for p in out for x in (p.logprobs or ())] == LOGPROBS[:11]
    assert len(tokens_of(out)) == 11
    assert rec.finish is not None and rec.finish.reason is FinishReason.STOP
