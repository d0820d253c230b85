"""What the ``measure`` operator costs per token (SEMANTICS §15), side by side in one run:

- **plain**: the pipeline as a user pipes it (no figures);
- **measure**: the same stages inside ``measure(Meter(), ...)`` (time to first token, gaps,
  tokens and characters, each stage's and each operator's held time);
- **do_action**: the way an RxPY user times a pipeline by hand: ``ops.do_action`` with a
  ``time.perf_counter()`` after each stage (timestamps only: no held time, no figures).

Pipelines: ``detokenize -> stop (two strings) -> replace (one rule)`` as three stages, and
``chat_pipeline`` (the Qwen3 route: reasoning, answer, tool calls) as one stage. Tokens: the
prose of ``gateway.py``'s double through SmolLM2's tokenizer when it is in the cache (else the
tiny model's), fed one id per item to many streams. CPU time (``time.process_time``), the best
of several interleaved rounds (this machine is noisy); the figure that matters is the
difference per token, measure minus plain.

    .venv/bin/python benchmarks/meter.py               # 64 streams x 1024 tokens, 5 rounds
    .venv/bin/python benchmarks/meter.py --quick       # a smoke test (results not written)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import reactivex
from reactivex import operators as ops
from reactivex.subject import Subject

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rxstream.chat import ChatPlan
from rxstream.families import family
from rxstream.operators import Meter, chat_pipeline, detokenize, measure, replace, stop

__all__ = ["meter_rows"]

RESULTS = Path(__file__).resolve().parent / "results"


_Op = Callable[[reactivex.Observable[Any]], reactivex.Observable[Any]]


def _stages(tokenizer: Any, kind: str) -> list[_Op]:
    if kind == "text":
        return [detokenize(tokenizer), stop(["\n\nUser:", "<|im_end|>"]), replace({"  ": " "})]
    plan = ChatPlan(family("qwen3").spec, route_prompt="<think>\n")
    return [chat_pipeline(tokenizer, plan, stop=["\n\nUser:"])]


def _timestamps(stages: list[Any]) -> list[Any]:
    out: list[Any] = []
    stamps: list[float] = []
    clock = time.perf_counter
    for stage in stages:
        out.append(stage)
        out.append(ops.do_action(on_next=lambda _v: stamps.append(clock())))
    return out


def _run(tokenizer: Any, ids: list[int], streams: int, kind: str, how: str) -> tuple[float, int]:
    """CPU seconds to push ``ids`` through ``streams`` pipelines, one id per stream in turn; and
    the characters out (the same for every ``how``)."""
    chars = 0

    def count(item: Any) -> None:
        nonlocal chars
        text = item if isinstance(item, str) else getattr(item, "text", "")
        chars += len(text) if isinstance(text, str) else 0

    subjects: list[Subject[int]] = []
    meters: list[Meter] = []
    for _ in range(streams):
        subject: Subject[int] = Subject()
        stages = _stages(tokenizer, kind)
        if how == "measure":
            meter = Meter()
            meters.append(meter)
            piped = subject.pipe(measure(meter, *stages))
        elif how == "do_action":
            piped = subject.pipe(*_timestamps(stages))
        else:
            piped = subject.pipe(*stages)
        piped.subscribe(count)
        subjects.append(subject)
    start = time.process_time()
    for token in ids:
        for subject in subjects:
            subject.on_next(token)
    for subject in subjects:
        subject.on_completed()
    seconds = time.process_time() - start
    for meter in meters:  # the figures are there (and consistent with the output)
        assert meter.report().tokens == len(ids)
    return seconds, chars


def meter_rows(tokenizer_file: Path, streams: int, tokens: int, rounds: int) -> list[dict[str, Any]]:
    from gateway import Script  # type: ignore[import-not-found]
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    ids = Script(tokenizer_file).ids
    ids = (ids * (tokens // len(ids) + 1))[:tokens]
    rows = []
    for kind in ("text", "chat"):
        best: dict[str, float] = {}
        chars: dict[str, int] = {}
        for _ in range(rounds):
            for how in ("plain", "measure", "do_action"):
                seconds, out = _run(tokenizer, ids, streams, kind, how)
                best[how] = min(best.get(how, seconds), seconds)
                chars[how] = out
        assert len(set(chars.values())) == 1, chars  # the meter changes nothing
        n = streams * tokens
        per = {how: best[how] / n * 1e6 for how in best}
        rows.append(
            {
                "pipeline": kind,
                "streams": streams,
                "tokens": n,
                "plain_us_per_token": per["plain"],
                "measure_us_per_token": per["measure"],
                "do_action_us_per_token": per["do_action"],
                "measure_cost_us_per_token": per["measure"] - per["plain"],
                "do_action_cost_us_per_token": per["do_action"] - per["plain"],
            }
        )
    return rows


def write(rows: list[dict[str, Any]], what: str, suffix: str) -> None:
    lines = [
        "# Meter benchmark: what `measure` costs per token",
        "",
        f"- tokens: {what}; one id per item, round robin over the streams; CPU time, best of the rounds",
        "- cost = the pipeline with the meter (or with do_action timestamps) minus the plain pipeline",
        "",
        "| pipeline | streams | tokens | plain µs/token | measure µs/token | do_action µs/token "
        "| measure cost µs/token | do_action cost µs/token |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['pipeline']} | {r['streams']} | {r['tokens']} | {r['plain_us_per_token']:.2f} "
            f"| {r['measure_us_per_token']:.2f} | {r['do_action_us_per_token']:.2f} "
            f"| {r['measure_cost_us_per_token']:.2f} | {r['do_action_cost_us_per_token']:.2f} |"
        )
    (RESULTS / f"meter.md{suffix}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (RESULTS / f"meter.json{suffix}").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.streams, args.tokens, args.rounds = 4, 128, 1
    import tempfile

    from gateway import tokenizer_dir  # type: ignore[import-not-found]

    with tempfile.TemporaryDirectory() as tmp:
        directory, what = tokenizer_dir(Path(tmp))
        rows = meter_rows(directory / "tokenizer.json", args.streams, args.tokens, args.rounds)
    for r in rows:
        print(
            f"{r['pipeline']:5} plain {r['plain_us_per_token']:.2f} µs/token, measure +"
            f"{r['measure_cost_us_per_token']:.2f}, do_action +{r['do_action_cost_us_per_token']:.2f}"
        )
    write(rows, what, ".tmp" if args.quick else "")


if __name__ == "__main__":
    main()
