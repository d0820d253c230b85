"""DeepSeek-R1 (and its distills, QwQ): ``<think>...</think>`` reasoning. The chat template opens
``<think>`` in the prompt, so ``route(prompt=...)`` starts in the reasoning channel."""

from __future__ import annotations

from ..channels._spec import RouteSpec
from ._common import KINDS, THINK
from ._family import Family

FAMILY = Family(
    "deepseek-r1",
    RouteSpec((THINK,), start_anchor=("<｜Assistant｜>",), kinds=KINDS, name="deepseek-r1"),
    aliases=("qwq",),
    signature=lambda template: "<think>" in template,
    rank=50,
)
