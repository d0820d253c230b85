"""Plain, obviously-correct references for the text operators (written from SEMANTICS.md §2–§3).

They are slow on purpose (no automaton, no state): the operators are checked against them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tokenizers import Tokenizer


def first_rules(rules: Sequence[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p, r in rules:
        out.setdefault(p, r)
    return out


def batch_replace(text: str, rules: Sequence[tuple[str, str]]) -> str:
    table = first_rules(rules)
    out = []
    i = 0
    while i < len(text):
        found = [p for p in table if text.startswith(p, i)]
        if found:
            p = max(found, key=len)
            out.append(table[p])
            i += len(p)
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def is_open(rest: str, patterns: Sequence[str]) -> bool:
    return bool(rest) and any(len(p) > len(rest) and p.startswith(rest) for p in patterns)


def replace_resolved(text: str, rules: Sequence[tuple[str, str]]) -> int:
    """c of SEMANTICS §2: the first open position the batch scan of ``text`` visits."""
    table = first_rules(rules)
    i = 0
    while i < len(text):
        if is_open(text[i:], list(table)):
            break
        found = [p for p in table if text.startswith(p, i)]
        i += len(max(found, key=len)) if found else 1
    return min(i, len(text))


def replace_emitted(text: str, rules: Sequence[tuple[str, str]]) -> str:
    """What replace must have emitted after seeing ``text`` (SEMANTICS §2 earliest emission)."""
    return batch_replace(text[: replace_resolved(text, rules)], rules)


def batch_stop(text: str, stops: Sequence[str], include_stop: bool = False) -> tuple[str, str | None]:
    best: tuple[int, str] | None = None
    for s in stops:
        p = text.find(s)
        if p >= 0 and (best is None or p < best[0] or (p == best[0] and len(s) > len(best[1]))):
            best = (p, s)
    if best is None:
        return text, None
    p, s = best
    return text[: p + len(s)] if include_stop else text[:p], s


def stop_state(text: str, stops: Sequence[str], include_stop: bool = False) -> tuple[str, bool]:
    """(what stop must have emitted after ``text``, whether it has decided) per SEMANTICS §3."""
    batch_out, s0 = batch_stop(text, stops, include_stop)
    q_set = [q for q in range(len(text)) if is_open(text[q:], stops)]
    p0 = None
    if s0 is not None:
        p0 = len(batch_out) - (len(s0) if include_stop else 0)
    if p0 is not None and all(q > p0 for q in q_set):
        return batch_out, True
    if include_stop:
        return (batch_out if s0 is not None else text), False
    cut = min([*q_set, *([p0] if p0 is not None else [])], default=len(text))
    return text[:cut], False


def prompt_decided(tok: Tokenizer, ids: list[int], k: int, skip: bool = True) -> str:
    """The text the prompt ``ids[:k]`` completes: the part of the full text it already decides.

    When the prompt ends inside a character, ``decode(prompt)`` shows U+FFFD for the incomplete
    bytes (ByteFallback even turns its whole byte run into U+FFFD, complete characters included),
    so the reference is the longest common prefix of the full text with the decode of the prompt
    or of the prompt without its last 1-3 ids (those hold at most one incomplete character). The
    generation then emits the completed character whole.
    """
    full = tok.decode(ids, skip_special_tokens=skip)
    best = 0
    for j in range(max(0, k - 3), k + 1):
        pre = tok.decode(ids[:j], skip_special_tokens=skip) if j else ""
        n = 0
        while n < min(len(pre), len(full)) and pre[n] == full[n]:
            n += 1
        best = max(best, n)
    return full[:best]


# -- rules mixing literal strings and regular expressions (SEMANTICS §7) -------------------------
def _mixed_rule(rule: object) -> tuple[re.Pattern[str], int | None]:
    """A literal string as an escaped pattern (its own length as the bound), or a regex rule."""
    if isinstance(rule, str):
        return re.compile(re.escape(rule)), len(rule)
    pattern = getattr(rule, "pattern", rule)
    assert isinstance(pattern, re.Pattern)
    return pattern, getattr(rule, "max_hold", None)


def mixed_matches(text: str, rules: Sequence[object]) -> list[tuple[int, int, int]]:
    """Leftmost, then longest, then first rule; non-overlapping: ``(start, end, rule)``, by brute force.

    Each candidate span is asked of ``re.fullmatch`` alone (so: patterns without assertions).
    """
    compiled = [_mixed_rule(r) for r in rules]
    out: list[tuple[int, int, int]] = []
    i = 0
    while i < len(text):
        best: tuple[int, int, int] | None = None
        for r, (pattern, hold) in enumerate(compiled):
            top = len(text) if hold is None else min(len(text), i + hold)
            for j in range(top, i, -1):
                if best is not None and j <= best[1]:
                    break
                if pattern.fullmatch(text, i, j):
                    best = (i, j, r)
                    break
        if best is None:
            i += 1
        else:
            out.append(best)
            i = best[1]
    return out


def batch_replace_mixed(text: str, rules: Sequence[tuple[object, str]]) -> str:
    """Replace with literal and regex rules (fixed replacements; a rule given twice keeps its first)."""
    table: dict[object, str] = {}
    for p, r in rules:
        table.setdefault(p, r)
    keys = list(table)
    out, last = [], 0
    for start, end, r in mixed_matches(text, keys):
        out.append(text[last:start])
        out.append(table[keys[r]])
        last = end
    out.append(text[last:])
    return "".join(out)


def batch_stop_mixed(
    text: str, stops: Sequence[object], include_stop: bool = False
) -> tuple[str, object | None, str | None]:
    """``(output, the rule that matched, the matched text)``: the first leftmost-longest match."""
    rules = list(dict.fromkeys(stops))
    found = mixed_matches(text, rules)
    if not found:
        return text, None, None
    start, end, r = found[0]
    return text[: end if include_stop else start], rules[r], text[start:end]
