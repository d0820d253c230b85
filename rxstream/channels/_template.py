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
import json
import os
from collections.abc import Mapping
from copy import deepcopy
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ._content import CONTENT_PARSERS, check_content_args, check_transform
from ._router import CompiledRoute
from ._spec import ChannelKind, Delimiter, Region, RouteSpec, guess_kind
from ._template_delims import delimiters, fail, literals, pattern, regex_engine

__all__ = ["TEMPLATE_MAX_HOLD", "FieldRule", "ResponseTemplate", "load_response_template"]

TEMPLATE_MAX_HOLD = 4096
"""The ``max_hold`` of a template's unbounded patterns (``[^<]*``, ``.*?``): their longest match."""

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


def _flag(field: Mapping[str, Any], key: str, default: bool, where: str) -> bool:
    value = field.get(key, default)
    if not isinstance(value, bool):
        raise fail(where, f"{key} must be a bool, got {type(value).__name__}")
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
    source, defaults, raw_fields = _top_level(_read(template))
    fields: dict[str, FieldRule] = {}
    regions: dict[str, Region] = {}
    initial: list[str] = []
    implicit: list[str] = []
    default_close: tuple[Delimiter, ...] = ()
    for name, field in raw_fields.items():
        fields[name], opens, closes, at_start = _field_rule(name, field, max_hold)
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

    literal_anchors, anchor = _start_anchor(source)

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


def _top_level(source: dict[str, Any]) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    """Step 1: the template's top-level keys checked; ``(source, defaults, fields)``."""
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
    return source, defaults, raw_fields


def _field_rule(
    name: Any, field: Any, max_hold: int
) -> tuple[FieldRule, tuple[Delimiter, ...] | None, tuple[Delimiter, ...] | None, bool]:
    """Step 2, one field: its rule, its opening delimiters (None: the field takes the text outside
    every region), its closing ones, and whether it is open at the start."""
    where = f"field {name!r}"
    if not isinstance(name, str) or not name:
        raise ValueError(f"response_template: a field name must be a non-empty string, got {name!r}")
    if not isinstance(field, dict):
        raise fail(where, "must be an object")
    unknown = set(field) - _FIELD_KEYS
    if unknown:
        raise fail(where, f"unknown keys {sorted(unknown)}")
    content = field.get("content", "text")
    if content not in CONTENT_PARSERS:
        raise fail(where, f"unknown content parser {content!r} (known: {', '.join(sorted(CONTENT_PARSERS))})")
    args = field.get("content_args", {})
    check_content_args(content, args, where)
    opens, at_start, open_groups = delimiters(field, where, "open", "open_pattern", max_hold, True)
    closes, _, close_groups = delimiters(field, where, "close", "close_pattern", max_hold, False)
    repeats = _flag(field, "repeats", False, where)
    join = field.get("join")
    if join is not None and not isinstance(join, str):
        raise fail(where, f"'join' must be a string, got {type(join).__name__}")
    if join is not None and not repeats:
        raise fail(where, "'join' requires 'repeats': true")
    transform = field.get("transform")
    transform_each = _flag(field, "transform_each", False, where)
    if transform_each and transform is None:
        raise fail(where, "transform_each is set but no transform was provided")
    if transform is not None:
        check_transform(transform, f"response_template: {where}")
    elif open_groups | close_groups:
        raise fail(
            where,
            f"open_pattern/close_pattern declares named group(s) {sorted(open_groups | close_groups)}, "
            "but the field has no 'transform' (named groups reach the message only through one)",
        )
    rule = FieldRule(
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
    return rule, opens, closes, at_start


def _start_anchor(source: Mapping[str, Any]) -> tuple[tuple[str, ...], Any]:
    """Step 3: the literal start anchors (none for a pattern) and the compiled anchor."""
    if "start_anchor" in source and "start_anchor_pattern" in source:
        raise ValueError("response_template: cannot specify both 'start_anchor' and 'start_anchor_pattern'")
    engine = regex_engine()
    literal_anchors: tuple[str, ...] = ()
    if "start_anchor" in source:
        literal_anchors = tuple(literals(source["start_anchor"], "start_anchor", "start_anchor"))
        ordered = sorted(literal_anchors, key=len, reverse=True)
        anchor = engine.compile("|".join(engine.escape(a) for a in ordered), engine.DOTALL)
    elif "start_anchor_pattern" in source:
        anchor = pattern(source["start_anchor_pattern"], "start_anchor_pattern", "start_anchor_pattern")
    else:
        raise ValueError("response_template: it must define 'start_anchor' or 'start_anchor_pattern'")
    return literal_anchors, anchor


def _unused(name: str, taken: Mapping[str, Any]) -> str:
    while name in taken:
        name += "_"
    return name
