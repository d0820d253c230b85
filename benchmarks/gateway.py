"""Benchmark the gateway (``rxstream serve --upstream``): streaming clients straight to an engine
and through the gateway in front of it, side by side in one run.

The engine is a scripted double by default (``--engine double``): a small asyncio HTTP server in
its own process that answers ``/v1/completions`` with ``return_token_ids`` as ``rxstream serve``
and vLLM do, streaming recorded token ids (English prose encoded with the model's tokenizer, one
id per chunk with its text) at a fixed rate (``--interval-ms``, default 10: 100 tokens/s per
stream) from the moment the request arrives, so that everything the gateway adds is the gateway's
own: the chat template and tokenization of the prompt, the request upstream, reading the ids,
detokenize, stop handling, the chat chunks' route and server-sent events. ``--engine real`` adds
an end-to-end row: a real ``rxstream serve`` on the tiny random-weight ONNX model (built with
``build_tiny_model``), direct and through a gateway.

For each concurrency level (``--levels``, default 1,16,128) and generation length
(``--lengths``, default 64,1024 tokens) the clients stream chat completions (the double streams
the same ids whatever the prompt), direct and through the gateway back to back, so both see about
the same load from other processes. Reported, direct vs gateway: time to first token (request
sent -> first non-empty content), per-chunk inter-arrival time (between two chunks with content,
one stream) at p50 and p99, and, for the gateway, its process's CPU time (user + system, all
threads, from ``/proc/<pid>/stat``) over the level divided into the completion tokens delivered:
CPU microseconds per token and tokens per second per core of derendering.

The clients are raw asyncio HTTP/1.1 connections (one per request, ``connection: close``), so
that a Python HTTP library's per-line cost does not swamp what is measured.

    .venv/bin/python benchmarks/gateway.py                          # double, 1/16/128 x 64/1024
    .venv/bin/python benchmarks/gateway.py --engine both            # and the real-engine rows
    .venv/bin/python benchmarks/gateway.py --levels 1,16 --lengths 64 --interval-ms 5

Results go to ``benchmarks/results/gateway.md`` (and ``gateway.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import RESULTS, ROOT, free_port, percentile, wait_ready

PROSE = (ROOT / "README.md").read_text(encoding="utf-8") + (ROOT / "docs" / "benchmarks.md").read_text(
    encoding="utf-8"
)
"""What the double's recorded ids spell: the project's own prose (words, code, tables)."""

TICKS = os.sysconf("SC_CLK_TCK")


# -- the engine double ---------------------------------------------------------------------------
class Script:
    """The double's recorded ids and each one's text, as chunks ready to send."""

    def __init__(self, tokenizer_file: Path, limit: int = 4096) -> None:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        ids = tokenizer.encode(PROSE, add_special_tokens=False).ids[:limit]
        texts = []
        for k in range(len(ids)):  # each id's text, decoded with a little context before it
            lo = max(0, k - 6)
            before = tokenizer.decode(ids[lo:k]) if k > lo else ""
            texts.append(tokenizer.decode(ids[lo : k + 1])[len(before) :])
        self.ids = ids
        self.texts = texts
        self.chunks = [self._chunk(k, None, True) for k in range(len(ids))]
        self.plain = [self._chunk(k, None, False) for k in range(len(ids))]

    def _chunk(self, k: int, finish: str | None, with_ids: bool) -> bytes:
        k %= len(self.ids)
        choice: dict[str, Any] = {
            "index": 0,
            "text": self.texts[k],
            "logprobs": None,
            "finish_reason": finish,
        }
        if with_ids:
            choice["token_ids"] = [self.ids[k]]
        event = {"id": "cmpl-double", "object": "text_completion", "created": 0, "model": "bench"}
        event["choices"] = [choice]
        data = b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"
        return b"%x\r\n%s\r\n" % (len(data), data)

    def chunk(self, k: int, last: bool, with_ids: bool) -> bytes:
        if last:
            return self._chunk(k, "length", with_ids)
        return (self.chunks if with_ids else self.plain)[k % len(self.ids)]


def _http_response(status: str, body: dict[str, Any], close: bool) -> bytes:
    data = json.dumps(body).encode()
    head = f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n"
    return (head + ("connection: close\r\n" if close else "") + "\r\n").encode() + data


async def _double_connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, script: Script, interval: float
) -> None:
    loop = asyncio.get_running_loop()
    try:
        while True:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            method, path, _ = head[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:] if h)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            close = headers.get("connection", "").lower() == "close"
            if path == "/health":
                writer.write(_http_response("200 OK", {"status": "ok"}, close))
            elif path == "/v1/models":
                entry = {"id": "bench", "object": "model", "max_model_len": 32768}
                writer.write(_http_response("200 OK", {"object": "list", "data": [entry]}, close))
            elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
                request = json.loads(body or b"{}")
                n = max(1, int(request.get("max_tokens") or 16))
                with_ids = bool(request.get("return_token_ids"))
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
                    + (b"connection: close\r\n" if close else b"")
                    + b"\r\n"
                )
                start = loop.time()
                for k in range(n):
                    writer.write(script.chunk(k, k == n - 1, with_ids))
                    await writer.drain()
                    if k < n - 1:  # a fixed rate from the request's arrival, without drift
                        await asyncio.sleep(max(0.0, start + (k + 1) * interval - loop.time()))
                if (request.get("stream_options") or {}).get("include_usage"):
                    usage = {"prompt_tokens": 0, "completion_tokens": n, "total_tokens": n}
                    event = {"id": "cmpl-double", "object": "text_completion", "choices": [], "usage": usage}
                    data = b"data: " + json.dumps(event).encode() + b"\n\n"
                    writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                done = b"data: [DONE]\n\n"
                writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
                await writer.drain()
            else:
                writer.write(_http_response("404 Not Found", {"error": {"message": "not found"}}, close))
            await writer.drain()
            if close:
                break
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def run_double(port: int, tokenizer_file: Path, interval_ms: float) -> None:
    script = Script(tokenizer_file)

    async def serve() -> None:
        server = await asyncio.start_server(
            lambda r, w: _double_connection(r, w, script, interval_ms / 1000), "127.0.0.1", port, backlog=1024
        )
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


# -- the clients ---------------------------------------------------------------------------------
@dataclass
class Stream:
    ttft: float | None
    gaps: list[float]
    tokens: int
    chunks: int


async def stream_once(port: int, body: dict[str, Any]) -> Stream:
    """One streamed chat request on its own connection: TTFT, the gaps between content chunks."""
    payload = json.dumps(body).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n"
    ).encode()
    t0 = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head + payload)
    status = await reader.readline()
    if b" 200 " not in status:
        rest = await reader.read()
        writer.close()
        raise RuntimeError(f"HTTP {status.decode().strip()}: {rest[-300:].decode(errors='replace')}")
    arrivals: list[float] = []
    tokens = 0
    try:
        while line := await reader.readline():
            if not line.startswith(b"data: "):
                continue
            data = line[6:].strip()
            if data == b"[DONE]":
                break
            event = json.loads(data)
            if "error" in event:
                raise RuntimeError(event["error"]["message"])
            if event.get("usage"):
                tokens = int(event["usage"]["completion_tokens"])
            for choice in event.get("choices") or ():
                text = choice.get("text") or (choice.get("delta") or {}).get("content")
                if text:
                    arrivals.append(time.perf_counter())
    finally:
        writer.close()
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    return Stream(arrivals[0] - t0 if arrivals else None, gaps, tokens, len(arrivals))


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU time, all its threads (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


@dataclass
class Level:
    engine: str
    path: str
    clients: int
    max_tokens: int
    requests: int
    tokens: int
    wall_s: float
    ttft_p50_ms: float
    ttft_p99_ms: float
    gap_p50_ms: float
    gap_p99_ms: float
    chunks_per_request: float
    cpu_s: float | None = None
    cpu_us_per_token: float | None = None
    tokens_per_core_s: float | None = None
    load_avg: float = 0.0
    errors: list[str] = field(default_factory=list)


async def run_level(
    engine: str,
    path: str,
    port: int,
    clients: int,
    max_tokens: int,
    requests: int,
    pid: int | None,
    spread: float = 0.0,
) -> Level:
    """One level: ``clients`` streaming at once. ``spread`` (seconds, 0: all start together):
    each client starts at a random moment within it and makes at least three requests, and only
    the requests after each client's first count for the TTFT: arrivals in a steady state of
    ``clients`` streams, not a burst."""
    # at least ``requests`` requests of 64 tokens' worth (fewer of longer ones), one per client at least
    per_client = max(1, -(-max(1, requests * 64 // max_tokens) // clients))
    if spread:
        per_client = max(3, per_client)
    steady: list[Stream] = []

    # the prompt names the path: the gateway's requests must not find the direct ones' prompts in
    # an engine's prefix cache (llama.cpp keeps one per slot)
    async def client(index: int) -> list[Stream | str]:
        out: list[Stream | str] = []
        if spread:
            await asyncio.sleep(random.Random(index).uniform(0, spread))
        for r in range(per_client):
            body = {
                "model": "bench",
                "messages": [
                    {"role": "user", "content": f"({path}.{clients}.{index}.{r}) Tell me about rxstream."}
                ],
                "max_tokens": max_tokens,
                "temperature": 0,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            try:
                out.append(await stream_once(port, body))
                if spread and r:
                    steady.append(out[-1])  # type: ignore[arg-type]
            except (RuntimeError, OSError) as exc:
                out.append(f"{type(exc).__name__}: {exc}"[:300])
        return out

    cpu0 = cpu_seconds(pid) if pid is not None else 0.0
    t0 = time.perf_counter()
    results = [s for rs in await asyncio.gather(*(client(i) for i in range(clients))) for s in rs]
    wall = time.perf_counter() - t0
    cpu = cpu_seconds(pid) - cpu0 if pid is not None else None
    streams = [s for s in results if isinstance(s, Stream)]
    errors = sorted({s for s in results if isinstance(s, str)})
    tokens = sum(s.tokens or s.chunks for s in streams)
    ttfts = [s.ttft for s in (steady if spread else streams) if s.ttft is not None]
    gaps = [g for s in streams for g in s.gaps]
    level = Level(
        engine=engine,
        path=path,
        clients=clients,
        max_tokens=max_tokens,
        requests=len(streams),
        tokens=tokens,
        wall_s=wall,
        ttft_p50_ms=percentile(ttfts, 0.5) * 1000,
        ttft_p99_ms=percentile(ttfts, 0.99) * 1000,
        gap_p50_ms=percentile(gaps, 0.5) * 1000,
        gap_p99_ms=percentile(gaps, 0.99) * 1000,
        chunks_per_request=sum(s.chunks for s in streams) / max(1, len(streams)),
        load_avg=os.getloadavg()[0],
        errors=errors,
    )
    if cpu is not None and tokens:
        level.cpu_s = cpu
        level.cpu_us_per_token = cpu / tokens * 1e6
        level.tokens_per_core_s = tokens / cpu if cpu > 0 else float("inf")
    return level


# -- processes -----------------------------------------------------------------------------------
def start(cmd: list[str], url: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    wait_ready(url, proc)
    return proc


def serve_cmd(port: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "rxstream", "serve", "--port", str(port), "--log-level", "warning", *args]


def tokenizer_dir(workdir: Path) -> tuple[Path, str]:
    """The double's model: SmolLM2's tokenizer when it is in the cache (a real 49k vocabulary),
    else the tiny model's (384 ids)."""
    from rxstream.backends import build_tiny_model, default_cache_dir
    from rxstream.backends.convert import KNOWN_MODELS

    directory = default_cache_dir() / "models" / f"{KNOWN_MODELS['smollm2'].dirname}-fp32"
    if (directory / "tokenizer.json").is_file():
        return directory, "SmolLM2-135M-Instruct's tokenizer (49,152 ids, from the cache)"
    return build_tiny_model(workdir / "tiny-tok", max_position_embeddings=32768), "the tiny model's tokenizer"


# -- results -------------------------------------------------------------------------------------
def _f(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def write_results(path: Path, meta: dict[str, Any], levels: list[Level]) -> None:
    lines = [
        "# Gateway benchmark: clients direct to an engine vs through `rxstream serve --upstream`",
        "",
        f"- engine double: {meta['double']}",
        f"- real engine: {meta['real']}",
        f"- llama.cpp engine: {meta['llama']}",
        "- clients: streaming chat completions, one raw HTTP/1.1 connection per request; TTFT = request "
        "sent -> first non-empty content; gap = time between two content chunks of one stream; gateway "
        "CPU = the gateway process's user + system time (all threads) over the level / completion tokens "
        "delivered (detokenize + stop + route + SSE, plus each request's template, tokenization and "
        "upstream request)",
        "- direct and gateway run back to back at each level (direct first) against the same engine "
        "process; `added` = gateway - direct of the same level",
        f"- machine: {meta['machine']}. Other work shares the cores: read ratios and differences "
        "within one run, not absolute numbers across runs",
        f"- command: `{meta['command']}`",
        "",
        "| engine | clients | max_tokens | path | requests | tokens | TTFT p50 ms | TTFT p99 ms "
        "| gap p50 ms | gap p99 ms | chunks/req | gateway CPU us/token | tokens/s per core | load |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for lv in levels:
        lines.append(
            f"| {lv.engine} | {lv.clients} | {lv.max_tokens} | {lv.path} | {lv.requests} | {lv.tokens} "
            f"| {lv.ttft_p50_ms:.2f} | {lv.ttft_p99_ms:.2f} | {lv.gap_p50_ms:.2f} | {lv.gap_p99_ms:.2f} "
            f"| {lv.chunks_per_request:.0f} | {_f(lv.cpu_us_per_token, '.1f')} "
            f"| {_f(lv.tokens_per_core_s, ',.0f')} | {lv.load_avg:.1f} |"
        )
    lines += [
        "",
        "## Added by the gateway (gateway - direct, same level)",
        "",
        "| engine | clients | max_tokens | added TTFT p50 ms | added TTFT p99 ms | added gap p50 ms "
        "| added gap p99 ms | gateway tokens/s per core |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in meta["added"]:
        lines.append(
            f"| {row['engine']} | {row['clients']} | {row['max_tokens']} | {row['ttft_p50_ms']:.2f} "
            f"| {row['ttft_p99_ms']:.2f} | {row['gap_p50_ms']:.2f} | {row['gap_p99_ms']:.2f} "
            f"| {_f(row['tokens_per_core_s'], ',.0f')} |"
        )
    if meta.get("derender"):
        lines += [
            "",
            "## Derendering alone (in-process, no sockets: `benchmarks/derender.py`)",
            "",
            "The engine's chunk bytes through the gateway's own code, round robin over the streams: HTTP "
            "framing, event split, chunk JSON, ids, detokenize, stop, (routed: qwen3's reasoning / answer "
            "/ tool-call route), the client's chunk JSON and `data:` event. No socket syscalls, no HTTP "
            "server, no event-loop scheduling (the end-to-end rows above hold those).",
            "",
            *meta["derender"],
        ]
    errors = [(lv, e) for lv in levels for e in lv.errors]
    if errors:
        lines += ["", "## Errors", ""]
        lines += [f"- {lv.engine} {lv.path} {lv.clients}x{lv.max_tokens}: {e}" for lv, e in errors]
    lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    data = {"meta": meta, "levels": [asdict(lv) for lv in levels]}
    path.with_suffix(".json").write_text(json.dumps(data, indent=2), encoding="utf-8")


def added(levels: list[Level]) -> list[dict[str, Any]]:
    out = []
    for gw in (lv for lv in levels if lv.path == "gateway"):
        direct = next(
            lv
            for lv in levels
            if lv.path == "direct"
            and (lv.engine, lv.clients, lv.max_tokens) == (gw.engine, gw.clients, gw.max_tokens)
        )
        out.append(
            {
                "engine": gw.engine,
                "clients": gw.clients,
                "max_tokens": gw.max_tokens,
                "ttft_p50_ms": gw.ttft_p50_ms - direct.ttft_p50_ms,
                "ttft_p99_ms": gw.ttft_p99_ms - direct.ttft_p99_ms,
                "gap_p50_ms": gw.gap_p50_ms - direct.gap_p50_ms,
                "gap_p99_ms": gw.gap_p99_ms - direct.gap_p99_ms,
                "tokens_per_core_s": gw.tokens_per_core_s,
            }
        )
    return out


def start_llama(
    args: argparse.Namespace, tok_dir: Path, procs: list[subprocess.Popen[bytes]]
) -> tuple[tuple[int, int], int]:
    """llama.cpp's server on the GGUF (16 slots, continuous batching, one thread: the machine's
    other core is the gateway's and the clients'), and a gateway in front of it (the ids come in
    its logprobs' ``id`` fields): ((engine port, gateway port), the gateway's pid)."""
    from rxstream.backends import default_cache_dir

    gguf = args.llama_gguf or default_cache_dir() / "downloads" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    port = free_port()
    cmd = [str(args.llama_server), "-m", str(gguf), "--port", str(port), "-np", "16", "-c", "16384"]
    procs.append(start([*cmd, "-cb", "--no-webui", "-t", "1"], f"http://127.0.0.1:{port}"))
    gw_port = free_port()
    gw_args = ["--upstream", f"http://127.0.0.1:{port}", "--model", str(tok_dir), "--max-concurrency", "512"]
    # the clients name the model "bench": llama.cpp takes any name, the gateway its own
    gateway = start(serve_cmd(gw_port, *gw_args, "--model-name", "bench"), f"http://127.0.0.1:{gw_port}")
    procs.append(gateway)
    return (port, gw_port), gateway.pid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engine", default="double", choices=("double", "real", "both"))
    parser.add_argument("--levels", default="1,16,128", help="client counts (default 1,16,128)")
    parser.add_argument("--lengths", default="64,1024", help="max_tokens values (default 64,1024)")
    parser.add_argument(
        "--real-levels", default="1,16", help="client counts of the real engine (default 1,16)"
    )
    parser.add_argument(
        "--real-lengths", default="64,256", help="max_tokens of the real engine (default 64,256)"
    )
    parser.add_argument(
        "--interval-ms", type=float, default=10.0, help="the double's ms per token (default 10)"
    )
    parser.add_argument(
        "--no-derender", dest="derender", action="store_false", help="skip the in-process derender rows"
    )
    parser.add_argument("--derender-streams", default="1,128,512", help="derender rows' stream counts")
    parser.add_argument("--derender-lengths", default="64,1024,8192", help="derender rows' lengths")
    parser.add_argument(
        "--llama-server", type=Path, help="a llama-server binary: rows with llama.cpp as the engine"
    )
    parser.add_argument(
        "--llama-gguf", type=Path, help="its model (default: the SmolLM2 Q4_1 GGUF in rxstream's cache)"
    )
    parser.add_argument("--llama-levels", default="1,8", help="client counts of llama.cpp (default 1,8)")
    parser.add_argument("--llama-lengths", default="64", help="max_tokens of llama.cpp (default 64)")
    parser.add_argument(
        "--spread-levels",
        default="128",
        help="client counts of the double's steady-state rows (arrivals spread; default 128; '' none)",
    )
    parser.add_argument("--spread-length", type=int, default=256, help="their max_tokens (default 256)")
    parser.add_argument("--requests", type=int, default=16, help="requests per level at least (default 16)")
    parser.add_argument("--out", type=Path, default=RESULTS / "gateway.md")
    parser.add_argument("--double-port", type=int, help=argparse.SUPPRESS)  # run as the double
    parser.add_argument("--double-tokenizer", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.double_port is not None:
        run_double(args.double_port, args.double_tokenizer, args.interval_ms)
        return 0

    def ints(text: str) -> list[int]:
        return [int(x) for x in text.split(",") if x]

    load_at_start = os.getloadavg()[0]
    derender_md: list[str] = []
    levels: list[Level] = []
    procs: list[subprocess.Popen[bytes]] = []
    real = "not run (--engine real or both)"
    with tempfile.TemporaryDirectory() as tmp:
        try:
            tok_dir, tok_desc = tokenizer_dir(Path(tmp))
            engines: list[tuple[str, int, int, list[int], list[int]]] = []
            if args.engine in ("double", "both"):
                port = free_port()
                cmd = [
                    sys.executable,
                    __file__,
                    "--double-port",
                    str(port),
                    "--interval-ms",
                    str(args.interval_ms),
                ]
                procs.append(
                    start(
                        [*cmd, "--double-tokenizer", str(tok_dir / "tokenizer.json")],
                        f"http://127.0.0.1:{port}",
                    )
                )
                gw_port = free_port()
                gw_args = [
                    "--upstream",
                    f"http://127.0.0.1:{port}",
                    "--model",
                    str(tok_dir),
                    "--max-concurrency",
                    "512",
                ]
                gw = start(serve_cmd(gw_port, *gw_args), f"http://127.0.0.1:{gw_port}")
                procs.append(gw)
                engines.append(("double", port, gw_port, ints(args.levels), ints(args.lengths)))
                gw_pids = {"double": gw.pid}
            else:
                gw_pids = {}
            if args.engine in ("real", "both"):
                from rxstream.backends import build_tiny_model

                tiny = build_tiny_model(Path(tmp) / "tiny", max_position_embeddings=4096)
                real = "`rxstream serve` on the tiny random-weight ONNX model (CPU, batching on)"
                port = free_port()
                procs.append(
                    start(
                        serve_cmd(
                            port,
                            "--model",
                            str(tiny),
                            "--model-name",
                            "bench",
                            "--provider",
                            "cpu",
                            "--max-concurrency",
                            "32",
                        ),
                        f"http://127.0.0.1:{port}",
                    )
                )
                gw_port = free_port()
                gw_args = [
                    "--upstream",
                    f"http://127.0.0.1:{port}",
                    "--model",
                    str(tiny),
                    "--max-concurrency",
                    "512",
                ]
                gw = start(serve_cmd(gw_port, *gw_args), f"http://127.0.0.1:{gw_port}")
                procs.append(gw)
                gw_pids["real"] = gw.pid
                engines.append(("real", port, gw_port, ints(args.real_levels), ints(args.real_lengths)))
            if args.llama_server is not None:
                llama, gateway_pid = start_llama(args, tok_dir, procs)
                engines.append(("llama.cpp", *llama, ints(args.llama_levels), ints(args.llama_lengths)))
                gw_pids["llama.cpp"] = gateway_pid
            for engine, port, gw_port, clients_list, lengths in engines:
                for p in (port, gw_port):  # warm-up: connections, template, first requests
                    asyncio.run(run_level(engine, "warm", p, 4, 8, 4, None))
                for length in lengths:
                    for clients in clients_list:
                        for path, p, pid in (("direct", port, None), ("gateway", gw_port, gw_pids[engine])):
                            lv = asyncio.run(run_level(engine, path, p, clients, length, args.requests, pid))
                            levels.append(lv)
                            print(
                                f"{engine} {path:>7} {clients:>3}x{length:<5} TTFT p50 {lv.ttft_p50_ms:7.2f} "
                                f"p99 {lv.ttft_p99_ms:7.2f} ms; gap p50 {lv.gap_p50_ms:6.2f} p99 "
                                f"{lv.gap_p99_ms:6.2f} ms; {lv.tokens} tokens"
                                + (f", {lv.cpu_us_per_token:.1f} us/token CPU" if lv.cpu_us_per_token else "")
                                + (f"; {len(lv.errors)} error kinds: {lv.errors[0]}" if lv.errors else ""),
                                flush=True,
                            )
            if args.engine in ("double", "both"):  # steady state: arrivals spread, not a burst
                _, port, gw_port, _, _ = engines[0]
                period = args.spread_length * args.interval_ms / 1000
                for clients in ints(args.spread_levels):
                    for path, p, pid in (("direct", port, None), ("gateway", gw_port, gw_pids["double"])):
                        lv = asyncio.run(
                            run_level(
                                "double, spread",
                                path,
                                p,
                                clients,
                                args.spread_length,
                                args.requests,
                                pid,
                                spread=period,
                            )
                        )
                        levels.append(lv)
                        print(
                            f"spread {path:>7} {clients:>3}x{args.spread_length}: "
                            f"TTFT p50 {lv.ttft_p50_ms:.2f} "
                            f"p99 {lv.ttft_p99_ms:.2f} ms; gap p99 {lv.gap_p99_ms:.2f} ms",
                            flush=True,
                        )
            if args.derender:
                from derender import derender_rows, markdown

                rows = derender_rows(
                    tok_dir / "tokenizer.json", ints(args.derender_streams), ints(args.derender_lengths)
                )
                derender_md = markdown(rows)
        finally:
            for proc in reversed(procs):
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
    meta = {
        "double": f"recorded ids of {tok_desc}, one id per chunk every {args.interval_ms:g} ms per stream "
        "from the request's arrival (the first at once)",
        "real": real,
        "llama": (
            f"llama.cpp's {args.llama_server.name} (SmolLM2-135M-Instruct Q4_1 GGUF, 16 slots, -t 1)"
            if args.llama_server is not None
            else "not run (--llama-server PATH)"
        ),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"1-minute load average at the start {load_at_start:.1f}",
        "command": "python benchmarks/gateway.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "added": added(levels),
        "derender": derender_md,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_results(args.out, meta, levels)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
