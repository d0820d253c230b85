"""``rxstream serve``'s command-line options, and ``python -m rxstream.server``."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import Any

from ..face import add_model_options, reasoning_format_option, sampling_from_args
from ._limits import ServerLimits, ServerLimitsError
from ._run import ServeError, serve

__all__ = ["add_serve_arguments", "add_serve_parser", "main", "reasoning_format_option", "serve_from_args"]


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be between 0 and 65535, got {port}")
    return port


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``rxstream serve`` options to ``parser``."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=_port, default=8000, help="port to listen on (default 8000; 0: any free port)"
    )
    add_model_options(parser)
    parser.add_argument("--model-name", default=None, help="model id shown to clients")
    parser.add_argument(
        "--max-concurrency",
        type=int,
        default=16,
        help="generations running at once: the batch size with --batching on (default 16)",
    )
    _add_batching_arguments(parser)
    parser.add_argument(
        "--max-tokens-limit", type=int, default=2048, help="largest max_tokens a request may ask for"
    )
    parser.add_argument(
        "--allowed-hosts",
        action="append",
        default=[],
        metavar="NAMES",
        help="host names (comma-separated; .example.com allows subdomains; * allows any) that "
        "requests may address besides IP addresses and localhost (a guard against DNS rebinding)",
    )
    defaults = ServerLimits()
    parser.add_argument(
        "--max-connections",
        type=int,
        default=defaults.max_connections,
        help=f"open connections at most; more get 503 (default {defaults.max_connections})",
    )
    for name, what in (
        ("header", "to send a request's headers"),
        ("body", "to send a request's body"),
        ("idle", "a keep-alive connection may wait for its next request"),
        ("send", "a client may read nothing while a response waits"),
    ):
        default = getattr(defaults, f"{name}_timeout")
        parser.add_argument(
            f"--{name}-timeout",
            type=float,
            default=default,
            metavar="SECONDS",
            help=f"seconds {what} (default {default:g})",
        )
    parser.add_argument(
        "--keepalive-interval",
        type=float,
        default=defaults.keepalive_interval,
        metavar="SECONDS",
        help="seconds a stream may stay silent before a ': keep-alive' comment is sent "
        f"(default {defaults.keepalive_interval:g})",
    )
    _add_resume_arguments(parser, defaults)
    parser.add_argument("--log-level", default="info", help="uvicorn log level (default info)")


def _add_batching_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of continuous batching: the KV budget, prefill, prompt lookup, prefix sharing."""
    parser.add_argument(
        "--batching",
        choices=("on", "off"),
        default="on",
        help="on: requests share one decode step per token (continuous batching; default); "
        "off: one generation loop per request",
    )
    parser.add_argument(
        "--kv-tokens",
        type=int,
        default=None,
        metavar="N",
        help="KV-cache positions the batch may hold, all requests together "
        "(default 65536, or the model's context when larger)",
    )
    parser.add_argument(
        "--prefill-chunk",
        type=int,
        default=256,
        metavar="N",
        help="prompt tokens read per pass between decode steps (default 256)",
    )
    parser.add_argument(
        "--draft-tokens",
        type=int,
        default=None,
        metavar="N",
        help="prompt lookup: while one request decodes alone, up to N ids that followed an earlier "
        "occurrence of its last ids are checked in one pass (the output is unchanged; 0: off; "
        "default 4, off for --quantization int4-a8)",
    )
    parser.add_argument(
        "--prefix-sharing",
        choices=("on", "off"),
        default="on",
        help="on: a prompt that starts like one already in the batch (a system prompt) copies"
        " those positions and reads only the rest (default); off: every prompt is read in full",
    )
    parser.add_argument(
        "--prefix-cache-mb",
        type=int,
        default=128,
        metavar="MB",
        help="with prefix sharing, memory for the KV positions of requests that ended, so that a "
        "chat's next turn reads only its new message (default 128; 0 keeps none)",
    )


def _add_resume_arguments(parser: argparse.ArgumentParser, defaults: ServerLimits) -> None:
    """The options of resumable streams: the grace period and the replay buffers."""
    parser.add_argument(
        "--resume-grace",
        type=float,
        default=defaults.resume_grace,
        metavar="SECONDS",
        help="seconds a streamed generation goes on after its client left, so that the client can "
        f"resume it with Last-Event-ID (0: cancel at once; default {defaults.resume_grace:g})",
    )
    for name, what in (("buffer", "replay buffer per stream"), ("total", "all replay buffers together")):
        parser.add_argument(
            f"--resume-{name}-mb",
            type=float,
            default=getattr(defaults, f"resume_{name}_bytes") / 2**20,
            metavar="MB",
            help=f"{what}, in MiB (default %(default)g)",
        )


_OPTIONS = {
    "max_concurrency": "--max-concurrency",
    "max_tokens": "--max-tokens-limit",
    "max_connections": "--max-connections",
    "header_timeout": "--header-timeout",
    "body_timeout": "--body-timeout",
    "idle_timeout": "--idle-timeout",
    "send_timeout": "--send-timeout",
    "keepalive_interval": "--keepalive-interval",
    "resume_grace": "--resume-grace",
    "resume_buffer_bytes": "--resume-buffer-mb",
    "resume_total_bytes": "--resume-total-mb",
    "default_max_tokens": "--max-tokens",
}
"""ServerLimits fields -> the options that set them."""


def serve_from_args(args: argparse.Namespace) -> int:
    """Run :func:`serve` with options parsed by :func:`add_serve_arguments`; return an exit status."""
    try:
        sampling = sampling_from_args(args)
    except ValueError as exc:
        print(f"rxstream serve: {exc}", file=sys.stderr)
        return 2
    budget = sampling.pop("max_new_tokens", None)  # the budget of a request that gives none
    for option, mb in (
        ("--resume-buffer-mb", args.resume_buffer_mb),
        ("--resume-total-mb", args.resume_total_mb),
    ):
        if not math.isfinite(mb) or mb * 2**20 < 1:
            print(f"rxstream serve: {option} must be a positive number of MiB, got {mb:g}", file=sys.stderr)
            return 2
    try:
        limits = ServerLimits(
            max_concurrency=args.max_concurrency,
            max_tokens=args.max_tokens_limit,
            max_connections=args.max_connections,
            header_timeout=args.header_timeout,
            body_timeout=args.body_timeout,
            idle_timeout=args.idle_timeout,
            send_timeout=args.send_timeout,
            keepalive_interval=args.keepalive_interval,
            resume_grace=args.resume_grace,
            resume_buffer_bytes=int(args.resume_buffer_mb * 2**20),
            resume_total_bytes=int(args.resume_total_mb * 2**20),
            **({} if budget is None else {"default_max_tokens": budget}),
        )
    except ServerLimitsError as exc:
        print(f"rxstream serve: {_OPTIONS.get(exc.field, exc.field)} {exc.reason}", file=sys.stderr)
        return 2
    for option, value in (("--kv-tokens", args.kv_tokens), ("--prefill-chunk", args.prefill_chunk)):
        if value is not None and value < 1:
            print(f"rxstream serve: {option} must be a positive int, got {value}", file=sys.stderr)
            return 2
    if args.draft_tokens is not None and not 0 <= args.draft_tokens <= 16:
        print(
            f"rxstream serve: --draft-tokens must be from 0 to 16, got {args.draft_tokens}", file=sys.stderr
        )
        return 2
    if args.prefix_cache_mb < 0:
        print(
            f"rxstream serve: --prefix-cache-mb must be 0 or more, got {args.prefix_cache_mb}",
            file=sys.stderr,
        )
        return 2
    try:
        serve(
            host=args.host,
            port=args.port,
            model=args.model,
            upstream=args.upstream,
            upstream_mode=args.upstream_mode,
            upstream_endpoint=args.upstream_endpoint,
            provider=args.provider,
            quantization=args.quantization,
            model_name=args.model_name,
            limits=limits,
            allowed_hosts=args.allowed_hosts,
            log_level=args.log_level,
            batching=args.batching == "on",
            max_kv_tokens=args.kv_tokens,
            prefill_chunk=args.prefill_chunk,
            draft_tokens=args.draft_tokens,
            share_prefix=args.prefix_sharing == "on",
            prefix_cache_bytes=args.prefix_cache_mb << 20,
            reasoning_format=args.reasoning_format,
            sampling=sampling,
        )
    except ServeError as exc:
        print(f"rxstream serve: {exc}", file=sys.stderr)
        return 1
    return 0


def add_serve_parser(subparsers: Any) -> None:
    """Register ``rxstream serve`` on the ``rxstream`` command's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="serve the model over an OpenAI-compatible HTTP API with a chat page",
        description="OpenAI-compatible streaming server (/v1/completions, /v1/chat/completions, "
        "/v1/models, /health) with a chat page at /.",
    )
    add_serve_arguments(parser)
    parser.set_defaults(func=serve_from_args)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rxstream.server``: the same as ``rxstream serve``."""
    parser = argparse.ArgumentParser(prog="rxstream serve", description="OpenAI-compatible streaming server")
    add_serve_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return serve_from_args(args)
    except KeyboardInterrupt:
        print("rxstream serve: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
