"""Two builds' decode step side by side: ONNX Runtime's time per one-row decode step of model
directory A against B (a converter change against the build before it), greedy, one stream.

Both models run in one process, alternating generations, each step timed inside ONNX Runtime.
The model loaded second was consistently faster in one process (about 7% on 2 cores, identical
builds), so the comparison runs twice in fresh processes, A loaded first and then B first, and
reports the geometric mean of the two medians of per-round ratios: that bias cancels.

    .venv/bin/python benchmarks/step_ab.py DIR_A DIR_B [--rounds 20] [--tokens 24]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from typing import Any


def measure(first: str, second: str, rounds: int, tokens: int) -> dict[str, Any]:
    """Median step times of both (in load order) and the median of the per-round ratios first/second."""
    from pass_timer import time_passes  # benchmarks/pass_timer.py
    from reactivex import operators as ops

    from rxstream.backends import OnnxModel
    from rxstream.backends.onnx import BatchConfig

    models = [
        OnnxModel.load(d, provider="cpu", batching=BatchConfig(draft_tokens=0), spinning="step")
        for d in (first, second)
    ]
    times = [time_passes(model) for model in models]
    prompt = models[0].encode_chat([{"role": "user", "content": "Write a short story about a robot."}])
    ratios: list[float] = []
    steps: list[list[float]] = [[], []]
    for r in range(rounds):
        medians = [0.0, 0.0]
        for k in (0, 1) if r % 2 == 0 else (1, 0):
            times[k].clear()
            models[k].generate(prompt, max_new_tokens=tokens, ignore_eos=True).pipe(ops.to_list()).run()
            medians[k] = statistics.median(times[k][1:])  # the first pass reads the prompt
            steps[k].append(medians[k])
        ratios.append(medians[0] / medians[1])
    return {
        "steps_ms": [statistics.median(s) * 1000 for s in steps],
        "ratio": statistics.median(ratios),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--inner", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        print(json.dumps(measure(args.inner[0], args.inner[1], args.rounds, args.tokens)))
        return 0
    runs = []
    for first, second in ((args.a, args.b), (args.b, args.a)):
        cmd = [sys.executable, __file__, args.a, args.b, "--rounds", str(args.rounds)]
        cmd += ["--tokens", str(args.tokens), "--inner", first, second]
        runs.append(json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout))
    a_first, b_first = runs
    ratio = math.sqrt(a_first["ratio"] / b_first["ratio"])  # A/B with either loaded first
    bias = math.sqrt(a_first["ratio"] * b_first["ratio"])  # the second-loaded model's edge
    a_ms, b_ms = a_first["steps_ms"], b_first["steps_ms"]
    print(f"A loaded first: A {a_ms[0]:.2f} ms, B {a_ms[1]:.2f} ms, A/B {a_first['ratio']:.3f}")
    print(f"B loaded first: B {b_ms[0]:.2f} ms, A {b_ms[1]:.2f} ms, B/A {b_first['ratio']:.3f}")
    print(f"A/B step time: {ratio:.3f} (load-order bias {bias:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
