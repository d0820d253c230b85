"""Text given on the command line: backslash escapes, and bytes that are not UTF-8."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["replace_rule", "stop_string", "tools_file", "valid_text"]


def valid_text(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (undecodable bytes in argv arrive as lone surrogates)."""
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
    if not valid_text(value):
        raise argparse.ArgumentTypeError(f"{option}: {text!r} is not valid UTF-8 text")
    return value


def replace_rule(text: str) -> tuple[str, str]:
    """``--replace OLD=NEW``, unescaped."""
    old, sep, new = text.partition("=")
    if not sep or not old:
        raise argparse.ArgumentTypeError(f"--replace needs OLD=NEW with a non-empty OLD, got {text!r}")
    return _unescape(old, "--replace"), _unescape(new, "--replace")


def stop_string(text: str) -> str:
    """``--stop TEXT``, unescaped."""
    value = _unescape(text, "--stop")
    if not value:
        raise argparse.ArgumentTypeError("--stop needs a non-empty string")
    return value


def tools_file(path: str) -> tuple[dict[str, Any], ...]:
    """``--tools FILE``: a JSON list of OpenAI function tools, each checked (a function with an
    OpenAI-valid name and a schema that compiles, no name twice)."""
    from ..channels import compile_tools
    from ..chat import TOOL_NAME

    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{path} is not JSON: {exc}") from None
    try:
        tools = compile_tools(raw, "--tools") or {}
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"{path}: {exc}") from None
    for name in tools:
        if not TOOL_NAME.fullmatch(name):
            raise argparse.ArgumentTypeError(
                f"{path}: tool name {name!r} must be 1 to 64 letters, digits, '_' or '-'"
            )
    return tuple(dict(t) for t in raw)
