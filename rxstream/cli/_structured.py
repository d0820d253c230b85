"""The chat's structured-output options: ``--json-schema FILE``, ``--regex``, ``--grammar FILE``
and ``--tool-choice``, read into an :class:`~rxstream.structured.OutputFormat` and a
:class:`~rxstream.chat.ToolChoice` (the same objects the server builds from a request)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from ..chat import ToolChoice
from ..structured import OutputFormat, OutputFormatError

__all__ = ["add_structured_options", "output_from_args", "text_file", "tool_choice_from_args"]


def text_file(path: str) -> str:
    """A file's text (``--json-schema FILE``, ``--grammar FILE``)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise argparse.ArgumentTypeError(f"{path} is not UTF-8 text") from None


def add_structured_options(p: argparse.ArgumentParser) -> None:
    """Register the options (after ``--tools``)."""
    p.add_argument(
        "--tool-choice",
        default=None,
        metavar="auto|required|none|NAME",
        help="with --tools: auto (the model decides; the default), required (it calls a tool), "
        "none, or a tool's name (it calls that one); required and a name make the call valid "
        "JSON of the tool's schema by constrained decoding",
    )
    p.add_argument(
        "--json-schema",
        type=text_file,
        default=None,
        metavar="FILE",
        help="the answer is JSON valid against the JSON Schema in FILE (constrained decoding; "
        "reasoning stays free)",
    )
    p.add_argument("--regex", default=None, help="the answer matches this regular expression (Rust syntax)")
    p.add_argument(
        "--grammar",
        type=text_file,
        default=None,
        metavar="FILE",
        help="the answer follows the Lark grammar in FILE (llguidance's dialect)",
    )


def output_from_args(args: argparse.Namespace) -> OutputFormat:
    """The answer's format from the options.

    Raises:
        ValueError: one line naming the option.
    """
    try:
        return OutputFormat.from_options(json_schema=args.json_schema, regex=args.regex, grammar=args.grammar)
    except OutputFormatError as exc:
        raise ValueError(str(exc)) from None


def tool_choice_from_args(args: argparse.Namespace, tools: Sequence[Mapping[str, Any]]) -> ToolChoice:
    """``--tool-choice`` checked against ``--tools``.

    Raises:
        ValueError: one line naming the option.
    """
    raw = args.tool_choice
    if raw is None:
        return ToolChoice("auto" if tools else "none")
    if not tools and raw != "none":
        raise ValueError(f"--tool-choice {raw} needs --tools FILE")
    if raw in ("auto", "required", "none"):
        return ToolChoice(raw)
    names = [t.get("function", t).get("name") for t in tools]
    if raw not in names:
        raise ValueError(
            f"--tool-choice {raw!r} is not a tool of --tools (they are: {', '.join(map(str, names))})"
        )
    return ToolChoice("named", raw)
