"""The ``regex`` module's own syntax in rules: what the streaming engine takes, and what it names.

Rules are parsed by the standard library's parser (:mod:`rxstream.text._regex_syntax`), which
knows Python's ``re`` syntax. A rule compiled with the third-party ``regex`` module may use more:

* **Unicode property classes** -- ``\\p{L}``, ``\\P{Greek}``, ``\\pL``, ``\\p{Script=Han}`` -- and
  **POSIX classes** inside brackets (``[[:alpha:]]``) are supported: :func:`prepare` swaps each
  for a private-use placeholder character that the standard parser reads as a literal, and the
  leaf that placeholder becomes is described by the original text, so the ``regex`` engine itself
  decides which characters it matches (:mod:`rxstream.text._regex_alphabet`).
* ``(?<name>...)`` is read as ``(?P<name>...)``.
* Everything else that is ``regex``-only is refused with ``ValueError`` naming the construct
  (:func:`regex_only_construct`): ``\\X``, ``\\K``, ``\\G``, ``\\m``/``\\M``, backtracking
  verbs ``(*SKIP)``, branch reset ``(?|...)``, recursion ``(?R)`` / ``(?1)`` / ``(?&name)``, fuzzy
  matching ``{e<=1}``, and the flags the engine does not implement (``(?V1)``, ``(?r)``, ...).
  The standard parser would read some of them (``{e<=1}``, ``[[:alpha:]]``) as literal text, which
  would silently change the rule's meaning: so they are found before parsing.

Patterns for ``re`` are left as they are; a ``re`` pattern that fails to parse because it uses
``regex``-only syntax gets a message saying so (:func:`regex_only_construct`).
"""

from __future__ import annotations

import re

__all__ = ["PLACEHOLDER_BASE", "foreign_message", "prepare", "regex_only_construct"]

PLACEHOLDER_BASE = 0xF0000
"""The first placeholder code point (Supplementary Private Use Area-A)."""

_ESCAPES = {
    "X": "\\X (a grapheme cluster)",
    "K": "\\K (keep out)",
    "G": "\\G (the search anchor)",
    "m": "\\m (start of word)",
    "M": "\\M (end of word)",
}
_VERB = re.compile(r"\(\*[A-Z]*(?::[^)]*)?\)")
_RECURSION = re.compile(r"\(\?(?:R|[+-]?\d+|&\w+|P>\w+)\)")
_FUZZY = re.compile(r"\{\s*(?:[eisd]\s*(?:<=?|=)|\d+\s*<=?\s*[eisd])")
_FLAGS = re.compile(r"\(\?([a-zA-Z]*V[01][a-zA-Z]*|[aiLmsux]*[rwfbep][a-zA-Z0-9]*)[:)]")
_PROPERTY = re.compile(r"[pP](?:\{[^}]*\}|[A-Za-z])")
_POSIX = re.compile(r"\[:\^?[A-Za-z]+:\]")


def regex_only_construct(pattern: str) -> str | None:
    """The first construct of ``pattern`` that is ``regex``-module syntax the engine does not take
    (properties and POSIX classes included: for ``re`` patterns they are foreign too), or None."""
    _, props, bad = _scan(pattern, translate=False)
    if bad is not None:
        return bad
    for original in props.values():
        if not original.startswith("[:"):
            return f"{original} (a Unicode property class)"
    return None


def foreign_message(pattern: str, construct: str) -> str:
    """What to say of a ``re`` pattern that uses ``construct`` (:func:`regex_only_construct`)."""
    if construct.endswith("(a Unicode property class)"):
        return (
            f"pattern {pattern!r}: {construct} is syntax of the regex module, not of re: compile the "
            "pattern with the regex package (rx(regex.compile(...)))"
        )
    return (
        f"pattern {pattern!r}: {construct} is syntax of the regex module that the streaming engine "
        "does not support"
    )


def prepare(pattern: str) -> tuple[str, dict[int, str]]:
    """A ``regex`` pattern made readable by the standard parser: property and POSIX classes
    become placeholders (returned: placeholder code point -> the class's own text), ``(?<name>``
    becomes ``(?P<name>``.

    Raises:
        ValueError: the pattern uses ``regex``-only syntax that is not supported (named).
    """
    text, props, bad = _scan(pattern, translate=True)
    if bad is not None:
        raise ValueError(
            f"{bad} is syntax of the regex module that the streaming engine does not support "
            "(it takes Python's re syntax plus \\p{...} property and [[:alpha:]] POSIX classes)"
        )
    return text, props


def _scan(pattern: str, *, translate: bool) -> tuple[str, dict[int, str], str | None]:
    """Walk ``pattern`` once: escapes, classes (where ``[:name:]`` is a POSIX class) and groups."""
    out: list[str] = []
    props: dict[int, str] = {}
    used = {ord(c) for c in pattern}
    next_point = PLACEHOLDER_BASE

    def placeholder(original: str) -> str:
        nonlocal next_point
        while next_point in used:
            next_point += 1
        point = next_point
        next_point += 1
        props[point] = original
        return f"\\U{point:08x}"

    i, n = 0, len(pattern)
    in_class = False
    class_start = -1
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            m = _PROPERTY.match(pattern, i + 1)
            if m is not None:
                out.append(placeholder(pattern[i : m.end()]))
                i = m.end()
                continue
            if not in_class and nxt in _ESCAPES:
                return "", {}, _ESCAPES[nxt]
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            m = _POSIX.match(pattern, i)
            if m is not None:
                out.append(placeholder(m.group()))
                i = m.end()
                continue
            if c == "]" and i > class_start:
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":  # a leading ] is a member
                j += 1
            class_start = j
            out.append(pattern[i:j])
            i = j
            continue
        if c == "(":
            for regexp, what in (
                (_VERB, "a backtracking control verb {}"),
                (_RECURSION, "recursion or a subroutine call {}"),
                (_FLAGS, "the inline flags {}"),
            ):
                m = regexp.match(pattern, i)
                if m is not None:
                    return "", {}, what.format(m.group())
            if pattern.startswith("(?|", i):
                return "", {}, "branch reset (?|...)"
            if translate and pattern.startswith("(?<", i) and pattern[i + 3 : i + 4] not in ("=", "!"):
                out.append("(?P<")
                i += 3
                continue
        if c == "{":
            m = _FUZZY.match(pattern, i)
            if m is not None:
                return "", {}, f"fuzzy matching {pattern[i : pattern.find('}', i) + 1 or n]}"
        out.append(c)
        i += 1
    return "".join(out), props, None
