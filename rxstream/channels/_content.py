"""Content rules of a response template: turn a region's text into a message field's value.

A field of a ``response_template`` (transformers' declarative response format) says how the text
of its region becomes a value: a *content parser* (``text``, ``int``, ``float``, ``bool``,
``json`` with its dialect knobs, ``xml-inline``, ``kv-lines``, ``python-call-list``), then an
optional *transform* (a template of whole-string ``{placeholder}`` strings filled from the parsed
content and the delimiters' named groups), applied to each list element with ``transform_each``.
Tool-call arguments that stayed strings can then be cast by the calling tool's JSON schema
(:class:`ToolSchemas`). The behaviour is that of ``transformers.utils.chat_parsing``; the code is
this project's own.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from ._json_stream import loads_bounded

__all__ = [
    "CONTENT_PARSERS",
    "STREAMABLE_PARSERS",
    "ToolSchemas",
    "apply_transform",
    "check_content_args",
    "check_transform",
    "coerce_argument",
    "parse_content",
    "schema_types",
]


def _text(text: str, args: Mapping[str, Any]) -> str:
    return text.strip() if args.get("strip", True) else text


def _int(text: str, args: Mapping[str, Any]) -> int:
    return int(_text(text, args))


def _float(text: str, args: Mapping[str, Any]) -> float:
    return float(_text(text, args))


def _bool(text: str, args: Mapping[str, Any]) -> bool:
    return _text(text, args).lower() in ("true", "1")


# placeholders for custom-delimited strings while the JSON dialect is rewritten: control
# characters no model writes (input that contains them is refused)
_MARK_OPEN, _MARK_CLOSE = "\x01", "\x02"
_BARE_KEY = re.compile(r'"(?:\\.|[^"\\])*"|(?<=[{,])(\s*)(\w+)(\s*):')


def _pull_strings(text: str, open_d: str, close_d: str, found: list[str]) -> str:
    """Replace each ``open_d ... close_d`` (shortest, left to right) by a numbered mark."""
    out: list[str] = []
    pos = 0
    while True:
        start = text.find(open_d, pos)
        if start < 0:
            break
        end = text.find(close_d, start + len(open_d))
        if end < 0:
            break
        found.append(text[start + len(open_d) : end])
        out.append(text[pos:start])
        out.append(f"{_MARK_OPEN}{len(found) - 1}{_MARK_CLOSE}")
        pos = end + len(close_d)
    out.append(text[pos:])
    return "".join(out)


def _quote_bare_keys(text: str) -> str:
    """Quote ``key`` in ``{key: ...}`` / ``, key: ...``; quoted strings are left as they are."""

    def fix(m: re.Match[str]) -> str:
        if m.group(2) is None:
            return m.group(0)
        return f'{m.group(1)}"{m.group(2)}"{m.group(3)}:'

    return _BARE_KEY.sub(fix, text)


def _json(text: str, args: Mapping[str, Any]) -> Any:
    delims = args.get("string_delims", [])
    working = text
    found: list[str] = []
    if delims:
        if _MARK_OPEN in text or _MARK_CLOSE in text:
            raise ValueError("json: the text contains \\x01 or \\x02, which string_delims parsing reserves")
        for open_d, close_d in delims:
            working = _pull_strings(working, open_d, close_d, found)
    if args.get("unquoted_keys", False):
        working = _quote_bare_keys(working)
    for i, s in enumerate(found):
        working = working.replace(f"{_MARK_OPEN}{i}{_MARK_CLOSE}", json.dumps(s))
    try:
        return loads_bounded(working)
    except ValueError as exc:  # invalid JSON, or nested deeper than the bound
        if args.get("allow_non_json"):
            return _text(text, args)
        shown = f"{text!r}" if working == text else f"{text!r} (rewritten: {working!r})"
        raise ValueError(f"json: the region is not JSON: {exc}; text: {shown}") from None


def _pattern_engine() -> Any:
    """``regex`` when installed (the engine response templates are written for), else ``re``."""
    try:
        return importlib.import_module("regex")
    except ImportError:  # pragma: no cover - regex comes with the test and bench extras
        return re


def _sub_value(raw: Any, value_parser: Mapping[str, Any] | None) -> Any:
    if value_parser is None:
        return raw
    return parse_content(raw, value_parser.get("name", "text"), value_parser.get("args", {}))


def _xml_inline(text: str, args: Mapping[str, Any]) -> dict[str, Any]:
    source = args.get("tag_pattern")
    if source is None:
        raise ValueError("xml-inline: content_args needs 'tag_pattern'")
    engine = _pattern_engine()
    value_parser = args.get("value_parser")
    merge = args.get("merge_duplicates", False)
    out: dict[str, Any] = {}
    lists: set[str] = set()
    for m in engine.finditer(source, text, flags=engine.DOTALL):
        groups = m.groupdict()
        key = groups.get("key")
        if key is None:
            raise ValueError(f"xml-inline: tag_pattern {source!r} needs a named group 'key'")
        value = _sub_value(groups.get("value", ""), value_parser)
        if merge and key in out:
            if key not in lists:
                out[key] = [out[key]]
                lists.add(key)
            out[key].append(value)
        else:
            out[key] = value
    return out


def _kv_lines(text: str, args: Mapping[str, Any]) -> dict[str, Any]:
    line_sep = args.get("line_sep", "\n")
    kv_sep = args.get("kv_sep", ":")
    value_parser = args.get("value_parser")
    out: dict[str, Any] = {}
    for raw in text.split(line_sep):
        line = _text(raw, args)
        if not line or kv_sep not in line:
            continue
        key, value = line.split(kv_sep, 1)
        out[_text(key, args)] = _sub_value(_text(value, args), value_parser)
    return out


class _CallList:
    """``[name(key=value, ...), ...]`` with Python/JSON literals, read strictly (one grammar)."""

    SPACE = re.compile(r"[ \t\n\r]*")
    NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[-.][A-Za-z0-9_]+)*")
    NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
    STRING = re.compile(r"""'((?:[^'\\\n\r]|\\.)*)'|"((?:[^"\\\n\r]|\\.)*)\"""", re.DOTALL)
    HEX4 = re.compile(r"u([0-9a-fA-F]{4})")
    LOW = re.compile(r"\\u([dD][c-fC-F][0-9a-fA-F]{2})")
    SURROGATE = re.compile(r"[\ud800-\udfff]")
    ESCAPES: Mapping[str, str] = MappingProxyType(
        {"\\": "\\", "'": "'", '"': '"', "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
    )
    WORDS: Mapping[str, Any] = MappingProxyType(
        {"True": True, "true": True, "False": False, "false": False, "None": None, "null": None}
    )
    MAX_INT = 2**53 - 1
    MAX_DEPTH = 100

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> ValueError:
        return ValueError(f"python-call-list: {what} at position {self.pos}; text: {self.text!r}")

    def peek(self, char: str) -> bool:
        m = self.SPACE.match(self.text, self.pos)
        assert m is not None
        self.pos = m.end()
        return self.text.startswith(char, self.pos)

    def take(self, char: str) -> None:
        if not self.peek(char):
            raise self.fail(f"expected {char!r}")
        self.pos += 1

    def seq(self, close: str, item: Callable[[], Any]) -> list[Any]:
        out: list[Any] = []
        if self.peek(close):
            self.pos += 1
            return out
        while True:
            out.append(item())
            if self.peek(close):
                self.pos += 1
                return out
            self.take(",")

    def unique(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise self.fail(f"repeated name {key!r}")
            out[key] = value
        return out

    def string(self) -> str:
        m = self.STRING.match(self.text, self.pos)
        if m is None:
            raise self.fail("invalid string")
        body = m.group(1) if m.group(1) is not None else m.group(2)
        if self.SURROGATE.search(body):
            raise self.fail("lone surrogate in the string starting")
        parts: list[str] = []
        i = 0
        while True:
            slash = body.find("\\", i)
            if slash < 0:
                break
            parts.append(body[i:slash])
            nxt = body[slash + 1]
            if nxt in self.ESCAPES:
                parts.append(self.ESCAPES[nxt])
                i = slash + 2
                continue
            hexm = self.HEX4.match(body, slash + 1)
            if hexm is None:
                raise self.fail(f"unsupported escape {body[slash : slash + 2]!r} in the string starting")
            code = int(hexm.group(1), 16)
            i = hexm.end()
            if 0xD800 <= code <= 0xDBFF:
                low = self.LOW.match(body, i)
                if low is not None:
                    code = 0x10000 + ((code - 0xD800) << 10) + (int(low.group(1), 16) - 0xDC00)
                    i = low.end()
            if 0xD800 <= code <= 0xDFFF:
                raise self.fail("lone surrogate escape in the string starting")
            parts.append(chr(code))
        parts.append(body[i:])
        self.pos = m.end()
        return "".join(parts)

    def value(self, depth: int) -> Any:
        if self.peek("'") or self.peek('"'):
            return self.string()
        if self.peek("[") or self.peek("{"):
            if depth >= self.MAX_DEPTH:
                raise self.fail(f"lists and dicts nested more than {self.MAX_DEPTH} levels deep")
            opener = self.text[self.pos]
            self.pos += 1
            if opener == "[":
                return self.seq("]", lambda: self.value(depth + 1))
            return self.unique(self.seq("}", lambda: self.pair(depth + 1)))
        m = self.NUMBER.match(self.text, self.pos)
        if m is not None:
            whole = m.group(1) is None and m.group(2) is None
            if whole and (len(m.group(0)) > 17 or abs(int(m.group(0))) > self.MAX_INT):
                raise self.fail("integer outside the range of -(2^53 - 1) to 2^53 - 1")
            if not whole and math.isinf(float(m.group(0))):
                raise self.fail("number too large")
            self.pos = m.end()
            return int(m.group(0)) if whole else float(m.group(0))
        m = self.NAME.match(self.text, self.pos)
        if m is not None and m.group(0) in self.WORDS:
            self.pos = m.end()
            return self.WORDS[m.group(0)]
        raise self.fail("expected a string, number, list, dict, True, False or None")

    def pair(self, depth: int) -> tuple[str, Any]:
        if not (self.peek("'") or self.peek('"')):
            raise self.fail("dict keys must be strings")
        key = self.string()
        self.take(":")
        return key, self.value(depth)

    def name(self, what: str) -> str:
        self.peek("")
        m = self.NAME.match(self.text, self.pos)
        if m is None:
            raise self.fail(f"expected {what}")
        self.pos = m.end()
        return m.group(0)

    def argument(self) -> tuple[str, Any]:
        key = self.name("a keyword argument (positional arguments and trailing commas are not supported)")
        if not self.peek("="):
            raise self.fail("expected '=' (positional arguments are not supported)")
        self.pos += 1
        return key, self.value(0)

    def call(self) -> dict[str, Any]:
        name = self.name("a function name")
        self.take("(")
        return {"name": name, "arguments": self.unique(self.seq(")", self.argument))}

    def parse(self) -> list[Any]:
        self.take("[")
        calls = self.seq("]", self.call)
        self.peek("")
        if self.pos != len(self.text):
            raise self.fail("unexpected content after the closing ']'")
        return calls


def _python_call_list(text: str, args: Mapping[str, Any]) -> list[Any]:
    return _CallList(text).parse()


CONTENT_PARSERS: Mapping[str, Callable[[str, Mapping[str, Any]], Any]] = {
    "text": _text,
    "int": _int,
    "float": _float,
    "bool": _bool,
    "json": _json,
    "xml-inline": _xml_inline,
    "kv-lines": _kv_lines,
    "python-call-list": _python_call_list,
}
"""The content parsers by name."""

STREAMABLE_PARSERS = frozenset({"text", "int", "float", "bool"})
"""Parsers whose value is the region's text itself (up to whitespace): its chunks can be shown as
they come; the others (``json``, ``xml-inline``, ``kv-lines``, ``python-call-list``) give a value
only when the region closes."""


def parse_content(text: str, parser: str, args: Mapping[str, Any]) -> Any:
    """Run the content parser ``parser`` with its ``args`` on ``text``."""
    return CONTENT_PARSERS[parser](text, args)


def check_content_args(parser: str, args: Any, where: str) -> None:
    """Load-time checks of a field's ``content_args`` (raises ValueError naming ``where``)."""
    if not isinstance(args, Mapping):
        raise ValueError(f"{where}: content_args must be an object, got {type(args).__name__}")
    if parser == "json":
        delims = args.get("string_delims", [])
        if not isinstance(delims, list) or not all(
            isinstance(d, list | tuple) and len(d) == 2 and all(isinstance(x, str) and x for x in d)
            for d in delims
        ):
            raise ValueError(f"{where}: json string_delims must be a list of [open, close] non-empty strings")
    if parser == "xml-inline":
        source = args.get("tag_pattern")
        if not isinstance(source, str):
            raise ValueError(f"{where}: xml-inline needs content_args.tag_pattern (a regular expression)")
        engine = _pattern_engine()
        try:
            compiled = engine.compile(source, engine.DOTALL)
        except engine.error as exc:
            raise ValueError(f"{where}: invalid tag_pattern {source!r}: {exc}") from None
        if "key" not in compiled.groupindex:
            raise ValueError(f"{where}: tag_pattern {source!r} needs a named group 'key'")
    if parser in ("kv-lines",):
        for key in ("line_sep", "kv_sep"):
            if key in args and (not isinstance(args[key], str) or not args[key]):
                raise ValueError(f"{where}: kv-lines {key} must be a non-empty string")
    sub = args.get("value_parser")
    if sub is not None:
        if not isinstance(sub, Mapping) or sub.get("name", "text") not in CONTENT_PARSERS:
            raise ValueError(
                f"{where}: value_parser must be {{'name': <parser>, 'args': {{...}}}} with a known parser "
                f"({', '.join(sorted(CONTENT_PARSERS))}), got {sub!r}"
            )
        check_content_args(sub.get("name", "text"), sub.get("args", {}), where + " value_parser")


# -- transforms -----------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{(\w+(?:\.\w+)*)\}")


def check_transform(transform: Any, where: str) -> None:
    """Reject strings that mix a ``{placeholder}`` with other text (no interpolation)."""
    if isinstance(transform, Mapping):
        for value in transform.values():
            check_transform(value, where)
    elif isinstance(transform, list):
        for value in transform:
            check_transform(value, where)
    elif (
        isinstance(transform, str)
        and _PLACEHOLDER.search(transform)
        and not _PLACEHOLDER.fullmatch(transform)
    ):
        raise ValueError(
            f"{where}: transform string {transform!r} mixes a {{placeholder}} with other text; "
            'use a whole-string placeholder such as "{content}" or plain text (no string interpolation)'
        )


def apply_transform(transform: Any, scope: Mapping[str, Any]) -> Any:
    """Fill a transform template: every whole-string ``{name}`` / ``{name.key.key}`` placeholder
    becomes that value of ``scope`` (dotted keys index into dicts); other values stay as they are.

    Raises KeyError for a name not in ``scope``, ValueError for a dotted key that is missing or
    indexes into a non-dict.
    """
    if isinstance(transform, Mapping):
        return {k: apply_transform(v, scope) for k, v in transform.items()}
    if isinstance(transform, list):
        return [apply_transform(v, scope) for v in transform]
    if not isinstance(transform, str):
        return transform
    m = _PLACEHOLDER.fullmatch(transform)
    if m is None:
        return transform
    path = m.group(1)
    root, *keys = path.split(".")
    if root not in scope:
        raise KeyError(
            f"transform placeholder {{{path}}}: {root!r} is not defined (defined: {sorted(scope)})"
        )
    value = scope[root]
    for key in keys:
        if not isinstance(value, dict):
            raise ValueError(
                f"transform placeholder {{{path}}} cannot index into {type(value).__name__} at {key!r}"
            )
        if key not in value:
            raise ValueError(
                f"transform placeholder {{{path}}} is missing key {key!r} (keys: {sorted(value)})"
            )
        value = value[key]
    return value


# -- tool-argument casts --------------------------------------------------------------------------


def schema_types(schema: Any) -> tuple[str, ...]:
    """The JSON types a parameter schema allows, in order (``type``, its list, ``anyOf``/``oneOf``
    choices, ``"null"`` for ``nullable``); ``()`` when it says none."""
    if not isinstance(schema, Mapping):
        return ()
    declared = schema.get("type")
    found: list[str] = []
    if isinstance(declared, str):
        found.append(declared)
    elif isinstance(declared, list):
        found += [t for t in declared if isinstance(t, str)]
    for union in ("anyOf", "oneOf"):
        for choice in schema.get(union) or []:
            found += schema_types(choice)
    if schema.get("nullable") and "null" not in found:
        found.append("null")
    return tuple(found)


def _cast(raw: str, kind: str) -> tuple[bool, Any]:
    """``(True, value)`` when ``raw`` reads as JSON type ``kind``, else ``(False, None)``."""
    if kind == "integer":
        try:
            return True, int(raw)
        except ValueError:
            number = float(raw)  # "3.0" is an integer too
            return (True, int(number)) if number.is_integer() else (False, None)
    if kind == "number":
        number = float(raw)
        if math.isnan(number) or math.isinf(number):
            return False, None
        return True, (int(number) if number.is_integer() and "." not in raw else number)
    if kind == "boolean":
        word = raw.strip().lower()
        return (True, word in ("true", "1")) if word in ("true", "1", "false", "0") else (False, None)
    if kind == "null":
        return (True, None) if raw.strip() in ("null", "None") else (False, None)
    if kind in ("object", "array"):
        decoded = loads_bounded(raw)
        return (True, decoded) if isinstance(decoded, dict if kind == "object" else list) else (False, None)
    return False, None  # "string" and unknown types keep the text


def coerce_argument(raw: str, kinds: Iterable[str]) -> Any:
    """``raw`` cast to the first of ``kinds`` (JSON schema types) it reads as, else ``raw``."""
    for kind in kinds:
        try:
            ok, value = _cast(raw, kind)
        except ValueError:
            continue
        if ok:
            return value
    return raw


_PY_TYPES: Mapping[Any, str] = {
    int: "integer",
    float: "number",
    bool: "boolean",
    str: "string",
    list: "array",
    tuple: "array",
    dict: "object",
    type(None): "null",
}


def _hint_schema(hint: Any) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        parts = [_hint_schema(a) for a in typing.get_args(hint) if a is not type(None)]
        nullable = type(None) in typing.get_args(hint)
        out: dict[str, Any] = parts[0] if len(parts) == 1 else {"anyOf": parts}
        if nullable:
            out = {**out, "nullable": True}
        return out
    kind = _PY_TYPES.get(origin if origin is not None else hint)
    return {"type": kind} if kind is not None else {}


def _function_properties(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        hints = typing.get_type_hints(fn)
    except (NameError, TypeError):
        hints = {}
    props: dict[str, Any] = {}
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        props[name] = _hint_schema(hints.get(name, Any))
    return props


class ToolSchemas:
    """Tool parameter schemas by tool name, to cast tool-call arguments that stayed strings.

    ``tools`` is what a chat template takes: ``{"type": "function", "function": {"name": ...,
    "parameters": {"type": "object", "properties": {...}}}}`` (or the inner function object), or a
    Python function (its parameters' type hints give the schema).
    """

    def __init__(self, tools: Iterable[Any] | None) -> None:
        self.params: dict[str, Mapping[str, Any]] = {}
        for tool in tools or ():
            if inspect.isfunction(tool) or inspect.ismethod(tool):
                self.params[tool.__name__] = _function_properties(tool)
                continue
            fn = tool.get("function", tool) if isinstance(tool, Mapping) else None
            if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
                parameters = fn.get("parameters")
                props = parameters.get("properties") if isinstance(parameters, Mapping) else None
                self.params[fn["name"]] = props if isinstance(props, Mapping) else {}

    def __bool__(self) -> bool:
        return bool(self.params)

    def coerce(self, value: Any) -> Any:
        """Cast the string arguments of a tool call (or of each call in a list) in place, by the
        named tool's schema; values that are not tool calls are returned as they are."""
        if isinstance(value, list):
            return [self.coerce(item) for item in value]
        fn = value.get("function") if isinstance(value, dict) else None
        if not isinstance(fn, dict):
            return value
        name, arguments = fn.get("name"), fn.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return value
        props = self.params.get(name)
        if not props:
            return value
        for key, argument in arguments.items():
            kinds = schema_types(props[key]) if key in props else ()
            if not kinds:
                continue
            if isinstance(argument, str):
                arguments[key] = coerce_argument(argument, kinds)
            elif isinstance(argument, list) and "array" not in kinds:  # repeated keys, merged
                arguments[key] = [coerce_argument(a, kinds) if isinstance(a, str) else a for a in argument]
        return value
