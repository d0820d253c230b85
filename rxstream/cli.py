"""The ``rxstream`` command line: ``chat`` (stream an answer live) and ``models`` (pull / list).

Each subcommand is one ``add_<name>_parser(subparsers)`` function that registers its arguments
and sets ``func`` to the function that runs it; :data:`SUBCOMMANDS` lists them in help order.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from rxstream import Finish, FinishReason, FinishRecorder, Piece

__all__ = ["SUBCOMMANDS", "build_parser", "main"]


# ---------------------------------------------------------------------------------------------- chat
def _valid_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes in argv arrive as lone surrogates
        return False
    return True


def _unescape(text: str, option: str) -> str:
    """Backslash escapes (``\\n``, ``\\t``, ``\\u00e9``) in an option's value; other text as is."""
    try:
        value = text.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError as exc:
        message = f"{option}: bad backslash escape in {text!r}: {exc.reason}"
        raise argparse.ArgumentTypeError(message) from None
    if not _valid_text(value):
        raise argparse.ArgumentTypeError(f"{option}: {text!r} is not valid UTF-8 text")
    return value


def _replace_rule(text: str) -> tuple[str, str]:
    old, sep, new = text.partition("=")
    if not sep or not old:
        raise argparse.ArgumentTypeError(f"--replace needs OLD=NEW with a non-empty OLD, got {text!r}")
    return _unescape(old, "--replace"), _unescape(new, "--replace")


def _stop_string(text: str) -> str:
    value = _unescape(text, "--stop")
    if not value:
        raise argparse.ArgumentTypeError("--stop needs a non-empty string")
    return value


def add_chat_parser(subparsers: Any) -> None:
    """Register ``rxstream chat``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "chat",
        help="ask the model and stream the answer live",
        description="Stream a chat answer through detokenize -> replace -> stop and print why it ended. "
        "The default model (SmolLM2-135M-Instruct) is downloaded and converted on first use.",
    )
    p.add_argument("prompt", nargs="?", help="the user message (read from stdin when omitted)")
    p.add_argument("--system", help="a system message")
    p.add_argument(
        "--stop",
        action="append",
        type=_stop_string,
        default=[],
        metavar="TEXT",
        help="stop before TEXT (repeatable; backslash escapes like \\n work)",
    )
    p.add_argument(
        "--replace",
        action="append",
        type=_replace_rule,
        default=[],
        metavar="OLD=NEW",
        help="replace OLD by NEW in the streamed text (repeatable)",
    )
    p.add_argument("--max-tokens", type=int, default=256, help="token budget (default 256)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-k", type=int, default=0, help="sample from the k best ids (0 = off)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (default 1.0 = off)")
    p.add_argument("--repetition-penalty", type=float, default=1.0, help="default 1.0 = off")
    p.add_argument("--seed", type=int, default=None, help="random seed for reproducible sampling")
    p.add_argument(
        "--provider",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="ONNX Runtime execution provider (default auto: CUDA when it works, else CPU)",
    )
    p.add_argument(
        "--model",
        default="smollm2",
        metavar="DIR",
        help="a model directory (Optimum or onnxruntime-genai layout) or a known name (smollm2)",
    )
    p.add_argument("--int4", action="store_true", help="use the int4 build of the default model")
    p.add_argument("--show-tokens", action="store_true", help="show the token ids behind each piece of text")
    p.set_defaults(func=run_chat, exit_on_sigpipe=True)


def _load_model(name: str, provider: str, int4: bool) -> Any:
    from rxstream.backends import OnnxModel

    return OnnxModel.from_pretrained(
        name,
        provider=provider,  # type: ignore[arg-type]
        quantization="int4" if int4 else "fp32",
        progress=True,
    )


def run_chat(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``rxstream chat``: stream the answer to ``out``; the finish line goes to ``err``."""
    from reactivex import operators as ops

    from rxstream.operators import detokenize, replace, stop

    out = out or sys.stdout
    err = err or sys.stderr
    try:
        prompt_text = args.prompt if args.prompt is not None else sys.stdin.read()
    except UnicodeDecodeError:
        print("rxstream chat: the prompt on stdin is not valid UTF-8 text", file=err)
        return 2
    for name, text in (("the prompt", prompt_text), ("--system", args.system or "")):
        if not _valid_text(text):
            print(f"rxstream chat: {name} is not valid UTF-8 text", file=err)
            return 2
    if not prompt_text.strip():
        print("rxstream chat: empty prompt", file=err)
        return 2
    try:
        model = _load_model(args.model, args.provider, args.int4)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"rxstream chat: {exc}", file=err)
        return 1
    messages = ([{"role": "system", "content": args.system}] if args.system else []) + [
        {"role": "user", "content": prompt_text}
    ]
    prompt = model.encode_chat(messages) if model.has_chat_template else model.encode(prompt_text)
    recorder = FinishRecorder()
    counted: list[float] = []
    try:
        source = model.generate(
            prompt,
            max_new_tokens=args.max_tokens,
            temperature=args.temperature,
            top_k=args.top_k,
            top_p=args.top_p,
            repetition_penalty=args.repetition_penalty,
            seed=args.seed,
            on_finish=recorder,
        )
    except (ValueError, TypeError) as exc:
        print(f"rxstream chat: {exc}", file=err)
        return 2
    stages: list[Callable[[Any], Any]] = [
        ops.do_action(lambda _id: counted.append(time.perf_counter())),
        detokenize(model.tokenizer, prompt_ids=prompt, aligned=args.show_tokens),
    ]
    if args.replace:
        stages.append(replace(args.replace))
    if args.stop:
        stages.append(stop(args.stop, on_finish=recorder))

    dim = (lambda s: f"\x1b[2m{s}\x1b[0m") if getattr(out, "isatty", lambda: False)() else (lambda s: s)

    def show(item: str | Piece) -> None:
        if isinstance(item, Piece):
            out.write(item.text + dim(f"[{' '.join(map(str, item.ids))}]"))
        else:
            out.write(item)
        out.flush()

    done = threading.Event()
    failure: list[BaseException] = []
    start = time.perf_counter()

    def on_error(exc: BaseException) -> None:
        failure.append(exc)
        done.set()

    subscription = source.pipe(*stages).subscribe(show, on_error=on_error, on_completed=done.set)
    try:
        while not done.wait(0.1):
            pass
    except KeyboardInterrupt:
        subscription.dispose()
    elapsed = time.perf_counter() - start
    out.write("\n")
    out.flush()
    finish = recorder.finish or Finish(FinishReason.CANCELLED)
    stats = f"{len(counted)} tokens"
    if len(counted) > 1:
        rate = (len(counted) - 1) / max(counted[-1] - counted[0], 1e-9)
        stats += f", first after {counted[0] - start:.2f} s, {rate:.1f} tokens/s"
    print(f"[finish: {finish} | {stats} | {model.provider} | {elapsed:.2f} s]", file=err)
    if failure:
        print(f"rxstream chat: {failure[0]}", file=err)
        return 1
    return 130 if finish.reason is FinishReason.CANCELLED else 0


# -------------------------------------------------------------------------------------------- models
def add_models_parser(subparsers: Any) -> None:
    """Register ``rxstream models pull|list``."""
    p: argparse.ArgumentParser = subparsers.add_parser("models", help="download (pull) and list local models")
    p.set_defaults(exit_on_sigpipe=True)
    sub = p.add_subparsers(dest="models_command", required=True)
    pull = sub.add_parser("pull", help="download and convert a known model into the cache")
    pull.add_argument("name", nargs="?", default="smollm2", help="model name (default smollm2)")
    pull.add_argument("--int4", action="store_true", help="build the int4 (MatMulNBits) variant")
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
            quantization="int4" if args.int4 else "fp32",
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
    from rxstream.backends._pull import KNOWN_MODELS

    out = out or sys.stdout
    cache = args.cache_dir or default_cache_dir()
    print(f"cache: {cache}", file=out)
    for name, source in sorted(KNOWN_MODELS.items()):
        print(f"{name}  ({source.package}=={source.version}, {source.member.rsplit('/', 1)[-1]})", file=out)
        for quant in ("fp32", "int4"):
            d = cache / "models" / f"{source.dirname}-{quant}"
            if (d / ".complete").is_file():
                print(f"  {quant}: {d}  ({_size(d) / 1e6:.0f} MB)", file=out)
            else:
                flag = " --int4" if quant == "int4" else ""
                print(f"  {quant}: not pulled (rxstream models pull {name}{flag})", file=out)
    return 0


# ---------------------------------------------------------------------------------------------- main
def add_serve_parser(subparsers: Any) -> None:
    """Register ``rxstream serve`` (the OpenAI-compatible server in :mod:`rxstream.server`)."""
    from rxstream.server import add_serve_parser as add

    add(subparsers)


SUBCOMMANDS: list[Callable[[Any], None]] = [add_chat_parser, add_models_parser, add_serve_parser]
"""The functions that register each subcommand, in help order."""


def build_parser() -> argparse.ArgumentParser:
    """The ``rxstream`` argument parser with every subcommand of :data:`SUBCOMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="rxstream",
        description="Stream a language model's tokens as clean text with ReactiveX operators.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rxstream`` command; returns the exit status (130 when interrupted)."""
    args = build_parser().parse_args(argv)
    if argv is None and getattr(args, "exit_on_sigpipe", False) and hasattr(signal, "SIGPIPE"):
        # Run as the program (not called from Python code), by a command that writes a stream to
        # stdout (chat, models): die quietly when the reader of our output goes away (| head).
        # Never for the server (a client that closes its socket would kill the whole process),
        # and never in-process: SIG_DFL would kill a host process (a test runner) the next time
        # it writes to a closed socket.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        status: int = args.func(args)
    except BrokenPipeError:  # pragma: no cover - output closed early (| head)
        return 0
    except KeyboardInterrupt:
        print(f"rxstream {args.command}: interrupted", file=sys.stderr)
        return 130
    return status


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
