"""What the prefix store saves a multi-turn chat: time to first token per turn, store on and off.

Runs the same six-turn conversation (greedy, each answer fed back through the chat template as
the next turn's history) on two copies of the default model side by side, turn by turn
alternating: the batch with its prefix store (``BatchConfig()``, the default) and without
(``BatchConfig(prefix_cache_bytes=0)``: each turn reads the whole conversation again). Reports
each turn's prompt length, the tokens read, and the time to the first id (medians over rounds).

    .venv/bin/python benchmarks/multiturn.py                 # the default model (fp32) from the cache
    .venv/bin/python benchmarks/multiturn.py --model int4 --rounds 5

Results go to ``benchmarks/results/multiturn.md`` (and ``.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from rxstream.backends import OnnxModel
from rxstream.backends.convert import KNOWN_MODELS, default_cache_dir
from rxstream.backends.onnx import BatchConfig

RESULTS = Path(__file__).resolve().parent / "results"

TURNS = [
    "What is the capital of France?",
    "What is it famous for?",
    "Name three museums there.",
    "Which one is the largest?",
    "How do I get there from the airport?",
    "Thanks! Summarize our conversation in one sentence.",
]


def first_token_seconds(model: OnnxModel, prompt: list[int], max_new_tokens: int) -> tuple[float, list[int]]:
    """Seconds from subscribing to the first id, and every id of the answer."""
    ids: list[int] = []
    first: list[float] = []
    done = threading.Event()
    start = time.perf_counter()

    def on_next(token: int) -> None:
        if not first:
            first.append(time.perf_counter() - start)
        ids.append(token)

    model.generate(prompt, max_new_tokens=max_new_tokens).subscribe(on_next, lambda e: done.set(), done.set)
    done.wait(300)
    return (first[0] if first else float("nan")), ids


def conversation(model: OnnxModel, max_new_tokens: int) -> list[dict[str, Any]]:
    history: list[dict[str, str]] = []
    turns = []
    for question in TURNS:
        history.append({"role": "user", "content": question})
        prompt = model.encode_chat(history)
        before = model.batch_stats() or {}
        seconds, ids = first_token_seconds(model, prompt, max_new_tokens)
        while (model.batch_stats() or {}).get("rows", 0):  # the row is gone: its prefix is stored
            time.sleep(0.001)
        after = model.batch_stats() or {}
        turns.append(
            {
                "prompt_tokens": len(prompt),
                "read": after.get("prefill_tokens", 0) - before.get("prefill_tokens", 0),
                "ttft_ms": seconds * 1000,
            }
        )
        history.append(
            {"role": "assistant", "content": model.tokenizer.decode(ids, skip_special_tokens=True)}
        )
    return turns


def name_of(model: str) -> str:
    return f"SmolLM2-135M-Instruct ({model})" if model in ("fp32", "int4") else model


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="fp32", help="fp32, int4 (the default model's builds) or DIR")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--out", type=Path, default=RESULTS / "multiturn.md")
    args = parser.parse_args()
    directory = args.model
    if args.model in ("fp32", "int4"):
        directory = str(default_cache_dir() / "models" / f"{KNOWN_MODELS['smollm2'].dirname}-{args.model}")
    modes = {"prefix store on": BatchConfig(), "prefix store off": BatchConfig(prefix_cache_bytes=0)}
    load_at_start = os.getloadavg()[0]
    runs: dict[str, list[list[dict[str, Any]]]] = {m: [] for m in modes}
    for r in range(args.rounds):
        order = list(modes) if r % 2 == 0 else list(reversed(modes))
        for name in order:
            # a fresh model each round: the store starts empty, the first turn cold
            fresh = OnnxModel.load(directory, provider="cpu", batching=modes[name])
            runs[name].append(conversation(fresh, args.max_new_tokens))
            print(
                f"round {r + 1} {name}: " + ", ".join(f"{t['ttft_ms']:.0f}" for t in runs[name][-1]) + " ms"
            )
    lines = [
        "# Multi-turn chat: time to first token with and without the prefix store",
        "",
        f"- model: {name_of(args.model)}; CPU; greedy; {args.max_new_tokens} new tokens per answer; "
        f"{len(TURNS)} turns; each answer fed back as history through the chat template",
        f"- medians over {args.rounds} rounds, the modes alternating; a fresh model (empty store) each round",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"1-minute load average at the start {load_at_start:.1f}",
        f"- command: `python benchmarks/multiturn.py --model {args.model} --rounds {args.rounds}`",
        "",
        "| turn | prompt tokens | read (store on) | read (store off) | TTFT store on ms "
        "| TTFT store off ms | ratio |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    on, off = runs["prefix store on"], runs["prefix store off"]
    for i in range(len(TURNS)):
        a = statistics.median(run[i]["ttft_ms"] for run in on)
        b = statistics.median(run[i]["ttft_ms"] for run in off)
        lines.append(
            f"| {i + 1} | {on[0][i]['prompt_tokens']} | {on[0][i]['read']} | {off[0][i]['read']} | "
            f"{a:.0f} | {b:.0f} | {a / b:.2f}x |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps(runs, indent=1), encoding="utf-8")
    print("\n".join(lines))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
