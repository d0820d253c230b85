"""A :class:`RouteSpec` compiled once: :class:`CompiledRoute`, the delimiters each state of a
:class:`~._router.Router` watches (outside regions, inside each, the start gate), on the stop
engines."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from ..text import (
    RegexRule,
    RegexStop,
    RegexStopRules,
    stop_rules_any,
)
from ..text._rules import StopRules
from ._spec import Delimiter, RouteSpec, SpecialToken

__all__ = ["CompiledRoute"]

_Kind = Literal["open", "default_close", "close", "stray"]
_GATE = -2  # the key of the start gate's state


@dataclass(frozen=True)
class _Rule:
    kind: _Kind
    region: int  # index into spec.regions; -1 for the default channel
    delimiter: Delimiter


class _State:
    """The delimiters watched in one state (outside regions, or inside region ``i``)."""

    __slots__ = ("by_id", "by_text", "rules")

    def __init__(self, rules: list[_Rule], aligned: bool, owner: str) -> None:
        by_text: dict[str | RegexRule, _Rule] = {}
        self.by_id: dict[int, _Rule] = {}
        for rule in rules:
            d = rule.delimiter
            if isinstance(d, SpecialToken):
                if aligned:
                    self.by_id.setdefault(d.id, rule)
                    continue
                if not d.text:
                    continue  # an unnamed special token cannot be seen in plain text
                by_text.setdefault(d.text, rule)
            else:
                by_text.setdefault(d, rule)
        self.by_text = by_text
        self.rules: StopRules | RegexStopRules | None = (
            stop_rules_any(list(by_text), owner=owner, what="delimiter") if by_text else None
        )

    def lookup(self, stop: str | RegexStop) -> _Rule:
        if isinstance(stop, str):
            return self.by_text[stop]
        for key, rule in self.by_text.items():
            if isinstance(key, RegexRule) and key.source == stop.rule:
                return rule
        raise LookupError(stop)  # pragma: no cover - the engines only report our rules


class CompiledRoute:
    """A :class:`RouteSpec` compiled once (for text and for aligned input); share it."""

    def __init__(self, spec: RouteSpec, *, owner: str = "route") -> None:
        if not isinstance(spec, RouteSpec):
            raise TypeError(f"{owner}: spec must be a RouteSpec, got {type(spec).__name__}")
        self.spec = spec
        self.owner = owner
        self._states: dict[tuple[bool, int], _State] = {}
        for aligned in (False, True):
            self._states[(aligned, -1)] = _State(self._outside_rules(), aligned, owner)
            for i, region in enumerate(spec.regions):
                rules = [_Rule("close", i, d) for d in region.close]
                self._states[(aligned, i)] = _State(rules, aligned, owner)
        self.initial = -1
        """The index of the region open at the start (``spec.initial``), or -1."""
        if spec.initial is not None:
            self.initial = next(i for i, r in enumerate(spec.regions) if r.channel == spec.initial)
            gate = [r for r in self._outside_rules() if r.kind == "default_close" or r.kind == "open"]
            gate = [r for r in gate if r.region != self.initial]
            for aligned in (False, True):
                self._states[(aligned, _GATE)] = _State(gate, aligned, owner)

    def _outside_rules(self) -> list[_Rule]:
        spec = self.spec
        rules = [_Rule("open", i, d) for i, r in enumerate(spec.regions) for d in r.open]
        rules += [_Rule("default_close", -1, d) for d in spec.default_close]
        rules += [_Rule("stray", i, d) for i, r in enumerate(spec.regions) for d in r.close]
        return rules

    def state(self, aligned: bool, region: int) -> _State:
        return self._states[(aligned, region)]


def _captures(delimiter: Delimiter, text: str) -> MappingProxyType[str, str]:
    if isinstance(delimiter, RegexRule) and delimiter.pattern.groupindex:
        m = delimiter.pattern.fullmatch(text)
        if m is not None:
            return MappingProxyType({k: v for k, v in m.groupdict().items() if v is not None})
    return MappingProxyType({})
