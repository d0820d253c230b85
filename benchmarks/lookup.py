"""Benchmark prompt lookup (speculative decoding from the generation's own context): one stream,
drafting on (``BatchConfig(draft_tokens=N)``) against off (``draft_tokens=0``), interleaved, on the
default model's builds, for tasks that quote their input (repeat, edit, extract, summarise) and one
that does not (a free story).

Reports, per build and task: decode tokens/s with drafting off and on (wall clock, the whole
generation after the first id), their ratio, the share of ids that came from kept drafts, and
whether the ids are plain decoding's (they must be, for the exact builds).

    .venv/bin/python benchmarks/lookup.py                       # fp32 and int4 (cached or pulled)
    .venv/bin/python benchmarks/lookup.py --quant fp32 int4 int4-a8 --rounds 5

Writes ``benchmarks/results/lookup.md`` and ``lookup.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from reactivex import operators as ops

from rxstream.backends import OnnxModel, pull_model
from rxstream.backends.onnx import BatchConfig

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

TEXT = (
    "The lighthouse keeper, Elias Morrow, had tended the light on Gull Rock for thirty years. Every "
    "night he climbed the one hundred and twelve steps, trimmed the wick, polished the great lens and "
    "watched the beam sweep across the black water. One stormy morning in October he found a green "
    "glass bottle wedged between the rocks below the tower. Inside was a letter written in faded ink by "
    "a girl named Clara, who had lived on the island as a child."
)
CODE = """def load_settings(path):
    with open(path) as handle:
        settings = json.load(handle)
    if "timeout" not in settings:
        settings["timeout"] = 30
    if "retries" not in settings:
        settings["retries"] = 3
    return settings
"""
TASKS = {
    "repeat": "Repeat the following text exactly, word for word:\n\n" + TEXT,
    "edit": "Rewrite this function so that the default timeout is 60 instead of 30. Return the whole "
    "function.\n\n" + CODE,
    "extract": "List every name and every number that appears in this text, one per line:\n\n" + TEXT,
    "summarise": "Summarise this story in two sentences, quoting the names:\n\n" + TEXT,
    "story": "Write a short story about a lighthouse keeper.",
}


def generate(model: OnnxModel, prompt: list[int], new_tokens: int) -> tuple[list[int], float]:
    """The greedy ids and the decode rate (ids after the first per second)."""
    stamps: list[float] = []
    ids: list[int] = []

    def on_next(token: int) -> None:
        stamps.append(time.perf_counter())
        ids.append(token)

    model.generate(prompt, max_new_tokens=new_tokens, temperature=0.0).pipe(
        ops.do_action(on_next), ops.to_list()
    ).run()
    rate = (len(ids) - 1) / (stamps[-1] - stamps[0]) if len(ids) > 1 else 0.0
    return ids, rate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quant", nargs="+", default=["fp32", "int4"], choices=["fp32", "int4", "int4-a8"])
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--draft-tokens", type=int, default=4, help="the drafting model's bound (default 4)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "lookup.md")
    args = parser.parse_args(argv)
    load_start = os.getloadavg()[0]
    rows: list[dict[str, Any]] = []
    for quant in args.quant:
        directory = pull_model("smollm2", quantization=quant)  # type: ignore[arg-type]
        models = {
            label: OnnxModel.load(
                directory,
                provider="cpu",
                threads=args.threads,
                spinning="step",
                batching=BatchConfig(draft_tokens=n),
            )
            for label, n in (("off", 0), ("on", args.draft_tokens))
        }
        for task, text in TASKS.items():
            prompt = models["off"].encode_chat([{"role": "user", "content": text}])
            rates: dict[str, list[float]] = {"off": [], "on": []}
            ids: dict[str, list[int]] = {}
            kept0 = models["on"].batch_stats()["kept_draft_tokens"]  # type: ignore[index]
            for _ in range(args.rounds):
                for label, model in models.items():
                    got, rate = generate(model, prompt, args.new_tokens)
                    rates[label].append(rate)
                    ids.setdefault(label, got)
            kept = models["on"].batch_stats()["kept_draft_tokens"] - kept0  # type: ignore[index]
            row = {
                "quantization": quant,
                "task": task,
                "tokens": len(ids["on"]),
                "off_tok_s": statistics.median(rates["off"]),
                "on_tok_s": statistics.median(rates["on"]),
                "kept_share": kept / (args.rounds * max(1, len(ids["on"]) - 1)),
                "same_ids": ids["on"] == ids["off"],
            }
            row["speedup"] = row["on_tok_s"] / row["off_tok_s"]
            rows.append(row)
            print(
                f"{quant:8s} {task:10s} off {row['off_tok_s']:6.1f}  on {row['on_tok_s']:6.1f} tok/s  "
                f"{row['speedup']:.2f}x  kept {row['kept_share']:.0%}  same ids: {row['same_ids']}",
                flush=True,
            )
    meta = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "load_avg": [load_start, os.getloadavg()[0]],
        "command": "python benchmarks/lookup.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "new_tokens": args.new_tokens,
        "draft_tokens": args.draft_tokens,
        "threads": args.threads,
        "rounds": args.rounds,
    }
    lines = [
        "# Prompt lookup: one stream, drafting on against off",
        "",
        f"SmolLM2-135M-Instruct, greedy, up to {args.new_tokens} new tokens, {args.threads} threads "
        f"(workers spin within a pass), `draft_tokens={args.draft_tokens}` against 0, medians of "
        f"{args.rounds} alternating rounds; decode tok/s = ids after the first per second. Machine: "
        f"{meta['machine']}; 1-minute load average {load_start:.1f} at the start, "
        f"{meta['load_avg'][1]:.1f} at the end. Produced by `{meta['command']}`.",
        "",
        "| build | task | ids | off tok/s | on tok/s | on / off | ids from kept drafts "
        "| ids as plain decoding's |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['quantization']} | {r['task']} | {r['tokens']} | {r['off_tok_s']:.1f} "
            f"| {r['on_tok_s']:.1f} | {r['speedup']:.2f}x | {r['kept_share']:.0%} "
            f"| {'yes' if r['same_ids'] else 'no'} |"
        )
    lines.append("")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    args.out.with_suffix(".json").write_text(
        json.dumps({"meta": meta, "rows": rows}, indent=2), encoding="utf-8"
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
