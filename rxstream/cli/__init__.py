"""The ``rxstream`` command line: ``chat`` (stream an answer live), ``models`` (pull / list) and
``serve`` (the OpenAI-compatible server of :mod:`rxstream.server`).

Each subcommand is one ``add_<name>_parser(subparsers)`` function (in its own module: ``_chat``,
``_models``; ``serve`` comes from :mod:`rxstream.server`) that registers its arguments and sets
``func`` to the function that runs it; :data:`SUBCOMMANDS` lists them in help order.

Needs the ``serve`` extra (``pip install 'rxstream[serve]'``: the server and the ONNX backend);
importing this package without it raises a one-line :class:`~rxstream._extras.MissingExtraError`,
which the ``rxstream`` program (:mod:`rxstream.__main__`) prints as that line.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from rxstream._extras import MissingExtraError, require_extra

require_extra("the rxstream command", "serve")

from ._chat import add_chat_parser, run_chat
from ._models import add_models_parser, run_models_list, run_models_pull

__all__ = ["SUBCOMMANDS", "build_parser", "main", "run_chat", "run_models_list", "run_models_pull"]


def add_serve_parser(subparsers: Any) -> None:
    """Register ``rxstream serve`` (the OpenAI-compatible server in :mod:`rxstream.server`)."""
    from rxstream.server import add_serve_parser as add

    add(subparsers)


SUBCOMMANDS: list[Callable[[Any], None]] = [add_chat_parser, add_models_parser, add_serve_parser]
"""The functions that register each subcommand, in help order."""


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage mistake reported in one line (``rxstream chat: --top-p: ...``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``rxstream`` argument parser with every subcommand of :data:`SUBCOMMANDS`."""
    from rxstream import __version__

    parser = _Parser(
        prog="rxstream",
        description="Stream a language model's tokens as clean text with ReactiveX operators.",
    )
    parser.add_argument("--version", action="version", version=f"rxstream {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rxstream`` command; returns the exit status (130 when interrupted).
    With no arguments at all it prints the help (exit status 0)."""
    parser = build_parser()
    given = sys.argv[1:] if argv is None else list(argv)
    if not given:
        parser.print_help()
        return 0
    args = parser.parse_args(argv)
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
    except MissingExtraError as exc:  # a backend imported on demand, without its extra
        print(f"rxstream {args.command}: {exc}", file=sys.stderr)
        return 1
    return status
