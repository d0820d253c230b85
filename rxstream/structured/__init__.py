"""Structured output: constrained decoding that knows the channels.

- :class:`OutputFormat` -- what the answer must be (a JSON Schema, any JSON object, a regular
  expression, a Lark grammar), declared once for the library, the server's ``response_format``
  and the CLI's ``--json-schema`` / ``--regex`` / ``--grammar``; :class:`OutputFormatError`.
- :func:`compose` -- one generation's :class:`Grammar` from its route: reasoning free, the answer
  constrained from its first character, forced and ``strict`` tool calls well-formed;
  :class:`UnsupportedConstraint`.
- :class:`GrammarTokenizer` -- a model's tokenizer for the grammar engine, and the compiled
  grammars; one :class:`TokenConstraint` per generated row; :func:`fill_masks` computes a batch's
  masks together. :class:`GrammarError` is a generation's failure.

The engine is llguidance (with the ``onnx`` extra); SEMANTICS §15 has the rules.
"""

from ._compose import MAX_CALLS, UnsupportedConstraint, call_schema, compose
from ._engine import Grammar, GrammarError, GrammarTokenizer, TokenConstraint, fill_masks
from ._format import MAX_FORMAT_BYTES, FormatKind, OutputFormat, OutputFormatError

__all__ = [
    "MAX_CALLS",
    "MAX_FORMAT_BYTES",
    "FormatKind",
    "Grammar",
    "GrammarError",
    "GrammarTokenizer",
    "OutputFormat",
    "OutputFormatError",
    "TokenConstraint",
    "UnsupportedConstraint",
    "call_schema",
    "compose",
    "fill_masks",
]
