"""A corpus of JSON Schemas with a question each: what the structured-output tests ask the real
default model for (nested objects, arrays, enums, bounded numbers, optional fields, ``$ref``,
``anyOf``, nullable values, patterns, constants). Every answer must validate."""

from __future__ import annotations

from typing import Any

_STR = {"type": "string", "maxLength": 60}
_NAME = {"type": "string", "minLength": 1, "maxLength": 40}


def _obj(props: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props) if required is None else required,
        "additionalProperties": False,
        **extra,
    }


CORPUS: list[tuple[str, str, dict[str, Any]]] = [
    ("city", "Tell me about Paris.", _obj({"city": _NAME, "country": _NAME})),
    (
        "person",
        "Invent a person.",
        _obj({"name": _NAME, "age": {"type": "integer", "minimum": 0, "maximum": 120}}),
    ),
    ("bool", "Is the sky blue?", _obj({"answer": {"type": "boolean"}})),
    ("enum", "What color is grass?", _obj({"color": {"enum": ["red", "green", "blue", "yellow"]}})),
    (
        "number",
        "How tall is a tall man in meters?",
        _obj({"meters": {"type": "number", "minimum": 0, "maximum": 3}}),
    ),
    (
        "integer-range",
        "Pick a number from 1 to 10.",
        _obj({"n": {"type": "integer", "minimum": 1, "maximum": 10}}),
    ),
    (
        "list",
        "Name three fruits.",
        _obj({"fruits": {"type": "array", "items": _NAME, "minItems": 3, "maxItems": 3}}),
    ),
    (
        "numbers",
        "Give me some even numbers.",
        _obj({"evens": {"type": "array", "items": {"type": "integer"}, "maxItems": 5}}),
    ),
    (
        "nested",
        "Describe a book.",
        _obj({"title": _NAME, "author": _obj({"first": _NAME, "last": _NAME}), "year": {"type": "integer"}}),
    ),
    (
        "optional",
        "Describe a car.",
        _obj({"make": _NAME, "model": _NAME, "color": _NAME, "electric": {"type": "boolean"}}, ["make"]),
    ),
    (
        "array-of-objects",
        "List two planets with their order from the sun.",
        _obj(
            {
                "planets": {
                    "type": "array",
                    "items": _obj({"name": _NAME, "order": {"type": "integer", "minimum": 1, "maximum": 8}}),
                    "minItems": 2,
                    "maxItems": 2,
                }
            }
        ),
    ),
    (
        "ref",
        "Give the start and end points of a line.",
        {
            **_obj({"start": {"$ref": "#/$defs/point"}, "end": {"$ref": "#/$defs/point"}}),
            "$defs": {"point": _obj({"x": {"type": "integer"}, "y": {"type": "integer"}})},
        },
    ),
    (
        "ref-nested",
        "Describe a small family: a parent and their children.",
        {
            "$ref": "#/$defs/parent",
            "$defs": {
                "person": _obj({"name": _NAME, "age": {"type": "integer", "minimum": 0, "maximum": 120}}),
                "parent": _obj(
                    {
                        "name": _NAME,
                        "children": {"type": "array", "items": {"$ref": "#/$defs/person"}, "maxItems": 3},
                    }
                ),
            },
        },
    ),
    ("nullable", "Who is the king of France?", _obj({"king": {"type": ["string", "null"], "maxLength": 40}})),
    (
        "anyof",
        "What is 2 + 2?",
        _obj({"result": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 20}]}}),
    ),
    ("const", "Say hello.", _obj({"kind": {"const": "greeting"}, "text": _STR})),
    ("pattern", "Give me a US zip code.", _obj({"zip": {"type": "string", "pattern": "^[0-9]{5}$"}})),
    (
        "date",
        "When did the Second World War end?",
        _obj({"date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}}),
    ),
    (
        "enum-list",
        "Which days are on the weekend?",
        _obj(
            {
                "days": {
                    "type": "array",
                    "items": {"enum": ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]},
                    "maxItems": 7,
                }
            }
        ),
    ),
    (
        "scores",
        "Rate three movies from 1 to 5.",
        _obj(
            {
                "ratings": {
                    "type": "array",
                    "items": _obj({"movie": _NAME, "stars": {"type": "integer", "minimum": 1, "maximum": 5}}),
                    "maxItems": 3,
                }
            }
        ),
    ),
    (
        "exclusive",
        "Give a probability.",
        _obj({"p": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}}),
    ),
    ("string", "Write a one-line motto.", _obj({"motto": _STR})),
    (
        "address",
        "Write an address.",
        _obj(
            {"street": _STR, "city": _NAME, "postcode": {"type": "string", "pattern": "^[0-9]{4,5}$"}},
            ["street", "city"],
        ),
    ),
    (
        "weather",
        "What is the weather in London?",
        _obj(
            {
                "city": _NAME,
                "temperature_c": {"type": "number", "minimum": -50, "maximum": 60},
                "conditions": {"enum": ["sunny", "cloudy", "rainy", "snowy"]},
            }
        ),
    ),
    (
        "recipe",
        "Give a simple recipe.",
        _obj(
            {
                "dish": _NAME,
                "ingredients": {"type": "array", "items": _NAME, "minItems": 1, "maxItems": 4},
                "minutes": {"type": "integer", "minimum": 1, "maximum": 240},
            }
        ),
    ),
    (
        "matrix",
        "Give a 2x2 identity matrix.",
        _obj(
            {
                "rows": {
                    "type": "array",
                    "items": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
                    "minItems": 2,
                    "maxItems": 2,
                }
            }
        ),
    ),
    ("yes-no", "Do cats bark?", _obj({"answer": {"enum": ["yes", "no"]}, "why": _STR})),
    (
        "event",
        "Describe a concert.",
        _obj(
            {
                "artist": _NAME,
                "venue": _obj({"name": _NAME, "capacity": {"type": "integer", "minimum": 1}}),
                "sold_out": {"type": "boolean"},
            }
        ),
    ),
    (
        "top-array",
        "List two colors.",
        {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 2, "maxItems": 2},
    ),
    ("top-integer", "How many legs does a spider have?", {"type": "integer", "minimum": 0, "maximum": 100}),
    (
        "inventory",
        "List the items in a small shop.",
        _obj(
            {
                "items": {
                    "type": "array",
                    "items": _obj(
                        {
                            "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"},
                            "qty": {"type": "integer", "minimum": 0, "maximum": 999},
                            "price": {"type": "number", "minimum": 0},
                        }
                    ),
                    "maxItems": 3,
                }
            }
        ),
    ),
    (
        "user",
        "Create a user profile.",
        _obj(
            {
                "username": {"type": "string", "pattern": "^[a-z][a-z0-9_]{2,15}$"},
                "email": {"type": "string", "pattern": "^[a-z0-9.]+@[a-z0-9]+\\.[a-z]{2,4}$"},
                "roles": {
                    "type": "array",
                    "items": {"enum": ["admin", "editor", "viewer"]},
                    "minItems": 1,
                    "maxItems": 3,
                },
            }
        ),
    ),
]
"""(name, question, schema): 32 schemas. (A schema that refers to itself without a bound, a
node whose children are nodes, let greedy SmolLM2 nest until its token budget: such an answer
ends with ``length``, cut short; the corpus bounds its nesting.)"""
