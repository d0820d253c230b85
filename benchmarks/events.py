"""The event layers' cost per token beside the chat-chunk layer (OpenAI Responses, Anthropic Messages).

    .venv/bin/python benchmarks/events.py            # full run (10 000-token output), ~1 min
    .venv/bin/python benchmarks/events.py --quick    # 2 000 tokens, fewer repeats

One recorded Qwen3-style completion (reasoning, answer text, three tool calls with nested JSON),
repeated to 10 000 tokens of the default model's tokenizer (SmolLM2 from the model cache; a BPE
trained in-process when the cache is empty), is run once through ``chat_pipeline`` (one id per
item): its items are the input of every layer, so only the layer is timed. Side by side, in
microseconds per token, each layer turning the items into the bytes a server sends:

- ``chat chunks`` -- what ``/v1/chat/completions`` does per item: ``ChatOutput.add`` (the delta of
  text, reasoning or tool-call arguments) and one ``chat.completion.chunk`` as server-sent event;
- ``responses_events`` -- the operator, each event as the server frames it (``event:``/``data:``);
- ``messages_events`` -- the operator, each event likewise.

Goal: each event layer within 1.2x of the chat-chunk layer. Results go to
``benchmarks/results/events.md`` and ``.json``. The machine is shared: ratios matter.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path
from typing import Any

import reactivex

from rxstream import Finish, FinishReason, FinishRecorder
from rxstream.chat import ChatPlan
from rxstream.families import family
from rxstream.operators import chat_pipeline, messages_events, responses_events

sys.path.insert(0, str(Path(__file__).resolve().parent))
from channels import BLOCK, direct_source, per_token, tokenizer

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def items_of(tok: Any, n: int) -> tuple[list[Any], int]:
    """chat_pipeline's items for BLOCK repeated to n tokens (qwen3 routing, tool calls parsed)."""
    per_block = len(tok.encode(BLOCK).ids)
    ids: list[int] = tok.encode(BLOCK * (n // per_block + 1)).ids[:n]
    plan = ChatPlan(family("qwen3").spec, parse_tools=True)
    out: list[Any] = []
    reactivex.from_iterable(ids).pipe(chat_pipeline(tok, plan)).subscribe(out.append)
    return out, len(ids)


def chat_chunks(items: list[Any]) -> int:
    from rxstream.server._response_shapes import ChatOutput, chunk_base
    from rxstream.server._sse import sse

    output = ChatOutput(reasoning=True)
    base = chunk_base("chat.completion.chunk", "chatcmpl-1", 0, "m")
    size = 0
    for item in items:
        delta, extension, logprobs = output.add(item)
        if delta is None and extension is None:
            continue
        choice: dict[str, Any] = {
            "index": 0,
            "delta": delta or {},
            "logprobs": logprobs,
            "finish_reason": None,
        }
        size += len(sse({**base, "choices": [choice]}))
    return size


def run_events(items: list[Any], make: Any) -> int:
    from rxstream.server._sse import named_sse

    size = [0]

    def add(event: dict[str, Any]) -> None:
        size[0] += len(named_sse(event))

    direct_source(items).pipe(make()).subscribe(add)
    return size[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 000 tokens, 3 repeats (a smoke test)")
    args = ap.parse_args()
    n = 2000 if args.quick else 10_000
    repeats = 3 if args.quick else 7
    tok, tok_name = tokenizer()
    items, tokens = items_of(tok, n)
    recorder = FinishRecorder()
    recorder(Finish(FinishReason.EOS))

    def responses() -> Any:
        return responses_events("resp_1", created_at=0, model="m", finish=recorder)

    def messages() -> Any:
        return messages_events("msg_1", "m", thinking=True, finish=recorder)

    assert chat_chunks(items) > 0 and run_events(items, responses) > 0 and run_events(items, messages) > 0
    rows = [
        (
            "chat chunks (ChatOutput.add + chat.completion.chunk SSE)",
            per_token(lambda: chat_chunks(items), tokens, repeats),
        ),
        ("responses_events (+ SSE)", per_token(lambda: run_events(items, responses), tokens, repeats)),
        ("messages_events (+ SSE)", per_token(lambda: run_events(items, messages), tokens, repeats)),
    ]
    base = rows[0][1]
    lines = [
        "# Event layers, µs per token",
        "",
        f"{tokens} tokens of Qwen3-style output ({len(items)} chat_pipeline items; tokenizer: {tok_name}); "
        f"median of {repeats} runs; Python {platform.python_version()} on {platform.machine()}.",
        "Command: `.venv/bin/python benchmarks/events.py" + (" --quick" if args.quick else "") + "`",
        "",
        "| layer | µs/token | vs chat chunks |",
        "|---|---:|---:|",
    ]
    for name, us in rows:
        lines.append(f"| {name} | {us:.3f} | {us / base:.2f}x |")
    report = "\n".join(lines) + "\n"
    print(report)
    suffix = ".tmp" if args.quick else ""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"events.md{suffix}").write_text(report, encoding="utf-8")
    (RESULTS / f"events.json{suffix}").write_text(
        json.dumps(
            {"tokens": tokens, "tokenizer": tok_name, "rows": dict(rows), "argv": sys.argv[1:]}, indent=1
        ),
        encoding="utf-8",
    )


if __name__ == "__main__":
    main()
