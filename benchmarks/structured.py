"""What constrained decoding costs (SEMANTICS §15), side by side in one run, on SmolLM2 (fp32, CPU):

- **decode**: tokens per second with and without a JSON Schema constraint, one stream and 16
  streams batched (the same prompt and token count; interleaved rounds, the best of each);
- **mask**: the grammar engine's time per token (computing the allowed ids, masking the logits,
  advancing), walked along generated documents;
- **first token**: time to the first token with no grammar, with a grammar compiled before (the
  model's cache) and with one never seen (compiled for the request);
- **engines**: llguidance (the engine rxstream uses) beside outlines-core (when installed:
  ``pip install outlines-core``), compile time and mask time for the same schemas;
- **patches**: ``json_patches`` over 100 KB of JSON fed one character at a time, minus the same
  source without the operator.

    .venv/bin/python benchmarks/structured.py            # writes results/structured.{json,md}
    .venv/bin/python benchmarks/structured.py --quick    # a smoke test (results not written)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import reactivex
from reactivex import operators as ops

from rxstream import SamplingParams
from rxstream.backends import OnnxModel
from rxstream.operators import json_patches
from rxstream.structured import Grammar, OutputFormat, compose

RESULTS = Path(__file__).resolve().parent / "results"

SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "summary": {"type": "string"}},
    "required": ["title", "summary"],
    "additionalProperties": False,
}
"""A schema whose strings let the model write as many tokens as the free run (so both runs decode
the same number of tokens)."""

QUESTION = "Write a long story about a lighthouse keeper, as JSON with a title and a summary."


def _run(
    model: OnnxModel, prompt: list[int], n: int, grammar: Grammar | None, streams: int
) -> tuple[float, int]:
    """(seconds, tokens) for ``streams`` concurrent generations of ``n`` tokens each."""
    lock = threading.Lock()
    left = [streams]
    done = threading.Event()
    counts = [0] * streams
    params = SamplingParams(max_new_tokens=n, ignore_eos=True, temperature=0.0)
    extra = {} if grammar is None else {"grammar": grammar}

    def end(*_: Any) -> None:  # on the batch's thread: never wait there
        with lock:
            left[0] -= 1
            if left[0] == 0:
                done.set()

    start = time.perf_counter()
    for i in range(streams):

        def count(_id: Any, i: int = i) -> None:
            counts[i] += 1

        model.generate(prompt, params, **extra).subscribe(count, end, end)
    done.wait()
    return time.perf_counter() - start, sum(counts)


def decode_rows(model: OnnxModel, rounds: int, n: int) -> list[dict[str, Any]]:
    prompt = model.encode_chat([{"role": "user", "content": QUESTION}])
    grammar = compose(None, OutputFormat.json_schema(SCHEMA))
    rows = []
    for streams in (1, 16):
        best: dict[str, float] = {}
        tokens: dict[str, int] = {}
        _run(model, prompt, 8, grammar, streams)  # warm: compiled, sessions ready
        for _ in range(rounds):
            for name, g in (("free", None), ("constrained", grammar)):
                seconds, count = _run(model, prompt, n, g, streams)
                rate = count / seconds
                if rate > best.get(name, 0.0):
                    best[name], tokens[name] = rate, count
        rows.append(
            {
                "streams": streams,
                "free_tok_s": round(best["free"], 1),
                "constrained_tok_s": round(best["constrained"], 1),
                "slower_pct": round(100 * (1 - best["constrained"] / best["free"]), 1),
                "tokens": tokens,
            }
        )
    return rows


def mask_row(model: OnnxModel, docs: int = 8) -> dict[str, Any]:
    """Per-token engine time along documents the model wrote under the grammar."""
    grammar = compose(None, OutputFormat.json_schema(SCHEMA))
    prompt = model.encode_chat([{"role": "user", "content": QUESTION}])
    gt = model.grammar_tokenizer
    compute, apply = [], []
    logits = np.random.default_rng(0).standard_normal(model.vocab_size).astype(np.float32)
    for seed in range(docs):
        ids = model.generate(prompt, grammar=grammar, temperature=0.8, seed=seed, max_new_tokens=96)
        seq: list[int] = ids.pipe(ops.to_list()).run()
        c = gt.constraint(grammar)
        for token in seq:
            t0 = time.perf_counter()
            c.allowed()
            t1 = time.perf_counter()
            c.mask(logits)
            t2 = time.perf_counter()
            c.advance(token)
            compute.append(t1 - t0)
            apply.append(t2 - t1)
    return {
        "tokens": len(compute),
        "compute_us_median": round(statistics.median(compute) * 1e6, 1),
        "compute_us_p99": round(float(np.percentile(compute, 99)) * 1e6, 1),
        "mask_us_median": round(statistics.median(apply) * 1e6, 1),
    }


def _ttft(model: OnnxModel, prompt: list[int], grammar: Grammar | None) -> float:
    first = threading.Event()
    extra = {} if grammar is None else {"grammar": grammar}
    start = time.perf_counter()
    sub = model.generate(prompt, SamplingParams(max_new_tokens=2), **extra).subscribe(lambda _i: first.set())
    first.wait(60)
    elapsed = time.perf_counter() - start
    sub.dispose()
    time.sleep(0.05)
    return elapsed


def first_token_row(model: OnnxModel, rounds: int) -> dict[str, Any]:
    prompt = model.encode_chat([{"role": "user", "content": QUESTION}])
    cached = compose(None, OutputFormat.json_schema(SCHEMA))
    model.grammar_tokenizer.constraint(cached)
    free, warm, cold = [], [], []
    for r in range(rounds):
        schema = {**SCHEMA, "description": f"round {r} {time.time()}"}  # never compiled before
        fresh = compose(None, OutputFormat.json_schema(schema))
        free.append(_ttft(model, prompt, None))
        warm.append(_ttft(model, prompt, cached))
        cold.append(_ttft(model, prompt, fresh))
    return {
        "free_ms": round(min(free) * 1e3, 1),
        "cached_grammar_ms": round(min(warm) * 1e3, 1),
        "cold_grammar_ms": round(min(cold) * 1e3, 1),
    }


def engine_rows(model: OnnxModel) -> list[dict[str, Any]]:
    import llguidance

    from tests.schema_corpus import CORPUS  # the test corpus: 32 schemas

    gt = model.grammar_tokenizer
    rows = []
    compile_llg = []
    for _name, _q, schema in CORPUS:
        g = compose(None, OutputFormat.json_schema({**schema, "description": str(time.time())}))
        t0 = time.perf_counter()
        llguidance.LLMatcher(gt._llt, g.text, log_level=0)
        compile_llg.append(time.perf_counter() - t0)
    rows.append(
        {
            "engine": f"llguidance {llguidance.__version__}",
            "compile_ms_median": round(statistics.median(compile_llg) * 1e3, 2),
            "compile_ms_max": round(max(compile_llg) * 1e3, 1),
            "lark_grammars": True,
        }
    )
    try:
        import outlines_core
        from outlines_core import Index, Vocabulary
        from outlines_core.json_schema import build_regex_from_schema
    except ImportError:
        return rows
    vocab = Vocabulary(min(model.eos_token_ids), _byte_vocab(model.tokenizer))
    compile_oc = []
    for _name, _q, schema in CORPUS:
        t0 = time.perf_counter()
        try:
            Index(build_regex_from_schema(json.dumps(schema)), vocab)
        except Exception:
            continue
        compile_oc.append(time.perf_counter() - t0)
    version = getattr(outlines_core, "__version__", "")
    rows.append(
        {
            "engine": f"outlines-core {version}".strip(),
            "compile_ms_median": round(statistics.median(compile_oc) * 1e3, 1),
            "compile_ms_max": round(max(compile_oc) * 1e3, 1),
            "compiled": len(compile_oc),
            "lark_grammars": False,
        }
    )
    return rows


def _byte_vocab(tokenizer: Any) -> dict[bytes, list[int]]:
    """A byte-level BPE vocabulary as bytes -> ids (GPT-2's byte-to-character table undone)."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    back = {chr(c): b for b, c in zip(bs, cs, strict=True)}
    special = {t.content for t in tokenizer.get_added_tokens_decoder().values()}
    out: dict[bytes, list[int]] = {}
    for text, i in tokenizer.get_vocab().items():
        if text not in special:
            out.setdefault(bytes(back[c] for c in text), []).append(i)
    return out


def patch_row(rounds: int) -> dict[str, Any]:
    doc = {
        "items": [
            {
                "id": i,
                "name": f"item {i}",
                "tags": ["a", "b"],
                "price": i * 1.5,
                "ok": i % 2 == 0,
                "note": None,
            }
            for i in range(1050)
        ]
    }
    chars = list(json.dumps(doc))
    with_op, without = [], []
    for _ in range(rounds):
        t0 = time.process_time()
        reactivex.from_iterable(chars).pipe(ops.to_list()).run()
        t1 = time.process_time()
        reactivex.from_iterable(chars).pipe(json_patches(), ops.to_list()).run()
        t2 = time.process_time()
        without.append(t1 - t0)
        with_op.append(t2 - t1)
    return {
        "bytes": len(chars),
        "operator_ms": round((min(with_op) - min(without)) * 1e3, 1),
        "source_ms": round(min(without) * 1e3, 1),
    }


def markdown(result: dict[str, Any]) -> str:
    lines = ["# Structured output", "", f"Machine: {result['machine']}; SmolLM2-135M-Instruct fp32, CPU.", ""]
    lines += [
        "## Decode (greedy, same tokens)",
        "",
        "| streams | free tok/s | constrained tok/s | slower |",
        "|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['streams']} | {r['free_tok_s']} | {r['constrained_tok_s']} | {r['slower_pct']}% |"
        for r in result["decode"]
    ]
    m = result["mask"]
    lines += [
        "",
        "## Engine time per token",
        "",
        f"{m['tokens']} tokens: allowed ids {m['compute_us_median']} µs median "
        f"({m['compute_us_p99']} µs p99), masking the logits {m['mask_us_median']} µs.",
        "",
    ]
    f = result["first_token"]
    lines += [
        "## First token",
        "",
        "| no grammar | cached grammar | new grammar |",
        "|---:|---:|---:|",
        f"| {f['free_ms']} ms | {f['cached_grammar_ms']} ms | {f['cold_grammar_ms']} ms |",
        "",
    ]
    lines += [
        "## Engines (compile a schema of the test corpus for SmolLM2's vocabulary)",
        "",
        "| engine | median | max | Lark grammars |",
        "|---|---:|---:|---|",
    ]
    lines += [
        f"| {r['engine']} | {r['compile_ms_median']} ms | {r['compile_ms_max']} ms "
        f"| {'yes' if r['lark_grammars'] else 'no'} |"
        for r in result["engines"]
    ]
    p = result["patches"]
    lines += [
        "",
        "## json_patches",
        "",
        f"{p['bytes']} bytes one character at a time: {p['operator_ms']} ms of CPU for the operator "
        f"(the source alone: {p['source_ms']} ms).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    rounds, n = (1, 16) if args.quick else (args.rounds, args.tokens)
    model = OnnxModel.from_pretrained("smollm2", progress=False)
    t0 = time.perf_counter()
    model.grammar_tokenizer  # noqa: B018  (built once per model)
    tokenizer_ms = round((time.perf_counter() - t0) * 1e3, 1)
    result = {
        "machine": f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}",
        "grammar_tokenizer_ms": tokenizer_ms,
        "decode": decode_rows(model, rounds, n),
        "mask": mask_row(model, 2 if args.quick else 8),
        "first_token": first_token_row(model, rounds),
        "engines": engine_rows(model),
        "patches": patch_row(rounds),
    }
    print(json.dumps(result, indent=1))
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "structured.json").write_text(json.dumps(result, indent=1) + "\n")
        (RESULTS / "structured.md").write_text(
            markdown(result) + f"\nThe grammar tokenizer: built once per model in {tokenizer_ms} ms.\n"
        )


if __name__ == "__main__":
    main()
