"""What the gateway's derendering costs per token, without sockets: many concurrent streams of an
engine's chunks (the bytes vLLM and ``rxstream serve`` send: ``text_completion`` chunks with
``token_ids``, chunked transfer encoding) through the same code the gateway runs on them, one
chunk per stream in turn (round robin, as a loop serving many streams sees them):

    the HTTP framing undone (``WireConnection``) -> server-sent events split (``SseDecoder``)
    -> each chunk's JSON read (``ChatReader``) -> the ids -> detokenize -> stop (two stop
    strings) -> the client's ``chat.completion.chunk`` JSON -> its ``data:`` event bytes

CPU time (``time.process_time``) over the tokens: microseconds per token and tokens per second
per core, for several stream counts and generation lengths (the cost per token must not grow
with either). The syscalls of real sockets, the HTTP server's parsing and the event loop's
scheduling are not in it: ``gateway.py``'s end-to-end rows hold those.

    .venv/bin/python benchmarks/derender.py                    # 1/128/512 streams x 64/1024/8192
    .venv/bin/python benchmarks/derender.py --streams 128 --lengths 1024
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import reactivex
from reactivex.subject import Subject

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rxstream.backends.openai._chat_reader import ChatReader
from rxstream.backends.openai._events import SseDecoder
from rxstream.backends.openai._outputs import Outputs
from rxstream.backends.openai._stream import StreamRequest
from rxstream.backends.openai._wire import WireConnection, WirePool
from rxstream.chat import ChatPlan
from rxstream.families import family
from rxstream.operators import chat_pipeline, text_pipeline
from rxstream.server._response_shapes import chunk_base
from rxstream.server._sse import sse

__all__ = ["DerenderRow", "derender_rows"]


@dataclass
class DerenderRow:
    pipeline: str
    streams: int
    tokens_per_stream: int
    tokens: int
    cpu_s: float
    us_per_token: float
    tokens_per_core_s: float
    bytes_out: int
    chars_out: int


class _Transport(asyncio.Transport):
    def write(self, data: Any) -> None:
        pass

    def is_closing(self) -> bool:
        return False


_KEYS = {"content": "content", "reasoning": "reasoning_content"}


class _Stream:
    """One stream's gateway side: its connection, its request's reader, its pipeline, its output."""

    def __init__(self, tokenizer: Any, pool: WirePool, index: int, routed: bool) -> None:
        self.out = 0
        self.chars = 0
        self.ids: Subject[int] = Subject()
        base = chunk_base("chat.completion.chunk", f"chatcmpl-{index}", 0, "bench")

        def emit(item: Any) -> None:
            delta = {"content": item} if isinstance(item, str) else {_KEYS[item.kind]: item.text}
            self.chars += len(next(iter(delta.values())))
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
            self.out += len(sse({**base, "choices": [choice]}))

        stop = ["<|im_end|>", "\n\n\n\n"]
        if routed:  # qwen3's route: reasoning, answer and tool-call regions
            plan = ChatPlan(family("qwen3").spec, route_prompt="<think>\n")
            self.ids.pipe(chat_pipeline(tokenizer, plan, stop=stop)).subscribe(emit)
        else:
            self.ids.pipe(text_pipeline(tokenizer, stop=stop)).subscribe(emit)
        observer = reactivex.Observer(on_next=self._piece)
        reader = ChatReader("completions", Outputs(False), True, None)
        self.request = StreamRequest(None, "http://engine/v1/completions", {}, reader, observer, None)  # type: ignore[arg-type]
        self.decoder = SseDecoder()
        self.conn = WireConnection(pool, ("engine", 80))
        self.conn.connection_made(_Transport())
        self.conn.send(b"")
        self.conn.data_received(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        self.conn.read(self._data)

    def _piece(self, piece: Any) -> None:
        for token in piece.ids:
            self.ids.on_next(token)

    def _data(self, chunk: bytes) -> bool:
        for data in self.decoder.feed(chunk):
            if self.request._take(data) is not None:
                return True
        return False


def derender_rows(
    tokenizer_file: Path,
    streams_list: list[int],
    lengths: list[int],
    pipelines: tuple[str, ...] = ("text", "routed"),
) -> list[DerenderRow]:
    from gateway import Script
    from tokenizers import Tokenizer

    script = Script(tokenizer_file)
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    rows = []
    loop = asyncio.new_event_loop()
    try:
        pool = WirePool(loop, {}, timeout=60, pause=0.005)
        for kind, length, streams in ((k, n, s) for k in pipelines for n in lengths for s in streams_list):
            group = [_Stream(tokenizer, pool, i, kind == "routed") for i in range(streams)]
            chunks = [script.chunk(k, k == length - 1, True) for k in range(length)]
            t0 = time.process_time()
            for k in range(length):
                chunk = chunks[k]
                for s in group:
                    s.conn.data_received(chunk)
            cpu = time.process_time() - t0
            tokens = streams * length
            rows.append(
                DerenderRow(
                    kind,
                    streams,
                    length,
                    tokens,
                    cpu,
                    cpu / tokens * 1e6,
                    tokens / cpu if cpu else float("inf"),
                    sum(s.out for s in group),
                    sum(s.chars for s in group),
                )
            )
            print(f"derender: {kind}, {streams} streams x {length} tokens: {cpu / tokens * 1e6:.1f} us/token")
    finally:
        loop.close()
    return rows


def markdown(rows: list[DerenderRow]) -> list[str]:
    lines = [
        "| pipeline | streams | tokens per stream | tokens | CPU us/token | tokens/s per core |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r.pipeline} | {r.streams} | {r.tokens_per_stream} | {r.tokens} | {r.us_per_token:.1f} "
            f"| {r.tokens_per_core_s:,.0f} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    import tempfile

    from gateway import tokenizer_dir

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", default="1,128,512")
    parser.add_argument("--lengths", default="64,1024,8192")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tok_dir, _ = tokenizer_dir(Path(tmp))
        rows = derender_rows(
            tok_dir / "tokenizer.json",
            [int(x) for x in args.streams.split(",")],
            [int(x) for x in args.lengths.split(",")],
        )
    print("\n".join(markdown(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
