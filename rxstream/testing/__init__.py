"""Marble testing for rxstream pipelines.

RxPY's own marbles cannot put multi-character values in consecutive frames, assert
subscription/disposal frames, or show a readable diff. This kit can:

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
"""

from ._diagram import Event, parse, render
from ._docstring import DocMarble, check_docstring_marbles, docstring_marbles
from ._marble_test import MarbleMismatch, MarbleTest

__all__ = [
    "DocMarble",
    "Event",
    "MarbleMismatch",
    "MarbleTest",
    "check_docstring_marbles",
    "docstring_marbles",
    "parse",
    "render",
]
