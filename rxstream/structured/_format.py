"""What a generation's answer must be: :class:`OutputFormat`, declared once for every face.

The library takes one (``plan_chat(..., output=...)``, ``OnnxModel.generate(..., grammar=...)``
through :func:`~rxstream.structured.compose`); the server builds one from a request's
``response_format`` (:meth:`OutputFormat.from_response_format`); the CLI from ``--json-schema``,
``--regex`` and ``--grammar`` (:meth:`OutputFormat.from_options`). Each is checked when it is made:
a schema the grammar engine cannot enforce, a bad regular expression or grammar, or one over the
size bound is an :class:`OutputFormatError` naming the field, never a failure mid-generation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["MAX_FORMAT_BYTES", "FormatKind", "OutputFormat", "OutputFormatError"]

FormatKind = Literal["text", "json_schema", "json_object", "regex", "grammar"]
"""``text``: no constraint; ``json_schema``: JSON valid against a schema; ``json_object``: any JSON
object; ``regex``: text matching a regular expression (Rust ``regex`` syntax, matched whole);
``grammar``: a Lark grammar (llguidance's dialect, with ``%json {...}`` for embedded schemas)."""

MAX_FORMAT_BYTES = 64 * 1024
"""The largest schema, regular expression or grammar accepted (its JSON or text, in UTF-8 bytes):
what a client controls is bounded (the server's ``--max-format-kb`` may lower it)."""


class OutputFormatError(ValueError):
    """A bad output format: ``field`` names it (``response_format.json_schema.schema``) and the
    message says what is wrong, in one line."""

    def __init__(self, message: str, field: str = "response_format") -> None:
        super().__init__(message)
        self.field = field


def _one_line(text: str, limit: int = 240) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class OutputFormat:
    """What the answer must be (see :data:`FormatKind`).

    Attributes:
        kind: the kind of constraint.
        schema: the JSON Schema (``json_schema``), else None.
        pattern: the regular expression (``regex``) or the Lark grammar (``grammar``), else "".
        strict: for ``json_schema``: a keyword the engine cannot enforce is an error (True, as
            OpenAI's ``strict``) rather than ignored (False). The output is constrained either way.
        name: the schema's name (``response_format.json_schema.name``), for messages.
    """

    kind: FormatKind = "text"
    schema: Mapping[str, Any] | bool | None = None
    pattern: str = ""
    strict: bool = False
    name: str = ""
    _checked: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in ("text", "json_schema", "json_object", "regex", "grammar"):
            raise OutputFormatError(
                f"unknown output format {self.kind!r} (text, json_schema, json_object, regex, grammar)"
            )
        if self.kind == "json_schema" and not isinstance(self.schema, Mapping | bool):
            raise OutputFormatError(
                "a json_schema format needs a JSON Schema object", "response_format.json_schema.schema"
            )
        if self.kind in ("regex", "grammar") and not (isinstance(self.pattern, str) and self.pattern):
            raise OutputFormatError(f"a {self.kind} format needs a non-empty {self.kind}", self._field())
        object.__setattr__(self, "_checked", self._check())

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def json_schema(
        cls, schema: Mapping[str, Any] | bool, *, strict: bool = False, name: str = ""
    ) -> OutputFormat:
        """JSON valid against ``schema``."""
        return cls("json_schema", schema=schema, strict=strict, name=name)

    @classmethod
    def json_object(cls) -> OutputFormat:
        """Any JSON object."""
        return cls("json_object")

    @classmethod
    def regex(cls, pattern: str) -> OutputFormat:
        """Text that matches ``pattern`` as a whole (Rust ``regex`` syntax)."""
        return cls("regex", pattern=pattern)

    @classmethod
    def grammar(cls, lark: str) -> OutputFormat:
        """Text of a Lark grammar (llguidance's dialect; its ``start`` rule)."""
        return cls("grammar", pattern=lark)

    @classmethod
    def from_response_format(cls, raw: Any) -> OutputFormat:
        """A request's ``response_format``: ``{"type": "text"}``, ``{"type": "json_object"}``,
        ``{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`` (OpenAI's), and
        rxstream's ``{"type": "regex", "regex": ...}`` / ``{"type": "grammar", "grammar": ...}``.

        Raises:
            OutputFormatError: naming the field.
        """
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise OutputFormatError("response_format must be an object like {'type': 'json_object'}")
        kind = raw.get("type")
        allowed = {"text": {"type"}, "json_object": {"type"}, "json_schema": {"type", "json_schema"}}
        allowed |= {"regex": {"type", "regex"}, "grammar": {"type", "grammar"}}
        if kind not in allowed:
            raise OutputFormatError(
                f"response_format.type must be text, json_object, json_schema, regex or grammar, "
                f"got {_one_line(repr(kind), 60)}",
                "response_format.type",
            )
        unknown = sorted(set(raw) - allowed[kind])
        if unknown:
            raise OutputFormatError(f"response_format: unknown fields {unknown} for type {kind!r}")
        if kind in ("text", "json_object"):
            return cls(kind)
        if kind in ("regex", "grammar"):
            value = raw.get(kind)
            if not isinstance(value, str) or not value:
                raise OutputFormatError(
                    f"response_format.{kind} must be a non-empty string", f"response_format.{kind}"
                )
            return cls(kind, pattern=value)
        return cls._from_json_schema(raw.get("json_schema"))

    @classmethod
    def _from_json_schema(cls, spec: Any) -> OutputFormat:
        where = "response_format.json_schema"
        if not isinstance(spec, Mapping):
            raise OutputFormatError(f"{where} must be an object with a 'schema'", where)
        unknown = sorted(set(spec) - {"name", "schema", "strict", "description"})
        if unknown:
            raise OutputFormatError(f"{where}: unknown fields {unknown}", where)
        name = spec.get("name", "")
        if not isinstance(name, str) or len(name) > 64:
            raise OutputFormatError(
                f"{where}.name must be a string of at most 64 characters", f"{where}.name"
            )
        strict = spec.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise OutputFormatError(f"{where}.strict must be a boolean", f"{where}.strict")
        schema = spec.get("schema", {"type": "object"})
        if not isinstance(schema, Mapping | bool):
            raise OutputFormatError(f"{where}.schema must be a JSON Schema object", f"{where}.schema")
        return cls("json_schema", schema=schema, strict=bool(strict), name=name)

    @classmethod
    def from_options(
        cls, *, json_schema: str | None = None, regex: str | None = None, grammar: str | None = None
    ) -> OutputFormat:
        """The CLI's ``--json-schema FILE`` (its text, already read), ``--regex`` and
        ``--grammar FILE`` (its text); at most one of them.

        Raises:
            OutputFormatError: naming the option.
        """
        given = [
            (k, v)
            for k, v in (("json-schema", json_schema), ("regex", regex), ("grammar", grammar))
            if v is not None
        ]
        if len(given) > 1:
            raise OutputFormatError(
                f"give one of --{given[0][0]} and --{given[1][0]}, not both", "--" + given[1][0]
            )
        if not given:
            return cls()
        option, value = given[0]
        if option == "json-schema":
            try:
                schema = json.loads(value)
            except ValueError as exc:
                raise OutputFormatError(
                    f"--json-schema: not JSON: {_one_line(str(exc), 120)}", "--json-schema"
                ) from None
            try:
                return cls.json_schema(schema, strict=True)
            except OutputFormatError as exc:
                raise OutputFormatError(f"--json-schema: {exc}", "--json-schema") from None
        try:
            return cls.regex(value) if option == "regex" else cls.grammar(value)
        except OutputFormatError as exc:
            raise OutputFormatError(f"--{option}: {exc}", "--" + option) from None

    # -- what it is ---------------------------------------------------------------------------
    @property
    def constrained(self) -> bool:
        """Whether the answer is constrained (every kind but ``text``)."""
        return self.kind != "text"

    @property
    def is_json(self) -> bool:
        """Whether the answer is JSON (``json_schema`` or ``json_object``)."""
        return self.kind in ("json_schema", "json_object")

    def subgrammar(self) -> dict[str, Any]:
        """The answer's grammar as one entry of an llguidance grammar list (checked)."""
        return json.loads(self._checked) if self._checked else {}

    def _field(self) -> str:
        return {
            "json_schema": "response_format.json_schema.schema",
            "regex": "response_format.regex",
            "grammar": "response_format.grammar",
        }.get(self.kind, "response_format")

    def _check(self) -> str:
        """The engine's grammar entry for the answer, as JSON text ("" for ``text``), after the
        engine has validated it."""
        if self.kind == "text":
            return ""
        entry: dict[str, Any]
        if self.kind == "json_object":
            entry = {"json_schema": {"type": "object"}}
        elif self.kind == "json_schema":
            options = {
                "lenient": not self.strict,
                "whitespace_flexible": False,
                "item_separator": ", ",
                "key_separator": ": ",
            }
            schema = self.schema if isinstance(self.schema, bool) else dict(self.schema or {})
            if isinstance(schema, dict):
                schema = {**schema, "x-guidance": {**options, **schema.get("x-guidance", {})}}
            entry = {"json_schema": schema}
        elif self.kind == "regex":
            from ._engine import lark_regex

            entry = {"lark_grammar": f"start: ANSWER\nANSWER: {lark_regex(self.pattern)}"}
        else:
            entry = {"lark_grammar": self.pattern}
        try:
            text = json.dumps(entry, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise OutputFormatError(
                f"the schema is not JSON: {_one_line(str(exc), 120)}", self._field()
            ) from None
        if len(text.encode()) > MAX_FORMAT_BYTES:
            raise OutputFormatError(
                f"the {self.kind.replace('_', ' ')} is {len(text.encode())} bytes, more than the "
                f"{MAX_FORMAT_BYTES} allowed",
                self._field(),
            )
        from ._engine import validate_entry

        problem = validate_entry(text)
        if problem and self.kind == "regex" and "regex parse error" in problem:
            reason = problem.rsplit("error:", 1)[-1].split(" | ")[0].strip()
            problem = f"invalid regular expression {self.pattern!r}: {reason}"
            raise OutputFormatError(_one_line(problem), self._field())
        if problem:
            raise OutputFormatError(f"{self.kind.replace('_', ' ')}: {_one_line(problem)}", self._field())
        return text
