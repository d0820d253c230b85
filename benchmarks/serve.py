"""Benchmark ``rxstream serve``: 1, 4, 16 and 32 concurrent streaming clients, continuous batching
on and off side by side, and llama.cpp's ``llama-server`` on the same GGUF beside it.

Starts ``rxstream serve`` in a subprocess once per mode (``on``: ``--batching on``, the requests
share one decode step per token, and a prompt that starts like one in the batch copies those
positions; ``noshare``: batching on with ``--prefix-sharing off``, every prompt read in full;
``off``: ``--batching off``, one generation loop per request, the mode before batching), on the
default model when it is in the cache (``--model int4`` for its int4 build), else the tiny
random-weight model. For each concurrency level it runs that many clients at once, each
streaming ``/v1/chat/completions`` requests back to back (greedy; every prompt distinct, but all
begin with the chat template's default system prompt, as chats do). Reports aggregate generated
tokens per second (completion tokens from the usage chunk / wall time of the level), p50/p95
time to first text (TTFT, from sending the request to the first non-empty content delta), p50
request time and the server process's peak resident memory during the level (sampled every
20 ms).

    .venv/bin/python benchmarks/serve.py                      # default model if cached, else tiny
    .venv/bin/python benchmarks/serve.py --model int4
    .venv/bin/python benchmarks/serve.py --model tiny --levels 1,4 --modes on
    .venv/bin/python benchmarks/serve.py --provider cuda --max-concurrency 32
    .venv/bin/python benchmarks/serve.py --model fp32,int4,int4-a8 --modes on --llama-server PATH

With ``--llama-server`` (default: ``llama-server`` when it is on PATH; repeat it to compare
builds), llama.cpp's server runs the
GGUF the known model is converted from (``-np`` = the largest level, continuous batching, each
thread setting of ``--llama-threads``: ``2p`` is 2 threads with ``OMP_WAIT_POLICY=PASSIVE``), with
the same clients, interleaved with rxstream's servers level by level; the results end with each
rxstream server's ratios against llama.cpp's best thread setting at that level (how to build it:
docs/benchmarks.md).

Results go to ``benchmarks/results/serve.md`` (and ``serve.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

QUANTIZATIONS = ("fp32", "int4", "int4-a8")
"""The builds of the known model (rxstream.backends.onnx.QUANTIZATIONS)."""

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

QUESTIONS = [
    "Explain how a rainbow forms.",
    "Write a short story about a lighthouse keeper.",
    "What are the benefits of regular exercise?",
    "Describe the water cycle in simple terms.",
    "Give some tips for learning a new language.",
    "Why is the sky blue?",
    "How do bees make honey?",
    "What makes a good friend?",
]


@dataclass
class RequestResult:
    ttft: float | None
    total: float
    tokens: int
    text_chars: int
    decode: float | None = None
    """(tokens - 1) / (last content chunk - first): the request's decode rate after its first token."""


@dataclass
class LevelResult:
    concurrency: int
    requests: int
    wall_s: float
    tokens: int
    tokens_per_s: float
    ttft_p50_ms: float
    ttft_p95_ms: float
    decode_p50: float
    """The median request's decode rate, tokens/s after its first (one stream's decoding speed)."""
    request_p50_s: float
    peak_rss_mb: float
    load_avg: float = 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def choose_model(requested: str, workdir: Path) -> tuple[str, str]:
    """``(model argument for rxstream serve, description)``."""
    if requested == "tiny":
        from rxstream.backends import build_tiny_model

        return str(build_tiny_model(workdir / "tiny")), "tiny random-weight model (build_tiny_model)"
    if requested not in ("auto", *QUANTIZATIONS):
        return requested, requested
    from rxstream.backends import default_cache_dir
    from rxstream.backends.convert import KNOWN_MODELS

    quantization = "fp32" if requested == "auto" else requested
    directory = default_cache_dir() / "models" / f"{KNOWN_MODELS['smollm2'].dirname}-{quantization}"
    if (directory / ".complete").is_file():
        return str(directory), f"SmolLM2-135M-Instruct ({quantization} ONNX, from the cache)"
    print("default model not in the cache: using the tiny model", file=sys.stderr)
    return choose_model("tiny", workdir)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


class RssSampler:
    """The peak resident memory of a process, sampled on a thread (Linux ``/proc``; 0 elsewhere)."""

    def __init__(self, pid: int, every: float = 0.02) -> None:
        self.pid = pid
        self.every = every
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _read(self) -> int:
        try:
            with open(f"/proc/{self.pid}/status", encoding="ascii") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kb = max(self.peak_kb, self._read())
            self._stop.wait(self.every)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_kb = max(self.peak_kb, self._read())


async def one_request(client: httpx.AsyncClient, url: str, question: str, max_tokens: int) -> RequestResult:
    body = {
        "model": "bench",
        "messages": [{"role": "user", "content": question}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    t0 = time.perf_counter()
    ttft: float | None = None
    usage: int | None = None
    last = 0.0
    chunks = 0
    chars = 0
    async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                break
            event = json.loads(data)
            if "error" in event:
                raise RuntimeError(event["error"]["message"])
            if event.get("usage"):
                usage = int(event["usage"]["completion_tokens"])
            for choice in event.get("choices", []):
                content = (choice.get("delta") or {}).get("content") or ""
                if content:
                    chunks += 1
                    chars += len(content)
                    last = time.perf_counter() - t0
                    if ttft is None:
                        ttft = last
    # the usage chunk's count; a server without one: the content chunks (a token each)
    tokens = chunks if usage is None else usage
    decode = (tokens - 1) / (last - ttft) if ttft is not None and last > ttft and tokens > 1 else None
    return RequestResult(ttft, time.perf_counter() - t0, tokens, chars, decode)


async def run_level(
    url: str, concurrency: int, requests_per_client: int, max_tokens: int, pid: int | None = None
) -> LevelResult:
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0), limits=limits) as client:

        async def worker(index: int) -> list[RequestResult]:
            out = []
            for r in range(requests_per_client):
                # distinct prompts (no two requests share a whole prompt; the template's prefix they do)
                question = f"({concurrency}.{index}.{r}) " + QUESTIONS[(index + r) % len(QUESTIONS)]
                out.append(await one_request(client, url, question, max_tokens))
            return out

        with RssSampler(pid if pid is not None else 0) as rss:
            t0 = time.perf_counter()
            per_client = await asyncio.gather(*(worker(i) for i in range(concurrency)))
            wall = time.perf_counter() - t0
    results = [r for rs in per_client for r in rs]
    tokens = sum(r.tokens for r in results)
    ttfts = [r.ttft for r in results if r.ttft is not None]
    return LevelResult(
        concurrency=concurrency,
        requests=len(results),
        wall_s=wall,
        tokens=tokens,
        tokens_per_s=tokens / wall,
        ttft_p50_ms=percentile(ttfts, 0.5) * 1000,
        ttft_p95_ms=percentile(ttfts, 0.95) * 1000,
        decode_p50=percentile([r.decode for r in results if r.decode is not None], 0.5),
        request_p50_s=statistics.median(r.total for r in results),
        peak_rss_mb=rss.peak_kb / 1024,
        load_avg=os.getloadavg()[0],
    )


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{proc.args!r} did not become ready")


MODE_TITLES = {
    "on": "continuous batching (`--batching on`): one decode step for every request, shared prompt "
    "prefixes read once",
    "noshare": "continuous batching without prefix sharing (`--batching on --prefix-sharing off`): "
    "every prompt read in full",
    "off": "one generation per request (`--batching off`): a loop per request on its own thread",
}


@dataclass
class Server:
    """One server under test: an ``rxstream serve`` (a model in a mode) or a ``llama-server``."""

    label: str
    title: str
    kind: str  # "rxstream" or "llama"
    cmd: list[str]
    env: dict[str, str]
    url: str
    proc: subprocess.Popen[bytes] | None = None


def rxstream_server(model_arg: str, description: str, mode: str, args: argparse.Namespace) -> Server:
    port = free_port()
    cmd = [sys.executable, "-m", "rxstream", "serve", "--port", str(port), "--model", model_arg]
    batching = "off" if mode == "off" else "on"
    sharing = "off" if mode == "noshare" else "on"
    cmd += ["--model-name", "bench", "--batching", batching, "--provider", args.provider]
    cmd += ["--prefix-sharing", sharing]
    cmd += ["--max-concurrency", str(args.max_concurrency), "--log-level", "warning"]
    return Server(
        label=f"rxstream {description.split('(')[-1].split()[0]} {mode}",
        title=f"rxstream, {description}: {MODE_TITLES[mode]}",
        kind="rxstream",
        cmd=cmd,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        url=f"http://127.0.0.1:{port}",
    )


def no_mmap_flags(binary: Path) -> list[str]:
    """The flags that make ``binary`` read the model into allocated memory instead of mapping the
    file (newer builds: ``-lm none``; older: ``--no-mmap``)."""
    help_text = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60).stdout
    return ["-lm", "none"] if "--load-mode" in help_text else ["--no-mmap"]


def llama_servers(binary: Path, gguf: Path, slots: int, settings: list[str], tag: str = "") -> list[Server]:
    """``llama-server`` on ``gguf`` once per thread setting (``2``; ``2p``: ``OMP_WAIT_POLICY=PASSIVE``;
    ``2h``: the model read into memory, not mapped, with glibc's huge-page tunable -- the 2 MiB pages
    ``rxstream serve`` gets); ``tag`` names the build when several are compared."""
    out = []
    for setting in settings:
        threads = setting.rstrip("ph")
        port = free_port()
        env = {**os.environ}
        if setting.endswith("p"):
            env["OMP_WAIT_POLICY"] = "PASSIVE"
        cmd = [str(binary), "-m", str(gguf), "--port", str(port), "-np", str(slots), "-c", str(256 * slots)]
        cmd += ["-cb", "--no-webui", "-t", threads, "-tb", threads, "--log-disable"]
        policy = ", OMP_WAIT_POLICY=PASSIVE" if setting.endswith("p") else ""
        if setting.endswith("h"):
            env["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1"
            cmd += no_mmap_flags(binary)
            policy = ", huge pages (not mapped, GLIBC_TUNABLES=glibc.malloc.hugetlb=1)"
        out.append(
            Server(
                label=f"llama.cpp{tag} -t {threads}{policy}",
                title=f"llama.cpp{tag} `llama-server` on {gguf.name}: `-np {slots} -cb -t {threads}`{policy}",
                kind="llama",
                cmd=cmd,
                env=env,
                url=f"http://127.0.0.1:{port}",
            )
        )
    return out


def level_table(levels: list[LevelResult]) -> list[str]:
    lines = [
        "| clients | requests | tokens | wall s | aggregate tokens/s | decode tok/s p50 | TTFT p50 ms "
        "| TTFT p95 ms | request p50 s | peak RSS MB | load avg after |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for lv in levels:
        lines.append(
            f"| {lv.concurrency} | {lv.requests} | {lv.tokens} | {lv.wall_s:.2f} | {lv.tokens_per_s:.1f} "
            f"| {lv.decode_p50:.1f} | {lv.ttft_p50_ms:.0f} | {lv.ttft_p95_ms:.0f} | {lv.request_p50_s:.2f} "
            f"| {lv.peak_rss_mb:.0f} | {lv.load_avg:.1f} |"
        )
    return lines


def ratios(servers: list[Server], results: dict[str, list[LevelResult]]) -> list[dict[str, Any]]:
    """Each rxstream server against llama.cpp's best thread setting (most tokens/s) at each level."""
    llama = [s.label for s in servers if s.kind == "llama"]
    out: list[dict[str, Any]] = []
    if not llama:
        return out
    for server in servers:
        if server.kind != "rxstream":
            continue
        for i, ours in enumerate(results[server.label]):
            best = max((results[label][i] for label in llama), key=lambda lv: lv.tokens_per_s)
            best_label = next(label for label in llama if results[label][i] is best)
            out.append(
                {
                    "server": server.label,
                    "clients": ours.concurrency,
                    "llama": best_label,
                    "tokens_per_s": ours.tokens_per_s / best.tokens_per_s,
                    "decode": ours.decode_p50 / best.decode_p50,
                    "ttft_p50": ours.ttft_p50_ms / best.ttft_p50_ms,
                    "load_avg": ours.load_avg,
                }
            )
    return out


def summary(table: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per rxstream server and client count run several times: the median of its ratios against
    llama.cpp, with the lowest and highest (one run's ratio is at the mercy of the machine's drift)."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in table:
        groups.setdefault((r["server"], r["clients"]), []).append(r)
    out = []
    for (server, clients), rows in groups.items():
        if len(rows) < 2:
            continue
        entry: dict[str, Any] = {"server": server, "clients": clients, "runs": len(rows)}
        for key in ("tokens_per_s", "decode", "ttft_p50"):
            values = sorted(r[key] for r in rows)
            entry[key] = {"median": statistics.median(values), "low": values[0], "high": values[-1]}
        entry["at_least_1"] = sum(1 for r in rows if r["tokens_per_s"] >= 1.0)
        out.append(entry)
    return out


def write_results(
    path: Path, meta: dict[str, Any], servers: list[Server], results: dict[str, list[LevelResult]]
) -> None:
    lines = [
        "# `rxstream serve` benchmark",
        "",
        f"- provider: {meta['provider']}",
        f"- requests: chat completions, streaming, greedy, `max_tokens={meta['max_tokens']}`, "
        f"{meta['requests_per_client']} request(s) per client back to back, every prompt distinct "
        "(all begin with the chat template's system prompt: 28 tokens in common); "
        "tokens counted from the usage chunk (llama.cpp without one: its content chunks, a token "
        "each); TTFT = request sent -> first non-empty content delta; "
        "peak RSS = the server process's resident memory, highest sample (every 20 ms) during the level",
        f"- rxstream: `--max-concurrency {meta['max_concurrency']}` (generation slots; with batching: "
        "the batch size)",
        "- the servers run side by side and each level is run on each server in turn, so all see about "
        "the same load from other processes; `load avg after` is the machine's 1-minute load average "
        "when the level ended",
        f"- machine: {meta['machine']}",
        f"- llama.cpp: {meta['llama_version']}",
        f"- command: `{meta['command']}`",
    ]
    table = meta.get("ratios") or []
    if table:
        lines += [
            "",
            "## against llama.cpp (its best thread setting at each level)",
            "",
            "| server | clients | tokens/s vs llama.cpp | decode p50 vs llama.cpp | TTFT p50 vs llama.cpp "
            "| llama.cpp's best | load avg |",
            "| --- | ---: | ---: | ---: | ---: | --- | ---: |",
        ]
        for r in table:
            lines.append(
                f"| {r['server']} | {r['clients']} | {r['tokens_per_s']:.2f}x | {r['decode']:.2f}x "
                f"| {r['ttft_p50']:.2f}x "
                f"| {r['llama']} | {r['load_avg']:.1f} |"
            )
    groups = meta.get("summary") or []
    if groups:
        lines += [
            "",
            "## levels run several times: median (lowest-highest) of the ratios",
            "",
            "| server | clients | runs | tokens/s vs llama.cpp | runs >= 1.0x | decode p50 | TTFT p50 |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for g in groups:
            cells = [
                f"{g[k]['median']:.2f}x ({g[k]['low']:.2f}-{g[k]['high']:.2f})"
                for k in ("tokens_per_s", "decode", "ttft_p50")
            ]
            lines.append(
                f"| {g['server']} | {g['clients']} | {g['runs']} | {cells[0]} | {g['at_least_1']} "
                f"| {cells[1]} | {cells[2]} |"
            )
    for server in servers:
        lines += ["", f"## {server.title}", "", *level_table(results[server.label])]
    lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    data = {
        "meta": meta,
        "runs": [
            {"server": s.label, "title": s.title, "levels": [asdict(lv) for lv in results[s.label]]}
            for s in servers
        ],
    }
    path.with_suffix(".json").write_text(json.dumps(data, indent=2), encoding="utf-8")


def llama_version(binary: str | None) -> str:
    """``llama-server --version``'s line, or why there is none."""
    if binary is None:
        return "not run (no llama-server on PATH, or --llama-server none)"
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except OSError as exc:
        return f"{binary}: {exc}"
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("version")]
    return f"`{Path(binary).name}` {lines[0] if lines else '(no version line)'}"


def default_gguf() -> Path:
    from rxstream.backends import default_cache_dir
    from rxstream.backends.convert import KNOWN_MODELS

    return default_cache_dir() / "downloads" / KNOWN_MODELS["smollm2"].member.rsplit("/", 1)[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model",
        default="auto",
        help="comma-separated: auto (fp32 if cached), fp32, int4, int4-a8, tiny or DIR (default auto)",
    )
    parser.add_argument("--provider", default="cpu", choices=("auto", "cpu", "cuda"))
    parser.add_argument(
        "--levels", default="1,4,16,32", help="comma-separated client counts (default 1,4,16,32)"
    )
    parser.add_argument("--max-tokens", type=int, default=64, help="max_tokens per request (default 64)")
    parser.add_argument("--requests-per-client", type=int, default=2, help="requests per client (default 2)")
    parser.add_argument(
        "--max-concurrency", type=int, default=32, help="server generation slots / batch size (default 32)"
    )
    parser.add_argument(
        "--modes",
        default="on,noshare,off",
        help="modes to run, in order: on (batching), noshare (batching, no prefix sharing), off "
        "(default on,noshare,off)",
    )
    parser.add_argument(
        "--llama-server",
        action="append",
        default=None,
        metavar="PATH",
        help="llama.cpp's llama-server binary; repeat to compare builds, each tagged with its build "
        "folder (default: llama-server on PATH; 'none' to leave it out)",
    )
    parser.add_argument(
        "--llama-gguf", type=Path, default=None, help="its model (default: the known model's GGUF)"
    )
    parser.add_argument(
        "--llama-threads",
        default="1,2,2p",
        help="llama-server thread settings (2p: 2 threads, OMP_WAIT_POLICY=PASSIVE; 2h: 2 threads, the "
        "model in huge pages; default 1,2,2p)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "serve.md")
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",") if x]
    modes = [m for m in args.modes.split(",") if m]
    if not modes or any(m not in MODE_TITLES for m in modes):
        parser.error("--modes takes on, noshare and/or off")
    binaries = [Path(b) for b in (args.llama_server or []) if b != "none"]
    if args.llama_server is None and shutil.which("llama-server"):
        binaries = [Path(str(shutil.which("llama-server")))]

    load_at_start = os.getloadavg()[0]
    servers: list[Server] = []
    with tempfile.TemporaryDirectory() as tmp:
        descriptions = []
        for requested in [m for m in args.model.split(",") if m]:
            model_arg, description = choose_model(requested, Path(tmp))
            descriptions.append(description)
            servers += [rxstream_server(model_arg, description, mode, args) for mode in modes]
        if binaries:
            gguf = args.llama_gguf or default_gguf()
            if not gguf.is_file():
                parser.error(
                    f"no GGUF at {gguf}: pull the model first (rxstream models pull) or give --llama-gguf"
                )
            settings = [t for t in args.llama_threads.split(",") if t]
            for binary in binaries:
                tag = f" ({binary.parent.parent.name})" if len(binaries) > 1 else ""
                servers += llama_servers(binary, gguf, max(levels), settings, tag)
        results: dict[str, list[LevelResult]] = {s.label: [] for s in servers}
        try:
            for server in servers:
                server.proc = subprocess.Popen(
                    server.cmd, cwd=ROOT, env=server.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
                wait_ready(server.url, server.proc)
                asyncio.run(run_level(server.url, 1, 1, 8))  # warm-up
            for index, level in enumerate(levels):
                # every other level the other way round, so no server always runs right after another
                for server in servers if index % 2 == 0 else servers[::-1]:
                    assert server.proc is not None
                    result = asyncio.run(
                        run_level(
                            server.url, level, args.requests_per_client, args.max_tokens, server.proc.pid
                        )
                    )
                    print(
                        f"{server.label:>32}, {level:>3} clients: {result.tokens} tokens "
                        f"in {result.wall_s:.2f}s = "
                        f"{result.tokens_per_s:.1f} tok/s, decode p50 {result.decode_p50:.1f}; "
                        f"TTFT p50 {result.ttft_p50_ms:.0f} ms, "
                        f"p95 {result.ttft_p95_ms:.0f} ms; peak RSS {result.peak_rss_mb:.0f} MB; "
                        f"load {result.load_avg:.1f}",
                        flush=True,
                    )
                    results[server.label].append(result)
        finally:
            for server in servers:
                if server.proc is None:
                    continue
                server.proc.terminate()
                try:
                    server.proc.wait(10)
                except subprocess.TimeoutExpired:
                    server.proc.kill()
    meta = {
        "models": descriptions,
        "provider": args.provider,
        "max_concurrency": args.max_concurrency,
        "max_tokens": args.max_tokens,
        "requests_per_client": args.requests_per_client,
        "llama_server": [str(b) for b in binaries],
        "llama_version": "; ".join(llama_version(str(b)) for b in binaries) or llama_version(None),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"1-minute load average at the start {load_at_start:.1f} (other processes share the cores)",
        "command": "python benchmarks/serve.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "ratios": ratios(servers, results),
    }
    meta["summary"] = summary(meta["ratios"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_results(args.out, meta, servers, results)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
