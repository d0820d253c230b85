"""Benchmark: what ``generate(..., logprobs=k)`` costs on SmolLM2-135M-Instruct (fp32, CPU).

Two measurements, batch 1, greedy, a fixed number of new tokens (EOS ignored):

* end to end: decode tokens/s of ``generate`` without logprobs, with ``logprobs=0`` (the sampled
  token's log-probability only) and with ``logprobs=5``; runs alternate between the three, and
  the overhead is the median over rounds of each round's ratio of decode times;
* the function alone: the time of one :func:`token_logprobs` call on a real row of logits
  (vocabulary 49152), k = 0, 5 and 20, beside the median decode time per token (less noisy than
  the end-to-end difference on a busy machine).

    python benchmarks/logprobs.py [--rounds 7] [--new-tokens 128]

Writes ``benchmarks/results/logprobs.md`` and ``logprobs.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from rxstream.backends import OnnxModel
from rxstream.backends.onnx import token_logprobs

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."
MODES: list[int | None] = [None, 0, 5]


def decode_rate(model: OnnxModel, prompt: list[int], new_tokens: int, k: int | None) -> tuple[float, float]:
    """Tokens/s between the first and the last new token of one run, and the process's CPU
    seconds per token over the same span (steadier than wall time when other programs share
    the cores: the model's threads block instead of spinning, see ``main``)."""
    stamps: list[tuple[float, float]] = []
    model.generate(prompt, max_new_tokens=new_tokens, ignore_eos=True, logprobs=k).subscribe(
        lambda _item: stamps.append((time.perf_counter(), time.process_time()))
    )
    deadline = time.monotonic() + 300
    while model.active_generations or len(stamps) < new_tokens:
        if time.monotonic() > deadline:
            raise RuntimeError("the run did not finish")
        time.sleep(0.01)
    n = len(stamps) - 1
    return n / (stamps[-1][0] - stamps[0][0]), (stamps[-1][1] - stamps[0][1]) / n


def per_call(row: np.ndarray, token: int, k: int, repeat: int = 2000) -> float:
    """Median seconds of one token_logprobs call (in batches of 100)."""
    times = []
    for _ in range(repeat // 100):
        start = time.perf_counter()
        for _ in range(100):
            token_logprobs(row, token, k)
        times.append((time.perf_counter() - start) / 100)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--new-tokens", type=int, default=128)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    # blocking threads (as rxstream serve runs): the CPU time counts work, not spinning
    model = OnnxModel.from_pretrained("smollm2", provider="cpu", spinning=False)
    prompt = model.encode_chat([{"role": "user", "content": PROMPT}])
    decode_rate(model, prompt, 16, None)  # warm up
    rates: dict[str, list[float]] = {str(k): [] for k in MODES}
    cpu: dict[str, list[float]] = {str(k): [] for k in MODES}
    for _ in range(args.rounds):
        for k in MODES:
            rate, cpu_per_token = decode_rate(model, prompt, args.new_tokens, k)
            rates[str(k)].append(rate)
            cpu[str(k)].append(cpu_per_token)
    median = {k: statistics.median(v) for k, v in rates.items()}
    step = 1 / median["None"]
    logits, _ = model.forward([prompt])
    row = logits[0, -1]
    token = int(np.argmax(row))
    calls = {str(k): per_call(row, token, k) for k in (0, 5, 20)}
    result: dict[str, Any] = {
        "model": "SmolLM2-135M-Instruct fp32",
        "provider": model.provider,
        "vocab": int(row.shape[0]),
        "new_tokens": args.new_tokens,
        "rounds": args.rounds,
        "machine": f"{platform.machine()} {platform.system()} Python {platform.python_version()}",
        "decode_tokens_per_s": {k: round(v, 2) for k, v in median.items()},
        # paired per round (the runs of one round are back to back), so drift in the machine's
        # load cancels out; the median of the rounds' ratios
        "end_to_end_overhead_pct": {
            k: round(100 * (statistics.median(a / b for a, b in zip(rates["None"], v, strict=True)) - 1), 2)
            for k, v in rates.items()
            if k != "None"
        },
        "cpu_overhead_pct": {
            k: round(100 * (statistics.median(b / a for a, b in zip(cpu["None"], v, strict=True)) - 1), 2)
            for k, v in cpu.items()
            if k != "None"
        },
        "cpu_ms_per_token": {k: round(statistics.median(v) * 1e3, 3) for k, v in cpu.items()},
        "token_logprobs_us": {k: round(v * 1e6, 1) for k, v in calls.items()},
        "token_logprobs_pct_of_decode_step": {k: round(100 * v / step, 2) for k, v in calls.items()},
        "decode_step_ms": round(step * 1e3, 3),
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
        "runs": rates,
        "cpu_runs": cpu,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "logprobs.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# logprobs overhead (`python benchmarks/logprobs.py`)",
        "",
        f"{result['model']}, {result['provider']}, {result['machine']}; {args.new_tokens} new tokens, "
        f"greedy, median of {args.rounds} alternating runs.",
        "",
        "| logprobs | decode tokens/s | wall-time overhead | CPU-time overhead | token_logprobs per call "
        "| share of a step |",
        "|---|---|---|---|---|---|",
        f"| None | {median['None']:.1f} | - | - | - | - |",
    ]
    share = result["token_logprobs_pct_of_decode_step"]
    for k in ("0", "5"):
        lines.append(
            f"| {k} | {median[k]:.1f} | {result['end_to_end_overhead_pct'][k]:+.2f}% | "
            f"{result['cpu_overhead_pct'][k]:+.2f}% | {result['token_logprobs_us'][k]:.0f} µs | "
            f"{share[k]:.2f}% |"
        )
    lines.append(
        f"| 20 | (not run end to end) | | | {result['token_logprobs_us']['20']:.0f} µs | "
        f"{result['token_logprobs_pct_of_decode_step']['20']:.2f}% |"
    )
    lines += [
        "",
        f"Decode step (no logprobs): {result['decode_step_ms']:.2f} ms. Load average "
        f"{load_before:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (a shared machine "
        "blurs the end-to-end column; the per-call column is the function alone).",
        "",
    ]
    (RESULTS / "logprobs.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
