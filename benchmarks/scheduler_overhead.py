"""What continuous batching costs one stream: the same greedy generation run through the batch
scheduler and through its own loop, interleaved (so both see the same load from other processes).

For each run it reports the wall time, the time inside ONNX Runtime (every forward pass goes
through ``DecoderSession.run_bound``) and the time per step spent outside it (the scheduler's or
the loop's own Python work).

    .venv/bin/python benchmarks/scheduler_overhead.py              # the default model (fp32) from the cache
    .venv/bin/python benchmarks/scheduler_overhead.py --model int4 --rounds 4
"""

from __future__ import annotations

import argparse
import statistics
import time

from pass_timer import time_passes  # benchmarks/pass_timer.py
from reactivex import operators as ops

from rxstream.backends import OnnxModel, default_cache_dir
from rxstream.backends.convert import KNOWN_MODELS


def timed_model(directory: str, batching: bool) -> tuple[OnnxModel, list[float]]:
    """The model, and a list that collects the seconds of each forward pass."""
    model = OnnxModel.load(directory, provider="cpu", spinning=False, batching=batching)
    return model, time_passes(model)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default="fp32", help="fp32, int4, int4-a8 (the default model's builds) or DIR"
    )
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    directory = args.model
    if args.model in ("fp32", "int4", "int4-a8"):
        directory = str(default_cache_dir() / "models" / f"{KNOWN_MODELS['smollm2'].dirname}-{args.model}")
    models = {"batched": timed_model(directory, True), "own loop": timed_model(directory, False)}
    prompt = models["batched"][0].encode_chat([{"role": "user", "content": "Explain how a rainbow forms."}])
    outside: dict[str, list[float]] = {name: [] for name in models}
    rates: dict[str, list[float]] = {name: [] for name in models}
    for model, _ in models.values():  # warm-up
        model.generate(prompt, max_new_tokens=8, ignore_eos=True).pipe(ops.to_list()).run()
    for r in range(args.rounds):
        order = list(models) if r % 2 == 0 else list(reversed(models))
        for name in order:
            model, passes = models[name]
            passes.clear()
            start = time.perf_counter()
            model.generate(prompt, max_new_tokens=args.tokens, ignore_eos=True).pipe(ops.to_list()).run()
            wall = time.perf_counter() - start
            outside[name].append((wall - sum(passes)) / len(passes) * 1000)
            rates[name].append(args.tokens / wall)
            print(
                f"{name:>8}: {args.tokens / wall:6.1f} tok/s, "
                f"inside ONNX Runtime {sum(passes) * 1000:6.0f} ms, outside {outside[name][-1]:.2f} ms/step",
                flush=True,
            )
    for name in models:
        print(
            f"{name:>8}: median {statistics.median(rates[name]):.1f} tok/s, "
            f"outside ONNX Runtime median {statistics.median(outside[name]):.2f} ms/step"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
