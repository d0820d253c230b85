"""Channel routing cost per token: ``route`` (and ``tool_calls``) against transformers' ResponseParser.

    .venv/bin/python benchmarks/channels.py            # full run (10 000-token outputs), ~1 min
    .venv/bin/python benchmarks/channels.py --quick    # 2 000 tokens, fewer repeats

The recorded outputs are Qwen3-style completions (reasoning in ``<think>``, answer text, several
``<tool_call>{json}</tool_call>`` calls with nested JSON, unicode and escaped quotes) repeated
to 10 000 tokens of the default model's tokenizer (SmolLM2, from the model cache; a BPE trained
in-process when the cache is empty). The per-token text deltas are computed once, outside the
timing, so every method sees the same chunks. Side by side, in microseconds per token:

- ``Router.feed`` -- the engine (:class:`rxstream.channels.Router`), called per delta;
- ``route operator`` -- ``route("qwen3")`` in an Rx pipeline fed by a source that calls
  ``on_next`` directly (as a backend does);
- ``route + tool_calls`` -- the same followed by ``tool_calls()`` (when installed);
- ``ResponseParser`` -- ``transformers.utils.chat_parsing.ResponseParser.feed`` per delta with
  a response_template of the same format (``pip install -e .[bench]``), when installed.

Every method's channel texts are checked against the batch result first.

Then one row per model family (:mod:`rxstream.families`): the family's recorded output
(``tests/channels/data/recorded/<family>.json``, the recording named after the family) repeated
to about the same number of tokens, through ``route(family) + tool_calls`` -- streamed (one
item per token delta) and batch (the whole text as one item), in microseconds per token, after
checking that both give the same channel texts and calls.

Results go to ``benchmarks/results/channels.md`` and ``.json``. The machine is shared: ratios
matter.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reactivex import Observable, abc
from reactivex.disposable import Disposable

from rxstream.channels import Router, merge_chunks, preset, route_text
from rxstream.operators import route

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

BLOCK = (
    "<think>\nThe user wants the weather in Zürich and Tokyo, and the time. I'll call get_weather "
    'twice with units "metric", then get_time. 日本語も大丈夫。 Let me be careful with the '
    "arguments: nested options, escaped quotes, an empty object.\n</think>\n\n"
    "Let me check both cities for you.\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich", "units": "metric", '
    '"days": 3, "opts": {"hourly": true, "fields": ["temp", "wind", "rain"]}}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "東京", "note": "say \\"hi\\"\\n"}}\n'
    "</tool_call>\n"
    '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>\n'
    "Here is what I found: it is sunny in Zürich (21 °C) and raining in Tokyo (17 °C). 🌦\n"
)

TEMPLATE = {  # the same format, as a transformers response_template
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>", "content": "text"},
        "tool_calls": {
            "open": "<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close": "<|im_end|>", "content": "text"},
    },
}


def tokenizer() -> tuple[Any, str]:
    cache = Path.home() / ".cache" / "rxstream" / "models" / "smollm2-135m-instruct-fp32" / "tokenizer.json"
    from tokenizers import Tokenizer

    if cache.is_file():
        return Tokenizer.from_file(str(cache)), "SmolLM2 (49 152 ids)"
    from rxstream.testing.tokenizers import bytelevel

    return bytelevel(8000), "ByteLevel BPE trained in-process (8 000 ids)"


def deltas_of(tok: Any, n_tokens: int) -> tuple[list[str], str]:
    """Per-token text deltas of BLOCK repeated to n_tokens tokens (whole characters only)."""
    from rxstream import StreamDetokenizer

    per_block = len(tok.encode(BLOCK).ids)
    ids: list[int] = tok.encode(BLOCK * (n_tokens // per_block + 1)).ids[:n_tokens]
    det = StreamDetokenizer(tok)
    out = [det.push(i) for i in ids]
    text = "".join(out)
    assert text == tok.decode(ids), "the detokenizer's deltas must add up to decode(ids)"
    return out, text


def per_token(fn: Callable[[], Any], n: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / n * 1e6


def run_router(deltas: list[str]) -> list[Any]:
    spec = preset("qwen3")
    r = Router(spec)
    out: list[Any] = []
    for d in deltas:
        out += r.feed(d)
    return out + r.finish()


def direct_source(items: list[str]) -> Observable[str]:
    def subscribe(
        observer: abc.ObserverBase[str], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        on_next = observer.on_next
        for item in items:
            on_next(item)
        observer.on_completed()
        return Disposable()

    return Observable(subscribe)


def run_operator(deltas: list[str], extra: Any = None) -> list[Any]:
    out: list[Any] = []
    ops = [route("qwen3")] + ([extra] if extra is not None else [])
    direct_source(deltas).pipe(*ops).subscribe(out.append)
    return out


def run_response_parser(deltas: list[str]) -> list[dict[str, Any]]:
    from transformers.utils.chat_parsing import ResponseParser

    p = ResponseParser(TEMPLATE, prefix="")
    events: list[dict[str, Any]] = []
    for d in deltas:
        events += p.feed(d)
    _, final = p.finalize()
    return events + final


def texts_of_segments(segs: list[Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for s in merge_chunks(segs):
        if s.event == "chunk":
            out[s.channel] = out.get(s.channel, "") + s.text
    return out


RECORDED = ROOT / "tests" / "channels" / "data" / "recorded"


def family_rows(tok: Any, n: int, repeats: int) -> list[tuple[str, int, float, float]]:
    """(family, tokens, streamed µs/token, batch µs/token) for each family's recorded output."""
    from rxstream.channels import Segment, ToolCallEnd
    from rxstream.families import families
    from rxstream.operators import tool_calls

    rows: list[tuple[str, int, float, float]] = []
    for fam in families():
        path = RECORDED / f"{fam.name}.json"
        recs = json.loads(path.read_text(encoding="utf-8"))["recordings"]
        rec = next(r for r in recs if r["name"] == fam.name)
        block = rec["completion"]
        per_block = max(1, len(tok.encode(block).ids))
        ids: list[int] = tok.encode(block * (n // per_block + 1)).ids[:n]
        from rxstream import StreamDetokenizer

        det = StreamDetokenizer(tok)
        deltas = [det.push(i) for i in ids]
        text = "".join(deltas)
        spec = fam.spec

        def run(items: list[str], spec: Any = spec, prompt: str = rec["prompt"]) -> list[Any]:
            out: list[Any] = []
            steps: list[Any] = [route(spec, prompt=prompt)]
            if spec.tool_format is not None:
                steps.append(tool_calls(format=spec.tool_format))
            direct_source(items).pipe(*steps).subscribe(out.append)
            return out

        def summary(out: list[Any]) -> tuple[dict[str, str], list[Any]]:
            segs = [o for o in out if isinstance(o, Segment)]
            return texts_of_segments(segs), [(e.name, e.arguments) for e in out if isinstance(e, ToolCallEnd)]

        assert summary(run(deltas)) == summary(run([text])), f"{fam.name}: streamed != batch"
        streamed = per_token(lambda d=deltas, r=run: r(d), len(ids), repeats)
        whole = per_token(lambda t=text, r=run: r([t]), len(ids), repeats)
        rows.append((fam.name, len(ids), streamed, whole))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 000 tokens, 3 repeats (a smoke test)")
    args = ap.parse_args()
    n = 2000 if args.quick else 10_000
    repeats = 3 if args.quick else 7
    tok, tok_name = tokenizer()
    deltas, text = deltas_of(tok, n)
    batch = texts_of_segments(route_text(text, preset("qwen3")))
    assert texts_of_segments(run_router(deltas)) == batch
    assert texts_of_segments([s for s in run_operator(deltas)]) == batch

    rows: list[tuple[str, float]] = []
    rows.append(("Router.feed (engine)", per_token(lambda: run_router(deltas), n, repeats)))
    rows.append(("route operator (Rx)", per_token(lambda: run_operator(deltas), n, repeats)))
    try:
        from rxstream.operators import tool_calls  # type: ignore[attr-defined]
    except ImportError:
        tool_calls = None
    if tool_calls is not None:
        from rxstream.channels import ToolCallEnd

        ends = [e for e in run_operator(deltas, tool_calls()) if isinstance(e, ToolCallEnd)]
        calls = text.count("</tool_call>")
        assert len(ends) == calls, f"tool_calls parsed {len(ends)} calls, the text has {calls}"
        assert ends[0].name == "get_weather"
        assert ends[0].arguments["opts"]["fields"] == ["temp", "wind", "rain"]
        rows.append(
            (
                "route + tool_calls (Rx)",
                per_token(lambda: run_operator(deltas, tool_calls()), n, repeats),
            )
        )
    try:
        import transformers
    except ImportError:
        transformers = None
    if transformers is not None:
        events = run_response_parser(deltas)
        got = "".join(e["text"] for e in events if e["type"] == "region_chunk" and e["field"] == "thinking")
        assert got == batch["reasoning"], "ResponseParser disagrees on the reasoning text"
        rows.append(
            (
                f"ResponseParser (transformers {transformers.__version__})",
                per_token(lambda: run_response_parser(deltas), n, repeats),
            )
        )
    base = rows[1][1]
    lines = [
        "# Channel routing, µs per token",
        "",
        f"{n} tokens of Qwen3-style output ({len(text)} characters; tokenizer: {tok_name}); "
        f"median of {repeats} runs; Python {platform.python_version()} on {platform.machine()}.",
        "Command: `.venv/bin/python benchmarks/channels.py" + (" --quick" if args.quick else "") + "`",
        "",
        "| method | µs/token | vs route operator |",
        "|---|---:|---:|",
    ]
    for name, us in rows:
        lines.append(f"| {name} | {us:.3f} | {us / base:.2f}x |")
    fam = family_rows(tok, n, repeats)
    lines += [
        "",
        "## Per model family: route + tool_calls, streamed (a delta per token) vs batch (one item)",
        "",
        "| family | tokens | streamed µs/token | batch µs/token | streamed / batch |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, tokens, streamed, whole in fam:
        lines.append(f"| {name} | {tokens} | {streamed:.3f} | {whole:.3f} | {streamed / whole:.2f}x |")
    report = "\n".join(lines) + "\n"
    print(report)
    suffix = ".tmp" if args.quick else ""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"channels.md{suffix}").write_text(report, encoding="utf-8")
    (RESULTS / f"channels.json{suffix}").write_text(
        json.dumps(
            {
                "tokens": n,
                "tokenizer": tok_name,
                "rows": dict(rows),
                "families": {f: {"tokens": t, "streamed_us": a, "batch_us": b} for f, t, a, b in fam},
                "argv": sys.argv[1:],
            },
            indent=1,
        ),
        encoding="utf-8",
    )


if __name__ == "__main__":
    main()
