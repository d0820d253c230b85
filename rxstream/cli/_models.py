"""``rxstream models pull|list``: the model cache."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from ..face import QUANTIZATIONS

__all__ = ["add_models_parser", "run_models_list", "run_models_pull"]


def add_models_parser(subparsers: Any) -> None:
    """Register ``rxstream models pull|list``."""
    p: argparse.ArgumentParser = subparsers.add_parser("models", help="download (pull) and list local models")
    p.set_defaults(exit_on_sigpipe=True)
    sub = p.add_subparsers(dest="models_command", required=True, metavar="pull|list")
    pull = sub.add_parser("pull", help="download and convert a known model into the cache")
    pull.add_argument("name", nargs="?", default="smollm2", help="model name (default smollm2)")
    pull.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        default="fp32",
        help="the build: fp32 (default), int4 (the GGUF's 4-bit blocks) or int4-a8 (with 8-bit activations)",
    )
    pull.add_argument(
        "--int4",
        dest="quantization",
        action="store_const",
        const="int4",
        help="the same as --quantization int4",
    )
    pull.add_argument("--force", action="store_true", help="convert again even if it is cached")
    pull.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="cache directory (default $RXSTREAM_CACHE or ~/.cache/rxstream)",
    )
    pull.set_defaults(func=run_models_pull)
    listing = sub.add_parser("list", help="list known models and what is in the cache")
    listing.add_argument("--cache-dir", type=Path, default=None, help="cache directory")
    listing.set_defaults(func=run_models_list)


def run_models_pull(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``rxstream models pull``."""
    from rxstream.backends import pull_model

    out = out or sys.stdout
    err = err or sys.stderr
    try:
        path = pull_model(
            args.name,
            cache_dir=args.cache_dir,
            progress=True,
            quantization=args.quantization,
            force=args.force,
        )
    except (ValueError, RuntimeError) as exc:
        print(f"rxstream models pull: {exc}", file=err)
        return 1
    print(path, file=out)
    return 0


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run_models_list(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``rxstream models list``."""
    from rxstream.backends import default_cache_dir
    from rxstream.backends.convert import KNOWN_MODELS

    out = out or sys.stdout
    cache = args.cache_dir or default_cache_dir()
    print(f"cache: {cache}", file=out)
    for name, source in sorted(KNOWN_MODELS.items()):
        print(f"{name}  ({source.package}=={source.version}, {source.member.rsplit('/', 1)[-1]})", file=out)
        for quant in QUANTIZATIONS:
            d = cache / "models" / f"{source.dirname}-{quant}"
            if (d / ".complete").is_file():
                print(f"  {quant}: {d}  ({_size(d) / 1e6:.0f} MB)", file=out)
            else:
                flag = "" if quant == "fp32" else f" --quantization {quant}"
                print(f"  {quant}: not pulled (rxstream models pull {name}{flag})", file=out)
    return 0
