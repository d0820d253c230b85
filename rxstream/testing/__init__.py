"""Testing kits for rxstream pipelines and for streaming parsers.

**Marble testing.** RxPY's own marbles cannot put multi-character values in consecutive frames,
assert subscription/disposal frames, or show a readable diff. This kit can:

>>> from rxstream.testing import MarbleTest
>>> from rxstream.operators import replace
>>> m = MarbleTest()
>>> src = m.cold("-[He]-[llo<N]-[L>]-|")
>>> m.expect(src.pipe(replace({"<NL>": "\\n"})), "-[He]-[llo]-n-|", {"n": "\\n"})
>>> m.expect_subscriptions(src, "^------!")

Every token of a diagram is one frame: ``-`` (nothing), a letter (a value, looked up in the
values mapping), ``[text]`` (a literal multi-character value), ``(ab|)`` (a group in one frame),
``|`` (complete), ``#`` (error), and in subscription diagrams ``^`` (subscribe) and ``!``
(dispose). A line ``...   b="more", c="values"`` continues the values of the line
above. :func:`check_docstring_marbles` runs the marble diagrams written in a docstring.

**Streaming-parser parity.** :func:`check_parity` feeds any streaming parser (a ``feed``/``finish``
pair or an Rx operator) many chunkings of an input -- whole, per character, per token of a real
tokenizer, multi-token groups, splits inside delimiters or UTF-8 characters, random cuts -- and
checks that it agrees with its batch reference, never retracts what it emitted, and holds nothing
back at the end; a failure shows the minimized chunking (guide: ``docs/parity.md``).
"""

from ._chunkings import (
    Chunker,
    Chunking,
    characters,
    chunkings,
    default_chunkers,
    delimiter_splits,
    random_cuts,
    token_boundaries,
    token_groups,
    tokens,
    utf8_splits,
    whole,
)
from ._diagram import Event, parse, render
from ._docstring import DocMarble, check_docstring_marbles, docstring_marbles
from ._marble_test import MarbleMismatch, MarbleTest
from ._parity import (
    CHECKS,
    Check,
    MergeText,
    Parity,
    ParityError,
    check_chunking,
    check_parity,
    check_parity_exhaustive,
    merge_text,
)

__all__ = [
    "CHECKS",
    "Check",
    "Chunker",
    "Chunking",
    "DocMarble",
    "Event",
    "MarbleMismatch",
    "MarbleTest",
    "MergeText",
    "Parity",
    "ParityError",
    "characters",
    "check_chunking",
    "check_docstring_marbles",
    "check_parity",
    "check_parity_exhaustive",
    "chunkings",
    "default_chunkers",
    "delimiter_splits",
    "docstring_marbles",
    "merge_text",
    "parse",
    "random_cuts",
    "render",
    "token_boundaries",
    "token_groups",
    "tokens",
    "utf8_splits",
    "whole",
]
