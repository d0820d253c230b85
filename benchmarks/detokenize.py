"""Streaming detokenization cost per token: rxstream against the usual approaches.

    .venv/bin/python benchmarks/detokenize.py            # full run, about a minute
    .venv/bin/python benchmarks/detokenize.py --quick    # smaller tokenizers and T, a smoke test

Two tokenizers are trained in-process on the Python standard library's source files (nothing is
downloaded): a GPT-2 style ByteLevel BPE and a Llama style byte-fallback BPE
(Replace/ByteFallback/Fuse/Strip decoder), 16 000 ids each. The generation is T ids of a text
that mixes Python source, prose in eight scripts and emoji, so characters split across tokens
are frequent. Side by side, at T = 100, 1 000 and 10 000, in microseconds per token (a whole
stream: construction, every token, the final flush):

- ``rxstream core``: :class:`rxstream.StreamDetokenizer` (per-id byte table + incremental UTF-8);
- ``rxstream operator``: ``detokenize(tokenizer)`` in an Rx pipeline fed by a source that calls
  ``on_next`` directly, as a backend does (the source's own cost is a few percent);
- ``DecodeStream``: ``tokenizers.decoders.DecodeStream.step`` (Rust), called directly;
- ``DecodeStream in Rx``: the same inside ``map``/``filter`` in the same pipeline, for a fair
  comparison with the operator;
- ``re-decode all``: decode every id so far on every token and emit the new stable suffix (the
  RLX approach, O(T^2) over a generation; run at T = 10 000 only if it takes under a minute);
- ``TGI window``: prefix/read offsets, decode a short window of the last ids twice per token.

Every method's concatenated output is checked against ``tokenizer.decode(ids)`` (streams are
cut at character boundaries, so their text is valid UTF-8). Results go to
``benchmarks/results/detokenize.md`` and a log-log plot ``benchmarks/results/detokenize.png``
(matplotlib: ``pip install -e .[bench]``). The machine is shared: ratios matter, not absolutes.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import platform
import sys
import sysconfig
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import reactivex as rx
import tokenizers
from reactivex import Observable, abc
from reactivex import operators as ops
from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

from rxstream import StreamDetokenizer
from rxstream.operators import detokenize
from rxstream.testing import tokenizers as tf

ROOT = Path(__file__).resolve().parent.parent

RESULTS = ROOT / "benchmarks" / "results"
REDECODE_BUDGET_S = 60.0

Method = Callable[[Tokenizer, Sequence[int]], str]

PROSE = (
    "The quick brown fox jumps over the lazy dog 😀.",
    "Grüße aus München, schöne Äpfel 👍🏽; ça va très bien.",
    "日本語のテキストを生成します。中文文本在这里生成。",
    "한국어 텍스트입니다 👨\u200d👩\u200d👧\u200d👦 and Русский текст здесь.",
    "Ελληνικά γράμματα 🇩🇪 🇯🇵, עברית כאן, العربية هنا.",
    "Combining marks: e\u0301 a\u0308 n\u0303 ❤️ 🦀 🧑🏾\u200d💻.",
)


def generation_text(min_chars: int = 150_000) -> str:
    """Python source from standard-library packages (not in the training corpus) mixed evenly
    with prose: after every 3 lines of code one sentence in another script or with emoji, so the
    first 100 tokens have the same mix as the first 10 000."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    parts: list[str] = []
    total = 0
    k = 0
    for path in sorted((stdlib / "email").glob("*.py")) + sorted((stdlib / "json").glob("*.py")):
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
            if not line.strip():
                continue
            parts.append(line)
            total += len(line)
            k += 1
            if k % 3 == 0:
                sentence = PROSE[(k // 3) % len(PROSE)] + "\n"
                parts.append(sentence)
                total += len(sentence)
        if total >= min_chars:
            break
    return "".join(parts)


# -- methods ----------------------------------------------------------------------------------


def rxstream_core(tok: Tokenizer, ids: Sequence[int]) -> str:
    det = StreamDetokenizer(tok)
    push = det.push_one
    out = [push(i) for i in ids]
    out.append(det.finish())
    return "".join(out)


def _direct_source(ids: Sequence[int]) -> Observable[int]:
    """A source that calls on_next directly for every id, like a backend's generation loop."""

    def subscribe(observer: abc.ObserverBase[int], scheduler: abc.SchedulerBase | None = None) -> Any:
        for i in ids:
            observer.on_next(i)
        observer.on_completed()

    return rx.create(subscribe)


def rxstream_operator(tok: Tokenizer, ids: Sequence[int]) -> str:
    out: list[str] = []
    _direct_source(ids).pipe(detokenize(tok)).subscribe(out.append)
    return "".join(out)


def decode_stream(tok: Tokenizer, ids: Sequence[int]) -> str:
    stream = DecodeStream(skip_special_tokens=True)
    out = []
    for i in ids:
        text = stream.step(tok, i)
        if text is not None:
            out.append(text)
    return "".join(out)


def decode_stream_rx(tok: Tokenizer, ids: Sequence[int]) -> str:
    out: list[str] = []
    stream = DecodeStream(skip_special_tokens=True)
    _direct_source(ids).pipe(
        ops.map(lambda i: stream.step(tok, i)), ops.filter(lambda t: t is not None)
    ).subscribe(out.append)
    return "".join(out)


def redecode_all(tok: Tokenizer, ids: Sequence[int]) -> str:
    """RLX: decode everything so far, emit the new suffix without its trailing U+FFFD run."""
    seen: list[int] = []
    emitted = 0
    out = []
    for i in ids:
        seen.append(i)
        full = tok.decode(seen)
        stable = len(full.rstrip("\ufffd"))
        if stable > emitted:
            out.append(full[emitted:stable])
            emitted = stable
    full = tok.decode(seen)
    out.append(full[emitted:])
    return "".join(out)


def tgi_window(tok: Tokenizer, ids: Sequence[int]) -> str:
    """TGI: decode ids[prefix:read] and ids[prefix:], emit the difference unless it ends in U+FFFD."""
    all_ids: list[int] = []
    prefix_offset = read_offset = 0
    out = []
    for i in ids:
        all_ids.append(i)
        prefix_text = tok.decode(all_ids[prefix_offset:read_offset])
        new_text = tok.decode(all_ids[prefix_offset:])
        if len(new_text) > len(prefix_text) and not new_text.endswith("\ufffd"):
            out.append(new_text[len(prefix_text) :])
            prefix_offset = read_offset
            read_offset = len(all_ids)
    prefix_text = tok.decode(all_ids[prefix_offset:read_offset])
    new_text = tok.decode(all_ids[prefix_offset:])
    out.append(new_text[len(prefix_text) :])
    return "".join(out)


METHODS: dict[str, Method] = {
    "rxstream core": rxstream_core,
    "rxstream operator": rxstream_operator,
    "DecodeStream": decode_stream,
    "DecodeStream in Rx": decode_stream_rx,
    "re-decode all (RLX)": redecode_all,
    "TGI window": tgi_window,
}


def split_streams(tok: Tokenizer, ids: Sequence[int], t: int) -> list[list[int]]:
    """Cut ``ids`` into streams of about ``t`` ids, moving each cut forward (a few ids at most) so
    that no stream starts or ends inside a character (the text of every stream is valid UTF-8)."""
    end = len(ids)
    while end > 1 and tok.decode(ids[max(0, end - 8) : end]).endswith("\ufffd"):
        end -= 1
    ids = ids[:end]
    cuts = [0]
    for k in range(t, len(ids), t):
        k = max(k, cuts[-1] + 1)
        while k < len(ids) and tok.decode(ids[cuts[-1] : k]).endswith("\ufffd"):
            k += 1
        if k < len(ids):
            cuts.append(k)
    cuts.append(len(ids))
    return [list(ids[a:b]) for a, b in itertools.pairwise(cuts) if b > a]


def measure(method: Method, tok: Tokenizer, streams: Sequence[Sequence[int]], rounds: int) -> float:
    """Best-of-``rounds`` microseconds per token; a round runs every stream once.

    The best round is the one least disturbed by other processes (the garbage collector is off
    while timing)."""
    total = sum(len(s) for s in streams)
    best = float("inf")
    gc.collect()
    gc.disable()
    try:
        for _ in range(rounds):
            start = time.perf_counter()
            for ids in streams:
                method(tok, ids)
            best = min(best, (time.perf_counter() - start) / total)
    finally:
        gc.enable()
    return best * 1e6


def run(quick: bool) -> dict[str, Any]:
    vocab = 4000 if quick else 16000
    corpus = 1_000_000 if quick else 6_000_000
    ts = (100, 1000) if quick else (100, 1000, 10_000)
    total = max(ts)
    text = generation_text()
    results: dict[str, Any] = {"ts": ts, "total": total, "tokenizers": {}}
    for name, build in (("ByteLevel BPE", tf.bytelevel), ("Llama byte-fallback BPE", tf.llama)):
        t0 = time.perf_counter()
        tok = build(vocab, corpus)
        train_s = time.perf_counter() - t0
        all_ids = tok.encode(text).ids
        assert len(all_ids) >= total, f"generation text too short: {len(all_ids)} ids"
        rows: dict[str, dict[int, float | None]] = {m: {} for m in METHODS}
        exact: dict[str, bool] = {m: True for m in METHODS}
        notes: list[str] = []
        for t in ts:
            # the same `total` tokens, generated as total/t streams of about t tokens each
            streams = split_streams(tok, all_ids[:total], t)
            for mname, method in METHODS.items():
                redecode = mname.startswith("re-decode")
                if redecode and t > 1000:
                    prev = rows[mname].get(1000)
                    est = (prev or 0) * 1e-6 * t * (t / 1000)
                    if prev is None or est > REDECODE_BUDGET_S:
                        rows[mname][t] = None
                        notes.append(f"{mname} skipped at T={t} (estimated {est:.0f} s per stream)")
                        continue
                for ids in streams[:1] if redecode else streams:
                    if method(tok, ids) != tok.decode(ids):
                        exact[mname] = False
                rounds = (1 if t > 1000 else 3) if redecode else 7
                rows[mname][t] = measure(method, tok, streams, rounds)
                print(f"{name:26s} T={t:>6} {mname:22s} {rows[mname][t]:9.3f} us/token", flush=True)
        results["tokenizers"][name] = {
            "vocab": tok.get_vocab_size(with_added_tokens=True),
            "train_s": train_s,
            "rows": rows,
            "exact": exact,
            "notes": notes,
        }
    return results


def _fmt(v: float | None) -> str:
    if v is None:
        return "skipped"
    return f"{v:.3f}" if v < 10 else f"{v:.1f}"


def write_markdown(results: dict[str, Any], path: Path) -> None:
    ts = results["ts"]
    lines = [
        "# Streaming detokenization: microseconds per token",
        "",
        f"Python {platform.python_version()}, tokenizers {tokenizers.__version__}, "
        f"{platform.machine()}. Every column processes the same {results['total']:,} generated tokens, "
        "as streams of T tokens (construction, every token and the final flush of each stream "
        "included); best of 7 rounds (re-decode: 3; 1 at T=10,000). Lower is better. Produced by "
        "`.venv/bin/python benchmarks/detokenize.py`.",
        "",
    ]
    for name, data in results["tokenizers"].items():
        rows = data["rows"]
        ref = rows["DecodeStream"]
        ref_rx = rows["DecodeStream in Rx"]
        last = ts[-1]
        lines += [
            f"## {name} ({data['vocab']} ids)",
            "",
            "| method | "
            + " | ".join(f"T={t:,}" for t in ts)
            + f" | T={last:,} / T={ts[0]} | DecodeStream / method (T={last:,}) | exact |",
            "|---|" + "---:|" * len(ts) + "---:|---:|:---:|",
        ]
        for mname, vals in rows.items():
            first, lastv = vals.get(ts[0]), vals.get(last)
            growth = f"{lastv / first:.2f}x" if first and lastv else "n/a"
            speed = f"{ref[last] / lastv:.2f}x" if lastv and ref.get(last) else "n/a"
            lines.append(
                f"| {mname} | "
                + " | ".join(_fmt(vals.get(t)) for t in ts)
                + f" | {growth} | {speed} | {'yes' if data['exact'][mname] else 'NO'} |"
            )
        op = rows["rxstream operator"][last]
        lines += [
            "",
            f"Operator vs DecodeStream called directly: {ref[last] / op:.2f}x faster; "
            f"vs DecodeStream in the same Rx pipeline: {ref_rx[last] / op:.2f}x faster (T={last:,}).",
        ]
        for note in data["notes"]:
            lines.append(f"\n{note}.")
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")


def write_plot(results: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install -e .[bench]): no plot", file=sys.stderr)
        return False
    names = list(results["tokenizers"])
    fig, axes = plt.subplots(1, len(names), figsize=(6 * len(names), 4.5), sharey=True)
    for ax, name in zip(axes, names, strict=True):
        for mname, vals in results["tokenizers"][name]["rows"].items():
            pts = [(t, v) for t, v in vals.items() if v is not None]
            if pts:
                style = "-o" if mname.startswith("rxstream") else "--s"
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=mname)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("tokens generated (T)")
        ax.set_title(name)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("µs per token")
    axes[-1].legend(fontsize=8)
    fig.suptitle("Streaming detokenization cost per token (lower is better)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller tokenizers and T (smoke test)")
    args = parser.parse_args()
    results = run(args.quick)
    RESULTS.mkdir(parents=True, exist_ok=True)
    suffix = "-quick" if args.quick else ""
    md = RESULTS / f"detokenize{suffix}.md"
    write_markdown(results, md)
    print(f"wrote {md}")
    png = RESULTS / f"detokenize{suffix}.png"
    if write_plot(results, png):
        print(f"wrote {png}")


if __name__ == "__main__":
    main()
