"""Load a transformers ``response_template`` unchanged: a :class:`RouteSpec` plus per-field rules.

A ``response_template`` (``tokenizer.response_template`` in transformers, the declarative format
of ``transformers.utils.chat_parsing``) names the fields of an assistant message (``thinking``,
``content``, ``tool_calls``, ...), each with the delimiters of its region and how its text becomes
a value. :func:`load_response_template` reads one as it is published and gives a
:class:`ResponseTemplate`:

- ``spec``: a :class:`RouteSpec` for :class:`~rxstream.channels.Router` -- one region per field
  that has ``open``/``open_pattern``, named after the field (regions in the order of their names,
  which is how transformers breaks a tie between two opening delimiters); the field without an
  opening delimiter (at most one) is the default channel, its ``close``/``close_pattern`` the
  default channel's ``default_close``; without such a field the default channel is
  ``"unrouted"`` (kind ``"other"``: transformers drops that text). Kinds are guessed from the
  field names (:func:`~rxstream.channels.guess_kind`).
- ``fields``: per field, the content parser and its arguments, ``repeats``, ``join``,
  ``optional``, ``transform``, ``transform_each`` (:class:`FieldRule`), which
  :class:`~rxstream.channels.MessageBuilder` applies when a region closes.

Delimiters: a literal or a list of literals stays literal; a pattern (transformers compiles it
with ``regex`` and DOTALL) becomes an ``rx(...)`` rule with the same flags, ``shortest=True``
when it has a lazy quantifier (so ``.*?<\\|message\\|>`` ends at the first ``<|message|>``, as
with ``regex``), otherwise leftmost-longest; ``max_hold`` is the pattern's longest match when
it is bounded, else ``max_hold`` of the loader (4096). Empty matches:

- an opening pattern whose first alternative is ``^`` or ``\\A`` (``(?:^|<think>\\s*)``) makes
  its region the one open at the start (:attr:`RouteSpec.initial`); its other alternatives are
  matched as usual;
- a closing pattern that matches the empty string only at the end (``\\Z``,
  ``(?:</x>|\\Z)``) closes at the end of the stream, which every region does anyway;
- any other empty match, and the constructs the streaming engine cannot run exactly
  (look-arounds, back-references, ``$`` without MULTILINE, ...; SEMANTICS §7), raise
  ``ValueError`` naming the field and the construct.

Where the regular-expression engines differ: at one position ``regex`` takes the first
alternative that matches, the streaming engine the longest (or with a lazy quantifier the
shortest); the published templates' patterns give the same matches either way.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re
from collections.abc import Mapping
from copy import deepcopy
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..text import RegexRule, rx
from ..text._regex import empty_matches
from ._content import CONTENT_PARSERS, check_content_args, check_transform
from ._router import CompiledRoute
from ._spec import ChannelKind, Delimiter, Region, RouteSpec, guess_kind

__all__ = ["TEMPLATE_MAX_HOLD", "FieldRule", "ResponseTemplate", "load_response_template"]

TEMPLATE_MAX_HOLD = 4096
"""The ``max_hold`` of a template's unbounded patterns (``[^<]*``, ``.*?``): their longest match."""

_parser: Any = importlib.import_module("re._parser")

_TOP_KEYS = frozenset({"version", "defaults", "fields", "start_anchor", "start_anchor_pattern"})
_FIELD_KEYS = frozenset(
    {
        "open",
        "open_pattern",
        "close",
        "close_pattern",
        "content",
        "content_args",
        "repeats",
        "join",
        "optional",
        "transform",
        "transform_each",
    }
)


@dataclass(frozen=True)
class FieldRule:
    """How one field's region text becomes the field's value.

    Attributes:
        name: the field (the key in the message, and the region's channel).
        content: the content parser (``text``, ``int``, ``float``, ``bool``, ``json``,
            ``xml-inline``, ``kv-lines``, ``python-call-list``).
        content_args: its arguments.
        repeats: every region of the field adds a value to a list (else the last one wins).
        join: with ``repeats``: the string values are joined with it instead.
        optional: False: a message without the field is an error.
        transform: a template filled from the parsed content (``{content}``) and the named
            groups of the delimiters, or None.
        transform_each: the parsed content is a list and the transform applies to each element.
        implicit: the field has no opening delimiter (the default channel).
    """

    name: str
    content: str = "text"
    content_args: Mapping[str, Any] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    repeats: bool = False
    join: str | None = None
    optional: bool = True
    transform: Any = None
    transform_each: bool = False
    implicit: bool = False


class ResponseTemplate:
    """A loaded ``response_template`` (see the module docstring); build with :func:`load_response_template`.

    Attributes:
        spec: the :class:`RouteSpec`.
        fields: the :class:`FieldRule` of each field, in the template's order.
        defaults: the message's default keys (``{"role": "assistant"}``).
        implicit: the field without an opening delimiter, or None.
        source: the template as given (a dict).
    """

    def __init__(
        self,
        spec: RouteSpec,
        fields: Mapping[str, FieldRule],
        defaults: Mapping[str, Any],
        implicit: str | None,
        anchor: Any,
        source: Mapping[str, Any],
    ) -> None:
        self.spec = spec
        self.fields = MappingProxyType(dict(fields))
        self.defaults = MappingProxyType(dict(defaults))
        self.implicit = implicit
        self.source = source
        self._anchor = anchor
        self._compiled: CompiledRoute | None = None

    @property
    def compiled(self) -> CompiledRoute:
        """The spec compiled for :class:`~rxstream.channels.Router` (once, then shared)."""
        if self._compiled is None:
            self._compiled = CompiledRoute(self.spec, owner="response_template")
        return self._compiled

    def prompt_tail(self, prompt: str) -> str:
        """The part of ``prompt`` after the last start anchor (all of it when none is found):
        the beginning of the assistant's message that the chat template wrote."""
        last = None
        for m in self._anchor.finditer(prompt):
            last = m.end()
        return prompt if last is None else prompt[last:]

    def __repr__(self) -> str:
        return f"ResponseTemplate(fields={list(self.fields)!r}, default={self.spec.default!r})"


def _fail(where: str, message: str) -> ValueError:
    return ValueError(f"response_template: {where}: {message}")


def _read(template: Any) -> dict[str, Any]:
    if isinstance(template, os.PathLike) or (
        isinstance(template, str) and not template.lstrip().startswith("{")
    ):
        try:
            template = Path(template).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"response_template: cannot read {str(template)!r}: {exc}") from None
    if isinstance(template, str):
        try:
            template = json.loads(template)
        except json.JSONDecodeError as exc:
            raise ValueError(f"response_template: not JSON: {exc}") from None
    if not isinstance(template, dict):
        raise ValueError(f"response_template must be a dict, got {type(template).__name__}")
    found: dict[str, Any] = template
    if "fields" not in found and isinstance(found.get("response_template"), dict):
        found = found["response_template"]  # a tokenizer_config.json
    return found


def _literals(value: Any, where: str, key: str) -> list[str]:
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, list):
        if not value:
            raise _fail(where, f"{key!r} list must contain at least one literal")
        if not all(isinstance(s, str) for s in value):
            raise _fail(where, f"{key!r} list must contain only strings")
        items = list(dict.fromkeys(value))
    else:
        raise _fail(where, f"{key!r} must be a string or a list of strings, got {type(value).__name__}")
    if any(not s for s in items):
        raise _fail(where, f"{key!r} literals cannot be empty strings")
    return items


def _engine() -> Any:
    try:
        return importlib.import_module("regex")
    except ImportError:  # pragma: no cover - regex comes with the test and bench extras
        return re


def _compile(source: Any, where: str, key: str) -> Any:
    if not isinstance(source, str):
        raise _fail(where, f"{key!r} must be a string (a regular expression), got {type(source).__name__}")
    engine = _engine()
    try:
        return engine.compile(source, engine.DOTALL)
    except engine.error as exc:
        raise _fail(where, f"invalid {key} {source!r}: {exc}") from None


def _walk(items: Any) -> Any:
    """Every (op, av) in a parse tree, depth first."""
    for op, av in items:
        yield str(op), av
        name = str(op)
        if name == "SUBPATTERN":
            yield from _walk(av[3])
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            yield from _walk(av[2])
        elif name == "BRANCH":
            for sub in av[1]:
                yield from _walk(sub)
        elif name in ("ASSERT", "ASSERT_NOT", "ATOMIC_GROUP"):
            yield from _walk(av[1] if name != "ATOMIC_GROUP" else av)


def _tree(compiled: Any) -> Any:
    return _parser.parse(compiled.pattern, int(compiled.flags) & ~0x2100)  # no regex VERSION0/1 bits


def _starts_open(tree: Any) -> bool:
    """Whether the pattern's first alternative is only ``^`` / ``\\A`` (its empty match at the
    start is what a backtracking engine takes first there)."""
    items = list(tree)
    while len(items) == 1 and str(items[0][0]) == "SUBPATTERN":
        items = list(items[0][1][3])
    if len(items) != 1 or str(items[0][0]) != "BRANCH":
        return False
    first = list(items[0][1][1][0])
    starts = ("AT_BEGINNING", "AT_BEGINNING_STRING")
    return bool(first) and all(str(op) == "AT" and str(av) in starts for op, av in first)


def _pattern_rule(
    compiled: Any, where: str, key: str, max_hold: int, *, opening: bool
) -> tuple[RegexRule | None, bool]:
    """The rx rule of a pattern delimiter, and whether its empty match opens the region at the start.

    None (only for a close): the pattern matches nothing but the empty string at the end.
    """
    try:
        empty = empty_matches(compiled)
    except ValueError as exc:
        raise _fail(where, f"{key} {compiled.pattern!r} cannot be streamed exactly: {exc}") from None
    tree = _tree(compiled)
    lazy = any(op == "MIN_REPEAT" for op, _ in _walk(tree))
    width = tree.getwidth()[1]
    hold = width if 0 < width <= max_hold else max_hold
    rule: RegexRule | None = None
    try:
        rule = rx(compiled, max_hold=hold, shortest=lazy, allow_empty=bool(empty))
    except ValueError as exc:
        if not (empty and all(end for _, end in empty) and not opening):
            raise _fail(where, f"{key} {compiled.pattern!r}: {exc}") from None
        # \Z: nothing but the end of the stream, where every region closes anyway
    if empty and opening and (not all(start for start, _ in empty) or not _starts_open(tree)):
        raise _fail(
            where,
            f"{key} {compiled.pattern!r} can match the empty string; only a first alternative "
            "'^' or '\\A' (the region is open at the start, as in (?:^|<think>)) is supported",
        )
    if empty and not opening and not all(end for _, end in empty):
        raise _fail(
            where,
            f"{key} {compiled.pattern!r} can match the empty string before the end of the text "
            "(it would close the region at once)",
        )
    return rule, bool(empty) and opening


def _delims(
    field: Mapping[str, Any], where: str, literal_key: str, pattern_key: str, max_hold: int, opening: bool
) -> tuple[tuple[Delimiter, ...] | None, bool, frozenset[str]]:
    """(delimiters or None when the field has neither key, opens at the start, group names)."""
    if literal_key in field and pattern_key in field:
        raise _fail(where, f"cannot specify both {literal_key!r} and {pattern_key!r}")
    if literal_key in field:
        return tuple(_literals(field[literal_key], where, literal_key)), False, frozenset()
    if pattern_key in field:
        compiled = _compile(field[pattern_key], where, pattern_key)
        rule, at_start = _pattern_rule(compiled, where, pattern_key, max_hold, opening=opening)
        return ((rule,) if rule is not None else ()), at_start, frozenset(compiled.groupindex)
    return None, False, frozenset()


def _flag(field: Mapping[str, Any], key: str, default: bool, where: str) -> bool:
    value = field.get(key, default)
    if not isinstance(value, bool):
        raise _fail(where, f"{key} must be a bool, got {type(value).__name__}")
    return value


def load_response_template(template: Any, *, max_hold: int = TEMPLATE_MAX_HOLD) -> ResponseTemplate:
    """Load a transformers ``response_template`` (a dict, its JSON text, or a path to a JSON file;
    a ``tokenizer_config.json`` holding one under ``"response_template"`` works too).

    Raises ValueError (one line, naming the field) for what transformers rejects -- an
    unsupported ``version``, unknown keys, a missing start anchor, two fields without an opening
    delimiter, an unknown content parser, ``join`` without ``repeats``, named groups without a
    ``transform``, a ``transform`` string mixing a placeholder with text, ... -- and for patterns
    the streaming engine cannot run exactly (see the module docstring).
    """
    if isinstance(template, ResponseTemplate):
        return template
    if isinstance(max_hold, bool) or not isinstance(max_hold, int) or max_hold < 1:
        raise ValueError(f"response_template: max_hold must be a positive int, got {max_hold!r}")
    source = _read(template)
    version = source.get("version", 1)
    if version != 1:
        raise ValueError(f"response_template: unsupported version {version!r} (only version 1)")
    unknown = set(source) - _TOP_KEYS
    if unknown:
        raise ValueError(f"response_template: unknown keys {sorted(unknown)}")
    defaults = source.get("defaults", {})
    if not isinstance(defaults, dict):
        raise ValueError("response_template: defaults must be an object")
    raw_fields = source.get("fields", {})
    if not isinstance(raw_fields, dict) or not raw_fields:
        raise ValueError("response_template: fields must be a non-empty object")

    fields: dict[str, FieldRule] = {}
    regions: dict[str, Region] = {}
    initial: list[str] = []
    implicit: list[str] = []
    default_close: tuple[Delimiter, ...] = ()
    for name, field in raw_fields.items():
        where = f"field {name!r}"
        if not isinstance(name, str) or not name:
            raise ValueError(f"response_template: a field name must be a non-empty string, got {name!r}")
        if not isinstance(field, dict):
            raise _fail(where, "must be an object")
        unknown = set(field) - _FIELD_KEYS
        if unknown:
            raise _fail(where, f"unknown keys {sorted(unknown)}")
        content = field.get("content", "text")
        if content not in CONTENT_PARSERS:
            raise _fail(
                where, f"unknown content parser {content!r} (known: {', '.join(sorted(CONTENT_PARSERS))})"
            )
        args = field.get("content_args", {})
        check_content_args(content, args, where)
        opens, at_start, open_groups = _delims(field, where, "open", "open_pattern", max_hold, True)
        closes, _, close_groups = _delims(field, where, "close", "close_pattern", max_hold, False)
        repeats = _flag(field, "repeats", False, where)
        join = field.get("join")
        if join is not None and not isinstance(join, str):
            raise _fail(where, f"'join' must be a string, got {type(join).__name__}")
        if join is not None and not repeats:
            raise _fail(where, "'join' requires 'repeats': true")
        transform = field.get("transform")
        transform_each = _flag(field, "transform_each", False, where)
        if transform_each and transform is None:
            raise _fail(where, "transform_each is set but no transform was provided")
        if transform is not None:
            check_transform(transform, f"response_template: {where}")
        elif open_groups | close_groups:
            raise _fail(
                where,
                f"open_pattern/close_pattern declares named group(s) {sorted(open_groups | close_groups)}, "
                "but the field has no 'transform' (named groups reach the message only through one)",
            )
        fields[name] = FieldRule(
            name,
            content,
            MappingProxyType(deepcopy(args)),
            repeats,
            join,
            _flag(field, "optional", True, where),
            deepcopy(transform),
            transform_each,
            opens is None,
        )
        if opens is None:
            implicit.append(name)
            default_close = closes or ()
        else:
            regions[name] = Region(name, opens, closes or ())
            if at_start:
                initial.append(name)
    if len(implicit) > 1:
        raise ValueError(
            "response_template: at most one field may omit 'open'/'open_pattern' (it takes the text "
            f"outside every region); found {', '.join(implicit)}"
        )

    if "start_anchor" in source and "start_anchor_pattern" in source:
        raise ValueError("response_template: cannot specify both 'start_anchor' and 'start_anchor_pattern'")
    engine = _engine()
    literal_anchors: tuple[str, ...] = ()
    if "start_anchor" in source:
        literal_anchors = tuple(_literals(source["start_anchor"], "start_anchor", "start_anchor"))
        ordered = sorted(literal_anchors, key=len, reverse=True)
        anchor = engine.compile("|".join(engine.escape(a) for a in ordered), engine.DOTALL)
    elif "start_anchor_pattern" in source:
        anchor = _compile(source["start_anchor_pattern"], "start_anchor_pattern", "start_anchor_pattern")
    else:
        raise ValueError("response_template: it must define 'start_anchor' or 'start_anchor_pattern'")

    default = implicit[0] if implicit else _unused("unrouted", raw_fields)
    kinds: dict[str, ChannelKind] = {n: guess_kind(n) for n in raw_fields}
    if not implicit:
        kinds[default] = "other"
    spec = RouteSpec(
        tuple(regions[n] for n in sorted(regions)),  # transformers breaks ties by field name
        default,
        default_close,
        literal_anchors,
        MappingProxyType(kinds),
        None,
        "response_template",
        initial=min(initial) if initial else None,
    )
    return ResponseTemplate(
        spec, fields, deepcopy(defaults), implicit[0] if implicit else None, anchor, source
    )


def _unused(name: str, taken: Mapping[str, Any]) -> str:
    while name in taken:
        name += "_"
    return name
