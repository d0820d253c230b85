"""One client's rules must not slow the others: a plain request's latency alone and beside clients
whose requests carry costly regex rules.

Starts ``rxstream serve`` (batching on) on the default model (``--model fp32`` / ``int4``; the tiny
random-weight model when it is not cached) and times a plain streamed chat request (greedy,
``--max-tokens`` tokens, request sent -> last byte) alone, then while 2 and 4 other clients send,
back to back, requests with 16 costly ``rxstream.stop_regex`` rules within the server's limits
(``(?i)[\\w\\W]{1,250}z<c>``-like and ``(?:a|b|<c>)*a(?:a|b|\\s){12}Q``-like; every request's
rules are new, so no cache makes them warm). Reports the plain request's median latency in each
setting, the ratio beside/alone (the goal: at most 1.3), and what the costly requests got (done,
failed with an error event, refused with 400) and how long they took.

    .venv/bin/python benchmarks/fairness.py                 # fp32 if cached, else the tiny model
    .venv/bin/python benchmarks/fairness.py --model int4

Results go to ``benchmarks/results/fairness.<model>.md`` (and ``.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import RESULTS, ROOT, choose_model, free_port, wait_ready

_NONCE = itertools.count()


def costly_rules(kind: str) -> list[str]:
    """Regex stops, new for every call (rules seen before are cached, warm).

    ``refused``: the report's 16 rules, within the per-rule limits, too large an automaton together
    (400 at once); ``probed``: 7 rules that blow up on ordinary text (refused by the server's
    sample-text trial, 400); ``streamed``: 7 rules whose runs start only at "dragon", cheap on the
    sample text and costly on the story the model writes (they fail while streaming, on their
    budget).
    """
    n = next(_NONCE)
    if kind == "probed":
        return [f"(?i)[\\w\\W]{{1,250}}z<c{n}x{k}>" for k in range(7)]
    if kind == "streamed":
        return [f"(?i)dragon[\\w\\W]{{1,240}}z<c{n}x{k}>" for k in range(7)]
    rules = []
    for k in range(8):
        rules.append(f"(?i)[\\w\\W]{{1,250}}z<c{n}x{k}>")
        rules.append(f"(?:a|b|<c{n}x{k}>)*a(?:a|b|\\s){{12}}Q{k}")
    return rules


def body(question: str, max_tokens: int, rules: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": "bench",
        "messages": [{"role": "user", "content": question}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
    }
    if rules:
        out["rxstream"] = {"stop_regex": [{"regex": r, "max_hold": 250} for r in rules]}
    return out


async def timed(client: httpx.AsyncClient, url: str, payload: dict[str, Any]) -> tuple[float, str]:
    """Seconds from sending to the last byte, and the outcome (done / error / HTTP status)."""
    t0 = time.perf_counter()
    outcome = "done"
    async with client.stream("POST", f"{url}/v1/chat/completions", json=payload) as response:
        if response.status_code != 200:
            await response.aread()
            return time.perf_counter() - t0, str(response.status_code)
        async for line in response.aiter_lines():
            if line.startswith("data: {") and '"error"' in line and json.loads(line[6:]).get("error"):
                outcome = "error"
    return time.perf_counter() - t0, outcome


async def setting(url: str, kind: str, costly_clients: int, rounds: int, max_tokens: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=costly_clients + 4)
    async with httpx.AsyncClient(timeout=httpx.Timeout(900.0), limits=limits) as client:
        stop = asyncio.Event()
        costly: list[tuple[float, str]] = []

        async def attacker(index: int) -> None:
            while not stop.is_set():
                rules = None if kind == "plain" else costly_rules(kind)
                payload = body(f"({index}) Write a long story about a dragon.", max_tokens, rules)
                costly.append(await timed(client, url, payload))

        tasks = [asyncio.create_task(attacker(i)) for i in range(costly_clients)]
        await asyncio.sleep(1.0 if costly_clients else 0)  # the costly requests are running
        plain = []
        for r in range(rounds):
            question = f"({r}) Write a long story about a dragon."
            seconds, outcome = await timed(client, url, body(question, max_tokens, None))
            if outcome != "done":
                raise RuntimeError(f"the plain request ended with {outcome}")
            plain.append(seconds)
        stop.set()
        await asyncio.gather(*tasks)
    outcomes: dict[str, int] = {}
    for _, outcome in costly:
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return {
        "kind": kind,
        "costly_clients": costly_clients,
        "plain_s": plain,
        "plain_median_s": statistics.median(plain),
        "costly_requests": len(costly),
        "costly_outcomes": outcomes,
        "costly_median_s": statistics.median(s for s, _ in costly) if costly else None,
        "load_avg": os.getloadavg()[0],
    }


KINDS = {
    "none": "the plain request alone",
    "plain": "beside clients sending the same request without rules, back to back (what sharing the "
    "batch costs anyway)",
    "refused": "beside clients sending the report's 16 costly `rxstream.stop_regex` rules, back to back, "
    "new rules each time (within the per-rule limits; too large an automaton together: 400 at once)",
    "probed": "beside clients sending 7 rules `(?i)[\\w\\W]{1,250}z<cN>` (`max_hold` 250), back to back, "
    "new each time (they blow up on the server's sample text: 400 before admission)",
    "streamed": "beside clients sending 7 rules `(?i)dragon[\\w\\W]{1,240}z<cN>`, back to back, new each "
    "time (cheap on the sample text, costly on the story: they fail while streaming, on their budget)",
}


def write(path: Path, meta: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    alone = rows[0]["plain_median_s"]
    control = {r["costly_clients"]: r["plain_median_s"] for r in rows if r["kind"] == "plain"}
    lines = [
        "# A plain request beside clients with costly regex rules",
        "",
        f"- model: {meta['model']}",
        f"- plain request: streamed chat, greedy, `max_tokens={meta['max_tokens']}` (all generated), "
        f"request sent -> last byte, {meta['rounds']} in a row per setting (median)",
        *(f"- `{k}`: {v}" for k, v in KINDS.items()),
        f"- machine: {meta['machine']}",
        f"- command: `{meta['command']}`",
        "",
        "| setting | other clients | plain median s | / alone | / beside plain clients | their requests "
        "| their outcomes | their median s | load avg |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for row in rows:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(row["costly_outcomes"].items())) or "-"
        cm = f"{row['costly_median_s']:.2f}" if row["costly_median_s"] is not None else "-"
        base = control.get(row["costly_clients"])
        vs = f"{row['plain_median_s'] / base:.2f}" if base and row["kind"] not in ("none", "plain") else "-"
        lines.append(
            f"| {row['kind']} | {row['costly_clients']} | {row['plain_median_s']:.2f} "
            f"| {row['plain_median_s'] / alone:.2f} | {vs} | {row['costly_requests']} | {outcomes} | {cm} "
            f"| {row['load_avg']:.1f} |"
        )
    lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    path.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="auto", help="auto (fp32 if cached), fp32, int4, tiny or DIR")
    parser.add_argument(
        "--settings",
        default="none:0,plain:2,refused:2,probed:2,streamed:2,plain:4,refused:4,probed:4,streamed:4",
        help="KIND:CLIENTS, comma-separated; kinds: " + ", ".join(KINDS),
    )
    parser.add_argument("--rounds", type=int, default=5, help="plain requests per setting (default 5)")
    parser.add_argument("--max-tokens", type=int, default=40)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    settings = [(k, int(n)) for k, n in (x.split(":") for x in args.settings.split(",") if x)]
    if any(k not in KINDS for k, _ in settings) or settings[0] != ("none", 0):
        parser.error("--settings: KIND:CLIENTS items, the first none:0, kinds " + ", ".join(KINDS))
    with tempfile.TemporaryDirectory() as tmp:
        model_arg, description = choose_model(args.model, Path(tmp))
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "rxstream", "serve", "--port", str(port), "--model", model_arg]
        cmd += ["--model-name", "bench", "--log-level", "warning"]
        proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        rows = []
        try:
            wait_ready(url, proc)
            asyncio.run(setting(url, "none", 0, 1, 8))  # warm-up
            for kind, clients in settings:
                row = asyncio.run(setting(url, kind, clients, args.rounds, args.max_tokens))
                print(
                    f"{kind} x{clients}: plain median {row['plain_median_s']:.2f} s; theirs "
                    f"{row['costly_requests']} {row['costly_outcomes']}",
                    flush=True,
                )
                rows.append(row)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    name = args.model if args.model in ("fp32", "int4", "tiny") else "auto"
    meta = {
        "model": description,
        "max_tokens": args.max_tokens,
        "rounds": args.rounds,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "command": "python benchmarks/fairness.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    out = args.out or RESULTS / f"fairness.{name}.md"
    write(out, meta, rows)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
