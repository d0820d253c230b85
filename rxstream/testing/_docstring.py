"""Marble diagrams written in docstrings, parsed and checked (so documentation cannot go stale).

A docstring block looks like this (values after two or more spaces, as Python keyword
arguments)::

    source:   -a-b-c-|        a="He", b="!<N", c="L>m"
    operator: replace({"<NL>": "\\n"})
    result:   -a-b-c-|        a="He", b="!", c="\\nm"
    upstream: ^------!

``upstream`` (optional) is the source's subscription diagram; ``dispose`` (optional) is a
diagram whose ``!`` marks the frame at which the subscriber disposes. Values may go on in the
lines below a ``source``/``result`` line, indented at least as far as its diagram, and any field
may go on in lines that start with ``...``; values are evaluated in the namespace given to
:func:`check_docstring_marbles` (so they may build objects).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reactivex import Observable

from ._marble_test import MarbleTest

__all__ = ["DocMarble", "check_docstring_marbles", "docstring_marbles"]

_LINE = re.compile(r"^\s*(source|operator|result|upstream|dispose):\s*(.*?)\s*$")
_MORE = re.compile(r"^\s*\.\.\.\s+(.*?)\s*$")
"""A continuation line (``...   more values``) of the field above it."""


@dataclass(frozen=True)
class DocMarble:
    """One marble example read from a docstring."""

    source: str
    source_values: dict[str, Any]
    operator: str
    result: str
    result_values: dict[str, Any]
    upstream: str | None = None
    dispose: str | None = None


def _diagram_and_values(rest: str, namespace: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    parts = re.split(r"\s{2,}", rest, maxsplit=1)
    values: dict[str, Any] = {}
    if len(parts) == 2:
        values = eval(f"dict({parts[1]})", {**namespace, "__builtins__": {"dict": dict}})
    return parts[0], values


def docstring_marbles(
    obj: Callable[..., Any] | str, namespace: Mapping[str, Any] | None = None
) -> list[DocMarble]:
    """The marble examples in ``obj``'s docstring (or in the given text); values are evaluated
    in ``namespace`` (plain literals without one)."""
    doc = obj if isinstance(obj, str) else (obj.__doc__ or "")
    names: Mapping[str, Any] = namespace or {}
    out: list[DocMarble] = []
    fields: dict[str, str] = {}
    label = ""
    column = 0

    def close() -> None:
        if fields:
            missing = {"source", "operator", "result"} - set(fields)
            if missing:
                raise ValueError(f"marble block {fields} is missing {sorted(missing)}")
            src, src_vals = _diagram_and_values(fields["source"], names)
            res, res_vals = _diagram_and_values(fields["result"], names)
            out.append(
                DocMarble(
                    src,
                    src_vals,
                    fields["operator"],
                    res,
                    res_vals,
                    fields.get("upstream"),
                    fields.get("dispose"),
                )
            )
            fields.clear()

    for line in doc.splitlines():
        m = _LINE.match(line)
        if m is None:
            indent = len(line) - len(line.lstrip())
            more_line = _MORE.match(line)
            if more_line is not None and label:
                sep = ", " if re.search(r"\s{2,}", fields[label]) else "  "
                fields[label] += sep + more_line.group(1)
            elif label in ("source", "result") and line.strip() and indent >= column:
                more = line.strip()
                fields[label] += (" " if re.search(r"\S\s{2,}\S", fields[label]) else "  ") + more
            else:
                label = ""
            continue
        label, rest = m.groups()
        column = m.start(2)
        if label == "source":
            close()
        fields[label] = rest
    close()
    return out


def check_docstring_marbles(obj: Callable[..., Any], namespace: Mapping[str, Any]) -> int:
    """Run every marble example in ``obj``'s docstring; return how many ran.

    ``namespace`` is where the ``operator:`` expressions are evaluated (e.g.
    ``vars(rxstream.operators)``). Raises :class:`~rxstream.testing.MarbleMismatch` on the
    first example that does not hold, and ValueError when the docstring has none.
    """
    examples = docstring_marbles(obj, namespace)
    if not examples:
        raise ValueError(f"{getattr(obj, '__name__', obj)!r} has no marble diagram in its docstring")
    for ex in examples:
        m = MarbleTest()
        src = m.cold(ex.source, ex.source_values)
        op = eval(ex.operator, dict(namespace))
        out: Observable[Any] = src.pipe(op)
        m.expect(out, ex.result, ex.result_values, dispose_at=ex.dispose)
        if ex.upstream is not None:
            m.expect_subscriptions(src, ex.upstream)
    return len(examples)
