"""Incremental JSON-schema checking: the first character after which no completion is valid.

:func:`compile_schema` turns a JSON schema (the subset tool definitions use) into a tree of
:class:`SchemaNode`; a :class:`SchemaChecker` follows the events of a
:class:`~._json_stream.JsonStream` (``detail=True``) and reports a violation at the **first
character after which no continuation of the text can be valid** (SEMANTICS §9):

- a value of a type the schema does not allow: at the value's first character (``{``, ``[``,
  ``"``, a digit or ``-``, ``t``/``f``/``n``);
- a key that ``additionalProperties: false`` does not allow: at the first character of the key
  that no allowed key continues (the closing quote when the key is a proper prefix of one);
- a string outside its ``enum``/``const``: at the first character that no member continues
  (its closing quote for a proper prefix of a member);
- ``true``/``false``/``null`` outside the enum: at their first letter (it decides the value);
- an ``integer`` that cannot be whole: at the character that rules it out (``1.5`` can still
  become ``1.5e1``; ``1.5e-`` cannot), else when the number is settled;
- a number outside its ``enum``/``const``: when the number is settled;
- a missing ``required`` key: at the object's closing ``}``.

Supported keywords: ``type`` (a name or a list), ``properties``, ``required``,
``additionalProperties`` (false, or a schema for the other keys), ``enum``, ``const``,
``items`` (a schema, or a list as in older drafts), ``prefixItems``, ``anyOf`` and ``oneOf``
(both checked as ``anyOf``: a value is valid when some branch accepts it; a branch is merged
with the keywords beside it), and the boolean schemas ``true``/``false``. Other keywords are
ignored (``$ref`` is not followed: the value it describes is not checked; with
``patternProperties`` any key is allowed). Enum members that are objects or arrays only fix the
type. A key given twice is checked each time.

Strings are compared as UTF-16 (what JSON's ``\\uXXXX`` escapes spell): a key is ruled out at
the escape that no allowed key continues, even inside an escaped surrogate pair.
"""

from __future__ import annotations

from ._schema_checker import SchemaChecker
from ._schema_node import ANY, SchemaError, SchemaNode, compile_schema, utf16
from ._schema_prefix import failure_position, integral_dead_at, prefix_failure

__all__ = [
    "ANY",
    "SchemaChecker",
    "SchemaError",
    "SchemaNode",
    "compile_schema",
    "failure_position",
    "integral_dead_at",
    "prefix_failure",
    "utf16",
]
