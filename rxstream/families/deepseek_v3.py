"""DeepSeek-V3 (and R1 with tools): ``<think>...</think>`` reasoning, then tool calls
``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME`` + a fenced
```` ```json ```` block holding the arguments + ``<｜tool▁call▁end｜>``, several in a row, the
last followed by ``<｜tool▁calls▁end｜>``. Each call is one region, the arguments object alone
(its name is the opening delimiter's ``name`` capture); the calls' framing is special tokens and
never reaches the answer."""

from __future__ import annotations

from ..channels._spec import Region, RouteSpec
from ..channels._tool_json import JsonCallFormat
from ..text import rx
from ._common import KINDS, THINK
from ._family import Family

DEEPSEEK_V3_ARGS = JsonCallFormat("deepseek-v3", multiple=False, name_capture="name")
"""The region is the arguments object; the name is the opening delimiter's ``name`` capture."""

_CALL_OPEN = rx(
    r"\n?(?:<｜tool▁calls▁begin｜>)?<｜tool▁call▁begin｜>[^<\n]*<｜tool▁sep｜>"
    r"(?P<name>[^<\n]+)\n```json\n"
)
"""One call's head: the section's opening token before the first; the ``\\n`` the template puts
between two calls; the call type (``function``) and the tool's name."""


def _open_call(name: str | None) -> str:
    head = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
    return head + ("" if name is None else f"{name}\n```json\n")


FAMILY = Family(
    "deepseek-v3",
    RouteSpec(
        (
            THINK,
            Region("tool_call", (_CALL_OPEN,), ("\n```<｜tool▁call▁end｜>", "```<｜tool▁call▁end｜>")),
        ),
        default_close=("<｜tool▁calls▁end｜>", "<｜end▁of▁sentence｜>"),
        start_anchor=("<｜Assistant｜>",),
        kinds=KINDS,
        tool_format=DEEPSEEK_V3_ARGS,
        name="deepseek-v3",
    ),
    signature=lambda template: "<｜tool▁calls▁begin｜>" in template,
    rank=45,
    special_delimiters=True,
    open_call=_open_call,
)
