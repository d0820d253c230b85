"""GLM-4.5 (and GLM-4.6): ``<think>...</think>`` reasoning; tool calls
``<tool_call>NAME`` then, per parameter, ``<arg_key>KEY</arg_key>`` ``<arg_value>VALUE</arg_value>``,
then ``</tool_call>``, several blocks in a row. Each block is one region holding one call: the
name is its first line (or all of it: ``<tool_call>NAME</tool_call>`` has no arguments), the call
ends with the region. Values are typed by the tool's schema, as in the ``xml`` format. The
generation prompt ends with ``<|assistant|>`` (with ``<think></think>`` after it when thinking is
off); ``<|user|>`` and ``<|observation|>`` end the turn."""

from __future__ import annotations

from ..channels._spec import RouteSpec
from ..channels._tool_xml import XmlCallFormat, XmlSyntax
from ._common import KINDS, THINK, TOOL_CALL_TAGS
from ._family import Family

GLM45_XML = XmlCallFormat(
    "glm-4.5",
    XmlSyntax(
        call_open="",
        name_end="\n",
        call_close="",
        key_open="<arg_key>",
        key_end="</arg_key>",
        value_open="<arg_value>",
        value_close="</arg_value>",
    ),
)
"""The name on the region's first line, ``<arg_key>``/``<arg_value>`` parameters."""

FAMILY = Family(
    "glm-4.5",
    RouteSpec(
        (THINK, TOOL_CALL_TAGS),
        default_close=("<|user|>", "<|observation|>", "<|endoftext|>"),
        start_anchor=("<|assistant|>",),
        kinds=KINDS,
        tool_format=GLM45_XML,
        name="glm-4.5",
    ),
    aliases=("glm-4.6", "glm45"),
    signature=lambda template: "<arg_key>" in template,
    rank=25,
    special_delimiters=True,
)
