"""A failed parity check and its report: the minimized chunking, what was expected, what came out."""

from __future__ import annotations

import pprint
from dataclasses import dataclass
from typing import Any, Literal, get_args

from ._chunkings import Chunking, Data
from ._parity_run import _Outcome

__all__ = ["CHECKS", "Check", "ParityError"]

Check = Literal["parity", "retraction", "flush"]
CHECKS: tuple[Check, ...] = get_args(Check)
"""Every check, in the order they run."""


@dataclass
class _Failure:
    check: Check
    chunking: Chunking  # the run that failed (for flush: the truncated input)
    expected: _Outcome
    actual: _Outcome
    step: int = 0  # retraction: the chunk after which the events so far were not a prefix
    so_far: Any = None


class ParityError(AssertionError):
    """A streaming parser failed a parity check. The message shows the minimized chunking, the
    expected and the actual result.

    Attributes:
        check: ``"parity"``, ``"retraction"`` or ``"flush"``.
        chunking: the minimized chunking (for ``flush``: of the input up to where the stream ended).
        found: the chunking as it was first found, before minimizing.
        expected: the batch reference's result, normalized (or the exception it raised).
        actual: the streamed result, normalized (or the exception the parser raised).
    """

    def __init__(
        self, message: str, *, check: Check, chunking: Chunking, found: Chunking, expected: Any, actual: Any
    ) -> None:
        super().__init__(message)
        self.check: Check = check
        self.chunking = chunking
        self.found = found
        self.expected = expected
        self.actual = actual


def _indent(text: str, by: str = "    ") -> str:
    return "\n".join(by + line for line in text.splitlines())


def _short(data: Data, limit: int = 400) -> str:
    if len(data) <= limit:
        return repr(data)
    return f"{data[:limit]!r}... ({len(data) - limit} more)"


def _units(data: Data) -> str:
    return "bytes" if isinstance(data, bytes) else "characters"


def _first_difference(a: Any, b: Any) -> str:
    if not (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple))) or max(len(a), len(b)) < 4:
        return ""
    for i, (x, y) in enumerate(zip(a, b)):  # noqa: B905 - lengths may differ
        if x != y:
            return f"  first difference at item {i}: expected {x!r}, got {y!r}\n"
    if len(a) != len(b):
        return f"  first difference at item {min(len(a), len(b))}: {len(a)} items expected, {len(b)} came\n"
    return ""


def _format(failure: _Failure, found: Chunking, data: Data, reference_named: bool) -> str:
    c = failure.chunking
    chunks = c.chunks
    plural = "chunk" if len(chunks) == 1 else "chunks"
    origin = f"found by {found.source}" if found.source else "as given"
    if found.cuts != c.cuts or found.data != c.data:
        origin += f", minimized from {len(found.chunks)} chunks"
    chunking = f"  chunking: {c.describe()}  ({len(chunks)} {plural}, {origin})\n"
    batch = "batch" if reference_named else "the parser's own whole-input run"
    if failure.check == "parity":
        return (
            "streaming parity failed: the streamed result differs from the batch result\n"
            f"  input: {_short(data)} ({len(data)} {_units(data)})\n"
            + chunking
            + f"  expected ({batch}, normalized):\n{_indent(failure.expected.show())}\n"
            f"  actual (streamed, normalized):\n{_indent(failure.actual.show())}\n"
            + _first_difference(failure.expected.value, failure.actual.value)
        ).rstrip("\n")
    if failure.check == "flush":
        return (
            "streaming parity failed: a stream that ends here gives a different result than the batch "
            "result of the input so far (held output not flushed at the end?)\n"
            f"  input so far: {_short(c.data)} (the first {len(c.data)} of {len(data)} {_units(data)})\n"
            + chunking
            + f"  expected ({batch} of the input so far, normalized):\n{_indent(failure.expected.show())}\n"
            f"  actual (streamed, then finished, normalized):\n{_indent(failure.actual.show())}\n"
            + _first_difference(failure.expected.value, failure.actual.value)
        ).rstrip("\n")
    return (
        "streaming parity failed: emitted output was retracted (what was emitted so far is not a "
        "prefix of the final result)\n"
        f"  input: {_short(data)} ({len(data)} {_units(data)})\n"
        + chunking
        + f"  emitted after chunk {failure.step + 1} of {len(chunks)} ({chunks[failure.step]!r}), "
        "normalized:\n"
        f"{_indent(pprint.pformat(failure.so_far, width=100, sort_dicts=False))}\n"
        f"  final (streamed, normalized):\n{_indent(failure.actual.show())}"
    )
