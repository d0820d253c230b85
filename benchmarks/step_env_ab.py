"""A decode step under two process setups: environment variables (huge pages, thread settings)
and/or model directories, each in its own worker process.

The two workers load their model once and then take turns: each runs a greedy generation of
``--tokens`` tokens while the other waits, and reports the median time of its one-row steps
inside ONNX Runtime. The order of the two is reversed every round, and the whole comparison is
run twice with either worker started first (a process started later was faster on this machine
at times), so slow drifts of the machine's speed and the start order cancel. Reports each
side's median step and the geometric mean of the two runs' medians of per-round ratios B/A.

    .venv/bin/python benchmarks/step_env_ab.py --a-env GLIBC_TUNABLES=glibc.malloc.hugetlb=0 \\
        --b-env GLIBC_TUNABLES=glibc.malloc.hugetlb=1 [--a-model DIR] [--b-model DIR] [--rounds 20]

(the default model: the int4-a8 build of the known model, from the cache; pull it first).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from typing import Any


def worker(directory: str) -> int:
    """Load ``directory``; for each line ``N`` on stdin generate N tokens, print the median step."""
    from pass_timer import time_passes  # benchmarks/pass_timer.py
    from reactivex import operators as ops

    from rxstream.backends import OnnxModel
    from rxstream.backends.onnx import BatchConfig

    model = OnnxModel.load(directory, provider="cpu", batching=BatchConfig(draft_tokens=0), spinning="step")
    times = time_passes(model)
    prompt = model.encode_chat([{"role": "user", "content": "Write a short story about a robot."}])
    model.generate(prompt, max_new_tokens=4, ignore_eos=True).pipe(ops.to_list()).run()
    print("ready", flush=True)
    for line in sys.stdin:
        times.clear()
        model.generate(prompt, max_new_tokens=int(line), ignore_eos=True).pipe(ops.to_list()).run()
        print(statistics.median(times[1:]), flush=True)  # the first pass reads the prompt
    return 0


def start(directory: str, env: list[str]) -> subprocess.Popen[str]:
    setting = dict(os.environ)
    for item in env:
        name, _, value = item.partition("=")
        setting[name] = value
    proc = subprocess.Popen(
        [sys.executable, __file__, "--worker", directory],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=setting,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit(f"step_env_ab: the worker for {directory} did not start")
    return proc


def compare(sides: list[tuple[str, list[str]]], rounds: int, tokens: int) -> dict[str, Any]:
    """Median steps of both sides (A, B) and the median of per-round ratios B/A."""
    procs = [start(directory, env) for directory, env in sides]
    steps: list[list[float]] = [[], []]
    try:
        for r in range(rounds):
            for k in (0, 1) if r % 2 == 0 else (1, 0):
                proc = procs[k]
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(f"{tokens}\n")
                proc.stdin.flush()
                steps[k].append(float(proc.stdout.readline()))
    finally:
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(30)
    return {
        "steps_ms": [statistics.median(s) * 1000 for s in steps],
        "ratio": statistics.median(b / a for a, b in zip(*steps, strict=True)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--a-env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--b-env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument(
        "--a-model", default=None, help="model directory of A (default: int4-a8 from the cache)"
    )
    parser.add_argument("--b-model", default=None, help="model directory of B (default: A's)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker)
    from rxstream.backends import default_cache_dir
    from rxstream.backends.convert import KNOWN_MODELS

    a_model = args.a_model or str(
        default_cache_dir() / "models" / f"{KNOWN_MODELS['smollm2'].dirname}-int4-a8"
    )
    b_model = args.b_model or a_model
    a, b = (a_model, args.a_env), (b_model, args.b_env)
    a_first = compare([a, b], args.rounds, args.tokens)
    b_first = compare([b, a], args.rounds, args.tokens)
    ratio = math.sqrt(a_first["ratio"] / b_first["ratio"])
    print(
        json.dumps(
            {
                "a": {"model": a_model, "env": args.a_env},
                "b": {"model": b_model, "env": args.b_env},
                "a_started_first": a_first,
                "b_started_first": b_first,
                "b_over_a": round(ratio, 4),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
