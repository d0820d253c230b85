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
import json
import math
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from ._argument_casts import ToolSchemas, coerce_argument, schema_types
from ._content_transform import apply_transform, check_transform
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
