"""A TokFlow-compatible facade: ``from rxstream.compat.tokflow import TokFlow, SentenceStop``.

Same calls and return values as the ``tokflow`` package (``put(text, opts)`` / ``flush(opts)``
with ``opts = {"in_type": "spot"|"full", "out_type": "spot"|"full"}``; ``SentenceStop`` returns
the dict keys ``text``, ``stop_str_found``, ``possible``, ``stop_str``), on rxstream's automaton,
so the cost per character does not grow with the number of rules. Differences, all deliberate
fixes:

- ``flush`` returns the text still held (TokFlow drops a partial match that never completed).
- Two targets in one chunk are both replaced, and a failed partial match is rescanned from its
  next character (``"<<NL>"`` still finds ``"<NL>"``).
- ``flush`` resets all state, so the next stream starts clean.
- Matching is leftmost-longest over all rules at once, not "first rule in list order wins".
- ``skip_existing_stop_str`` needs no mask character: the first text put after construction
  or ``clear()`` is output as is, and stop strings wholly inside it do not fire; it works with
  both ``in_type`` values (TokFlow masks the head of every later ``spot`` chunk).
- A ``full`` snapshot that does not extend the previous one raises ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rxstream.text import Replacer, StopMatcher, stop_rules

__all__ = ["MatchedWorker", "SentenceStop", "TokFlow"]

Opts = Mapping[str, Any]


def _types(opts: Opts | None) -> tuple[str, str]:
    opts = opts or {}
    in_type = opts.get("in_type", "spot")
    out_type = opts.get("out_type", "spot")
    for name, value in (("in_type", in_type), ("out_type", out_type)):
        if value not in ("spot", "full"):
            raise ValueError(f'unknown {name}:"{value}" (expected "spot" or "full")')
    return in_type, out_type


class _Text:
    """Text that grows by appending, without copying what is already there on every append.

    New text is kept as parts; they are joined into one string when a caller needs the whole
    text (a ``full`` snapshot to check or to return) or when they add up to as much as what is
    already joined (so each character is copied O(1) times in all, and the parts never take
    more memory than the text).
    """

    __slots__ = ("_joined", "_parts", "_parts_len", "length")

    def __init__(self) -> None:
        self._joined = ""
        self._parts: list[str] = []
        self._parts_len = 0
        self.length = 0

    def append(self, text: str) -> None:
        if text:
            self._parts.append(text)
            self._parts_len += len(text)
            self.length += len(text)
            if len(self._parts) >= 64 and self._parts_len >= len(self._joined):
                self.value()

    def value(self) -> str:
        if self._parts:
            self._joined = "".join([self._joined, *self._parts])
            self._parts.clear()
            self._parts_len = 0
        return self._joined

    def replace(self, text: str) -> None:
        self._joined = text
        self._parts.clear()
        self._parts_len = 0
        self.length = len(text)


class _Input:
    """Turns ``full`` snapshots into deltas; checks that each one extends the last."""

    __slots__ = ("text",)

    def __init__(self) -> None:
        self.text = _Text()

    def delta(self, value: str, in_type: str) -> str:
        if not isinstance(value, str):
            raise TypeError(f"put: expected str, got {type(value).__name__}: {value!r}")
        if in_type == "spot":
            self.text.append(value)
            return value
        previous = self.text.value()
        if not value.startswith(previous):
            raise ValueError(
                f"put: in_type='full' snapshot does not extend the previous one "
                f"(previous ends {previous[-20:]!r}, got {value[:40]!r}...)"
            )
        delta = value[len(previous) :]
        self.text.replace(value)
        return delta


class MatchedWorker:
    """What TokFlow exposes as ``matched_worker``: the rule that matched last."""

    __slots__ = ("replace_to_str", "search_str")

    def __init__(self, search_str: str, replace_to_str: str) -> None:
        self.search_str = search_str
        self.replace_to_str = replace_to_str


class TokFlow:
    """Streaming replacement with TokFlow's API: ``TokFlow([(target, replacement), ...])``."""

    def __init__(self, replacer_list: Iterable[tuple[str, str]] | Mapping[str, str]) -> None:
        self.replacer_list = (
            list(replacer_list.items()) if isinstance(replacer_list, Mapping) else list(replacer_list)
        )
        self._replacer = Replacer(self.replacer_list, owner="TokFlow")
        self._table = dict(self._replacer.rules)
        self._lengths = sorted({len(p) for p in self._table}, reverse=True)
        self.clear()

    def clear(self) -> None:
        """Reset all state."""
        self._replacer.flush()
        self._input = _Input()
        self._output = _Text()
        self.is_matched = False
        self.is_possible_str_started = False
        self.matched_worker: MatchedWorker | None = None

    def put(self, text: str, opts: Opts | None = None) -> str:
        """Feed a chunk (``spot``) or the whole text so far (``full``); return the output."""
        in_type, out_type = _types(opts)
        delta = self._input.delta(text, in_type)
        before = self._replacer.resolved
        held_before = self._replacer.held  # at most as long as the longest rule
        out = self._replacer.feed(delta)
        resolved = self._replacer.resolved - before
        if resolved:
            self._track_match(held_before + delta, resolved)
        else:
            self.is_matched = False
        self.is_possible_str_started = bool(self._replacer.held)
        self._output.append(out)
        return self._output.value() if out_type == "full" else out

    def flush(self, opts: Opts | None = None) -> str:
        """Resolve held text as at the end of the stream, return it, and reset."""
        _, out_type = _types(opts)
        out = self._replacer.flush()
        result = self._output.value() + out if out_type == "full" else out
        self.clear()
        return result

    def _track_match(self, text: str, resolved: int) -> None:
        """Set ``is_matched``/``matched_worker`` when the resolved text ended with a rule."""
        self.is_matched = False
        table = self._table
        for length in self._lengths:  # longest first; one lookup per distinct rule length
            if length <= resolved:
                pattern = text[resolved - length : resolved]
                if pattern in table:
                    self.is_matched = True
                    self.matched_worker = MatchedWorker(pattern, table[pattern])
                    return

    def get_workers(self) -> list[MatchedWorker]:
        """One entry per rule (TokFlow's workers), for code that inspects them."""
        return [MatchedWorker(p, r) for p, r in self.replacer_list]


class SentenceStop:
    """Stop strings with TokFlow's ``SentenceStop`` API."""

    def __init__(self, stop_strs: Iterable[str]) -> None:
        self.stop_strs = list(stop_strs)
        self._rules = stop_rules(self.stop_strs, owner="SentenceStop")  # checked once, here
        self.clear()

    def clear(self) -> None:
        """Reset all state; the next ``put`` is the "first" text again."""
        self._matcher: StopMatcher | None = None
        self._input = _Input()
        self._output = _Text()

    def _get_matcher(self, opts: Opts | None) -> StopMatcher:
        if self._matcher is None:
            skip = bool((opts or {}).get("skip_existing_stop_str", False))
            self._matcher = StopMatcher(self._rules, skip_initial=skip, owner="SentenceStop")
        return self._matcher

    def put(self, input_token_base: str, condition: Opts | None = None) -> dict[str, Any]:
        """Feed text; return ``{"text", "stop_str_found", "possible", "stop_str"}``."""
        in_type, out_type = _types(condition)
        matcher = self._get_matcher(condition)
        delta = self._input.delta(input_token_base, in_type)
        out = matcher.feed(delta)
        self._output.append(out)
        text = self._output.value() if out_type == "full" else out
        if matcher.stopped:
            return {"text": text, "stop_str_found": True, "possible": True, "stop_str": matcher.stop_string}
        return {"text": text, "stop_str_found": False, "possible": matcher.holding, "stop_str": None}

    def flush(self, condition: Opts | None = None) -> str:
        """End of input: return the rest of the text (``full``: all of it), and reset."""
        _, out_type = _types(condition)
        matcher = self._get_matcher(condition)
        out = matcher.flush()
        result = self._output.value() + out if out_type == "full" else out
        self.clear()
        return result
