"""The ``redact`` operator: hide e-mail addresses, card numbers, keys, ... as they stream (SEMANTICS §7)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from reactivex import Observable, abc

from rxstream._finish import FinishCallback
from rxstream.text import RegexReplacer, RegexReplaceRules, replace_rules_any, rx

from ._replace import ReplaceSink
from ._sink import OperatorSink, operator
from ._types import TextT

__all__ = ["PRESETS", "luhn_ok", "redact"]

_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"

PRESETS: dict[str, tuple[str, str]] = {
    "email": (r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}", "EMAIL"),
    "card": (r"\b[0-9](?:[ -]?[0-9]){12,18}\b", "CARD"),
    "api_key": (
        r"\b(?:sk-(?:proj-)?[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{36,}|(?:AKIA|ASIA)[0-9A-Z]{16}"
        r"|xox[bap]-[A-Za-z0-9-]{10,})",
        "API_KEY",
    ),
    "ipv4": (rf"\b{_OCTET}(?:\.{_OCTET}){{3}}\b", "IPV4"),
    "phone": (r"(?:\+[0-9]{1,3}[ .-]?)?(?:\([0-9]{3}\)|\b[0-9]{3})[ .-]?[0-9]{3}[ .-]?[0-9]{4}\b", "PHONE"),
}
"""Preset name -> (pattern, label). The default replacement is ``"[LABEL]"`` (``"[LABEL_{n}]"`` keyed)."""


def luhn_ok(number: str) -> bool:
    """Whether the digits of ``number`` (spaces and dashes ignored) pass the Luhn check."""
    digits = [int(c) for c in number if c.isdigit()]
    if len(digits) < 2:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def redact(
    presets: Iterable[str] = ("email", "card", "api_key", "ipv4", "phone"),
    *,
    custom: Mapping[Any, str] | Iterable[tuple[Any, str]] = (),
    replacements: Mapping[str, str] | None = None,
    keyed: bool = False,
    max_hold: int = 256,
    on_finish: FinishCallback | None = None,
) -> Callable[[Observable[TextT]], Observable[TextT]]:
    r"""Replace sensitive values in a stream of text, holding only what could still be one.

    Runs ``replace`` with regular-expression rules (leftmost-longest over all of them; SEMANTICS
    §7): a value is held while it could still grow, and goes out replaced the moment it is
    decided; text that cannot be (part of) a value goes out at once.

    Args:
        presets: names from :data:`PRESETS`: ``"email"``, ``"card"`` (13 to 19 digits, spaces or
            dashes between; a number that fails the Luhn check is left as it is), ``"api_key"``
            (``sk-...``, ``ghp_...`` and the other GitHub token prefixes, ``AKIA...``/``ASIA...``,
            ``xoxb-``/``xoxa-``/``xoxp-``), ``"ipv4"``, ``"phone"`` (North-American shape,
            optional ``+country``).
        custom: more rules, ``{pattern: replacement}`` (a pattern is a literal ``str`` or a
            regular expression: :func:`rxstream.rx`, ``re.Pattern``); they come before the
            presets (a tie in length goes to them).
        replacements: a replacement per preset name, instead of ``"[LABEL]"``.
        keyed: the default replacements become ``"[LABEL_{n}]"``. In any replacement, ``{n}``
            numbers the distinct values of that rule from 1 within one subscription: the same
            value gets the same number.
        max_hold: the longest value of a preset, in characters (the most text held for it).
        on_finish: as for :func:`replace`.

    Raises:
        ValueError: an unknown preset, or a bad custom rule. TypeError: a rule of another type.

    Marble diagram (keyed: the second mention of the same address gets the same key)::

        source:   -a-b-c-|      a="mail bob@ex", b="ample.com, ", c="or bob@example.com!"
        operator: redact(["email"], keyed=True)
        result:   -a-b-c-|      a="mail ", b="[EMAIL_1], ", c="or [EMAIL_1]!"
    """
    names = [presets] if isinstance(presets, str) else list(presets)
    unknown = [n for n in names if n not in PRESETS]
    if unknown:
        raise ValueError(f"redact: unknown preset(s) {unknown!r}; known: {sorted(PRESETS)}")
    reps = dict(replacements or {})
    bad = [n for n in reps if n not in names]
    if bad:
        raise ValueError(f"redact: replacements for preset(s) not used: {bad!r}")
    custom_items = list(custom.items()) if isinstance(custom, Mapping) else list(custom)
    specs: list[tuple[Any, str, bool]] = []  # (rule, replacement, luhn)
    for item in custom_items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise TypeError(f"redact: each custom rule must be a (pattern, replacement) pair, got {item!r}")
        pattern, rep = item
        if not isinstance(rep, str):
            raise TypeError(f"redact: replacement for {pattern!r} must be a str, got {type(rep).__name__}")
        specs.append((pattern, rep, False))
    for name in dict.fromkeys(names):
        source, label = PRESETS[name]
        default = f"[{label}_{{n}}]" if keyed else f"[{label}]"
        rep = reps.get(name, default)
        if not isinstance(rep, str):
            raise TypeError(f"redact: replacement for {name!r} must be a str, got {type(rep).__name__}")
        specs.append((rx(source, max_hold=max_hold), rep, name == "card"))
    if not specs:
        raise ValueError("redact: no rules (give presets or custom rules)")
    firsts: dict[Any, tuple[Any, str, bool]] = {}
    for spec in specs:
        firsts.setdefault(spec[0], spec)  # a rule given twice keeps its first replacement
    specs = list(firsts.values())
    # compiled once; the replacement functions are built per subscription (their keys)
    compiled = replace_rules_any([(rule, _placeholder) for rule, _, _ in specs], owner="redact")
    assert isinstance(compiled, RegexReplaceRules)
    regex_rules = compiled

    def make_sink(observer: abc.ObserverBase[TextT]) -> OperatorSink[TextT, TextT]:
        return ReplaceSink("redact", observer, _replacer(regex_rules, specs), on_finish)

    return operator("redact", make_sink)


def _placeholder(match: Any) -> str:  # pragma: no cover - replaced per subscription
    raise AssertionError("redact: placeholder replacement")


def _replacer(compiled: RegexReplaceRules, specs: list[tuple[Any, str, bool]]) -> RegexReplacer:
    return RegexReplacer(compiled, replacements=[_one(rep, luhn) for _, rep, luhn in specs])


class _One:
    """One rule's replacement for one subscription: the same value gets the same number (its
    numbers are the subscription's state, so a checkpoint keeps them)."""

    __slots__ = ("keyed", "keys", "luhn", "rep")

    def __init__(self, rep: str, luhn: bool) -> None:
        self.rep = rep
        self.luhn = luhn
        self.keyed = "{n}" in rep
        self.keys: dict[str, int] = {}

    def __call__(self, match: Any) -> str:
        value = str(match.group())
        if self.luhn and not luhn_ok(value):
            return value
        if not self.keyed:
            return self.rep
        n = self.keys.setdefault(value, len(self.keys) + 1)
        return self.rep.replace("{n}", str(n))


def _one(rep: str, luhn: bool) -> Callable[[Any], str]:
    return _One(rep, luhn)
