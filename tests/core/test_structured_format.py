"""``OutputFormat``: what the answer must be, declared once and checked when it is made (the
server's ``response_format``, the CLI's options, the library's constructors)."""

from __future__ import annotations

import json

import pytest

from rxstream.structured import MAX_FORMAT_BYTES, OutputFormat, OutputFormatError

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def test_response_format_kinds() -> None:
    assert not OutputFormat.from_response_format(None).constrained
    assert not OutputFormat.from_response_format({"type": "text"}).constrained
    obj = OutputFormat.from_response_format({"type": "json_object"})
    assert obj.kind == "json_object" and obj.is_json
    fmt = OutputFormat.from_response_format(
        {"type": "json_schema", "json_schema": {"name": "thing", "schema": SCHEMA, "strict": True}}
    )
    assert (fmt.kind, fmt.name, fmt.strict, dict(fmt.schema or {})) == ("json_schema", "thing", True, SCHEMA)
    assert OutputFormat.from_response_format({"type": "regex", "regex": r"\d+"}).pattern == r"\d+"
    lark = 'start: "yes" | "no"'
    assert OutputFormat.from_response_format({"type": "grammar", "grammar": lark}).kind == "grammar"


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        ("json", "response_format", "must be an object"),
        ({"type": "xml"}, "response_format.type", "must be text, json_object"),
        ({"type": "json_object", "schema": {}}, "response_format", "unknown fields ['schema']"),
        ({"type": "json_schema"}, "response_format.json_schema", "must be an object"),
        (
            {"type": "json_schema", "json_schema": {"schema": 3}},
            "response_format.json_schema.schema",
            "Schema",
        ),
        (
            {"type": "json_schema", "json_schema": {"schema": {}, "strict": "yes"}},
            "response_format.json_schema.strict",
            "boolean",
        ),
        (
            {"type": "json_schema", "json_schema": {"schema": {}, "extra": 1}},
            "response_format.json_schema",
            "unknown",
        ),
        ({"type": "regex", "regex": ""}, "response_format.regex", "non-empty"),
        (
            {"type": "regex", "regex": "(("},
            "response_format.regex",
            "invalid regular expression '((': unclosed group",
        ),
        ({"type": "grammar", "grammar": "start: nothing_here"}, "response_format.grammar", "unknown name"),
        (
            {
                "type": "json_schema",
                "json_schema": {"schema": {"type": "object", "properties": {"a": {"type": "wat"}}}},
            },
            "response_format.json_schema.schema",
            "json schema",
        ),
    ],
)
def test_bad_response_formats_are_one_line_naming_the_field(raw: object, field: str, words: str) -> None:
    with pytest.raises(OutputFormatError) as caught:
        OutputFormat.from_response_format(raw)
    message = str(caught.value)
    assert caught.value.field == field
    assert words.lower() in message.lower(), message
    assert "\n" not in message and len(message) <= 300


def test_size_is_bounded() -> None:
    big = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "description": "x" * 64} for i in range(1000)},
    }
    assert len(json.dumps(big)) > MAX_FORMAT_BYTES
    with pytest.raises(OutputFormatError, match="more than the 65536 allowed"):
        OutputFormat.json_schema(big)
    with pytest.raises(OutputFormatError, match="more than"):
        OutputFormat.regex("a" * (MAX_FORMAT_BYTES + 1))


def test_strict_refuses_what_lenient_ignores() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "not": {"required": ["b"]}}
    lenient = OutputFormat.json_schema(schema, strict=False)
    assert lenient.constrained
    with pytest.raises(OutputFormatError, match='Unimplemented keys: \\["not"\\]'):
        OutputFormat.json_schema(schema, strict=True)


def test_cli_options() -> None:
    assert not OutputFormat.from_options().constrained
    fmt = OutputFormat.from_options(json_schema=json.dumps(SCHEMA))
    assert fmt.kind == "json_schema" and fmt.strict
    assert OutputFormat.from_options(regex="[0-9]+").kind == "regex"
    with pytest.raises(OutputFormatError, match="--json-schema: not JSON"):
        OutputFormat.from_options(json_schema="{nope")
    with pytest.raises(OutputFormatError, match="give one of --json-schema and --regex"):
        OutputFormat.from_options(json_schema="{}", regex="a")
    with pytest.raises(OutputFormatError, match=r"^--regex: invalid regular expression"):
        OutputFormat.from_options(regex="[a-")
