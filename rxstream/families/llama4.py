"""Llama 4: pythonic tool calls, ``<|python_start|>[get_weather(city='Paris', days=3)]<|python_end|>``,
or the list alone as the whole answer; up to ``<|eot|>`` or ``<|eom|>``. Its delimiters are
special tokens."""

from __future__ import annotations

from ..channels._spec import Region, RouteSpec
from ..channels._tool_pythonic import PythonicCallFormat
from ..text import rx
from ._common import KINDS
from ._family import Family

LLAMA4_PYTHONIC = PythonicCallFormat("pythonic")
"""``[NAME(key=value, ...), ...]``; a bare list's first name is its opener's ``name`` capture."""

_ENDS = ("<|eot|>", "<|eom|>")

_BARE_CALLS = rx(r"\A[ \t\r\n]*\[[ \t\r\n]*(?P<name>[A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*\(")
"""A list of calls that is the whole answer: ``[`` + a name + ``(`` at the start of the answer
(``\\A``: where the router's scan starts, the start of the stream and after each close); prose
is held only until a character rules that out (``[1]``, ``Hello``)."""

FAMILY = Family(
    "llama4",
    RouteSpec(
        (
            Region("tool_call", ("<|python_start|>",), ("<|python_end|>", *_ENDS), close_at_end=True),
            Region("tool_call", (_BARE_CALLS,), _ENDS, close_at_end=True),
        ),
        default_close=_ENDS,
        start_anchor=("<|header_start|>assistant<|header_end|>\n\n",),
        kinds=KINDS,
        tool_format=LLAMA4_PYTHONIC,
        name="llama4",
    ),
    aliases=("llama-4",),
    signature=lambda template: "<|header_start|>" in template,
    rank=70,
    special_delimiters=True,
)
