"""Throughput of the incremental JSON tokenizer (``JsonStream``) beside ``json.loads``.

    .venv/bin/python benchmarks/json_stream.py            # full run, ~1 minute
    .venv/bin/python benchmarks/json_stream.py --quick    # smaller, a few seconds; writes .tmp

Results go to ``benchmarks/results/json_stream.txt`` (``--quick``: ``json_stream.txt.tmp``,
git-ignored).

Texts: tool-call arguments as models write them, ~2 MB of each kind (fixed seed):

- *code edit*: a path, a file's content (long strings with newlines, quotes, tabs, non-ASCII),
  line numbers, a small options object, a list of edits;
- *structured*: nested objects and arrays of short strings, integers, floats, booleans, nulls
  (many small tokens: the hard case for a tokenizer in Python);
- *mixed*: both, one after the other.

Each text is fed to a fresh ``JsonStream`` whole, and in chunks of 256, 64, 16 and 4 characters
(an LLM's tokens are ~4 characters), with ``detail=False`` (tokens only) and ``detail=True``
(also the starts and parts a schema check needs). ``json.loads`` parses each text whole: the
ratio column is our characters per second over its own. For reference the last rows run the
whole ``ToolCallParser`` (``json`` format, one schema-checked call per text) on the same texts.
Times are CPU time of this process (``time.process_time``), best of the repeats.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rxstream.channels import Segment, ToolCallParser
from rxstream.channels._json_stream import JsonStream

RESULTS = Path(__file__).resolve().parent / "results"
WORDS = (
    "the quick brown fox jumps over lazy dog return value self data result index item "
    "for while if else import from class def async await yield None True False"
).split()


def code(rng: random.Random, lines: int) -> str:
    out = []
    for _ in range(lines):
        indent = "    " * rng.randint(0, 3)
        body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9)))
        tail = rng.choice(["", ":", "()", ' = "x"', "  # it's\tfine", " # café «ok»", "[0]"])
        out.append(indent + body + tail)
    return "\n".join(out)


def code_edit(rng: random.Random) -> dict[str, Any]:
    return {
        "path": f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py",
        "content": code(rng, rng.randint(10, 60)),
        "line_numbers": [rng.randint(1, 999) for _ in range(rng.randint(0, 8))],
        "options": {"overwrite": rng.random() < 0.5, "encoding": "utf-8", "mode": 420},
        "edits": [
            {"start": rng.randint(0, 500), "end": rng.randint(0, 500), "text": code(rng, rng.randint(1, 3))}
            for _ in range(rng.randint(0, 4))
        ],
    }


def structured(rng: random.Random, depth: int = 0) -> Any:
    if depth >= 3:
        return rng.choice(
            [
                rng.randint(-1000, 100000),
                round(rng.uniform(-100, 100), rng.randint(1, 6)),
                rng.random() < 0.5,
                None,
                rng.choice(WORDS),
                f"{rng.choice(WORDS)} {rng.choice(WORDS)}",
            ]
        )
    if rng.random() < 0.5:
        return {f"{rng.choice(WORDS)}_{k}": structured(rng, depth + 1) for k in range(rng.randint(1, 5))}
    return [structured(rng, depth + 1) for _ in range(rng.randint(1, 5))]


def corpus(kind: str, size: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    texts: list[str] = []
    total = 0
    while total < size:
        if kind == "code edit" or (kind == "mixed" and len(texts) % 2 == 0):
            value: Any = code_edit(rng)
        else:
            value = {"query": structured(rng), "limit": rng.randint(1, 50), "filters": structured(rng, 1)}
        text = json.dumps(value, ensure_ascii=rng.random() < 0.3, indent=rng.choice([None, None, 2]))
        texts.append(text)
        total += len(text)
    return texts


def best(run: Callable[[], None], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


def feed_all(texts: list[str], chunk: int | None, detail: bool) -> Callable[[], None]:
    pieces = [[t] if chunk is None else [t[i : i + chunk] for i in range(0, len(t), chunk)] for t in texts]

    def run() -> None:
        for parts in pieces:
            stream = JsonStream(detail=detail)
            feed = stream.feed
            for p in parts:
                feed(p)
            stream.end()

    return run


def parse_all(texts: list[str], chunk: int) -> Callable[[], None]:
    tools = [{"type": "function", "function": {"name": "edit", "parameters": {"type": "object"}}}]
    regions = []
    for t in texts:
        call = '{"name": "edit", "arguments": ' + t + "}"
        regions.append(
            [Segment("tool_call", "chunk", call[i : i + chunk]) for i in range(0, len(call), chunk)]
        )
    opening = Segment("tool_call", "open", "<tool_call>")
    closing = Segment("tool_call", "close", "</tool_call>")

    def run() -> None:
        parser = ToolCallParser("json", tools, id_factory=str)
        for segs in regions:
            parser.feed(opening)
            for s in segs:
                parser.feed(s)
            parser.feed(closing)

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small texts, one repeat; write a .tmp file")
    args = ap.parse_args()
    size = 200_000 if args.quick else 2_000_000
    repeats = 1 if args.quick else 3
    lines = [
        "# JsonStream: characters per second, beside json.loads",
        "",
        f"Command: `.venv/bin/python benchmarks/json_stream.py{' --quick' if args.quick else ''}`; "
        f"Python {platform.python_version()}, {platform.machine()}; ~{size:,} chars per kind; "
        f"best of {repeats}, CPU time.",
        "",
        f"{'text':<11} {'feed':<10} {'detail':<6} {'M chars/s':>9} {'json.loads M/s':>14} {'ratio':>6}",
    ]
    print("\n".join(lines))
    for kind in ("code edit", "structured", "mixed"):
        texts = corpus(kind, size)
        chars = sum(map(len, texts))
        loads = chars / best(lambda texts=texts: [json.loads(t) for t in texts], repeats)
        for chunk in (None, 256, 64, 16, 4):
            for detail in (False, True):
                rate = chars / best(feed_all(texts, chunk, detail), repeats)
                row = (
                    f"{kind:<11} {'whole' if chunk is None else f'{chunk} chars':<10} {detail!s:<6} "
                    f"{rate / 1e6:>9.2f} {loads / 1e6:>14.1f} {rate / loads:>6.3f}"
                )
                print(row)
                lines.append(row)
    lines += ["", "ToolCallParser (json format, schema-checked arguments), M chars/s of arguments:", ""]
    for kind in ("code edit", "structured"):
        texts = corpus(kind, size // 4)
        chars = sum(map(len, texts))
        for chunk in (256, 16):
            rate = chars / best(parse_all(texts, chunk), repeats)
            row = f"{kind:<11} {f'{chunk} chars':<10} {rate / 1e6:>9.2f}"
            print(row)
            lines.append(row)
    out = RESULTS / ("json_stream.txt.tmp" if args.quick else "json_stream.txt")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
