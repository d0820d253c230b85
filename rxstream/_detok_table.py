"""Per-id byte tables for exact, O(1)-per-token detokenization.

A :class:`DecodeTable` holds, for every token id, the bytes the tokenizer's decoder turns it
into, plus the few context rules a decoder applies beyond single tokens:

* the *first* token of the decoded sequence can have its own form (the Metaspace decoder drops
  every ``▁`` of token 0; the WordPiece decoder neither strips ``##`` from nor puts a space in front
  of token 0; a decoder-less tokenizer joins tokens with spaces);
* a ``Strip`` placed after the output has been fused into one string (Llama's
  ``Replace/ByteFallback/Fuse/Strip``, or after ``ByteLevel``) removes up to ``start`` leading
  characters of the whole output;
* a ``Metaspace`` step after ``ByteFallback`` sees each run of byte tokens as one string: a
  replacement character spelled in bytes becomes a space too (or vanishes in the first run);
* special tokens vanish entirely when ``skip_special_tokens`` is set (they are removed before the
  decoder runs, so the token after them can become token 0).

:func:`table_from_hf` builds one from a ``tokenizers.Tokenizer`` by reading its decoder
configuration. It returns ``None`` when the decoder does something a per-id table cannot
reproduce exactly (``BPEDecoder`` and ``CTC``, regex ``Replace``, a ``Strip`` of trailing characters
of the whole output, an unknown decoder); the caller then falls back to a windowed decode.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DecodeTable", "bytelevel_char_to_byte", "table_from_hf", "table_from_token_bytes"]

_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


@dataclass(frozen=True, slots=True, eq=False)
class DecodeTable:
    """What a decoder turns each token id into, and the context rules it applies.

    Attributes:
        later: bytes of each id anywhere but first; ``None`` for ids the tokenizer does not have.
        first: bytes of each id when it is the first (non-skipped) token; ``None`` when every id
            has the same form in both places (then ``later`` is used).
        skipped: ids that vanish entirely (special tokens with ``skip_special_tokens=True``).
        strip_char: character a whole-output ``Strip`` removes from the start ("" for none).
        strip_count: how many leading ``strip_char`` the whole-output ``Strip`` removes at most.
        run_ids: byte-fallback ids (``<0xXX>``) whose decoded runs a later ``Metaspace`` step still
            rewrites (empty when no ``Metaspace`` follows ``ByteFallback``).
        run_rep: the ``Metaspace`` replacement character that such a run can spell in bytes: it
            becomes a space, or vanishes when the run is the first token ("" for no such rule).
        run_rep_drop_first: whether ``run_rep`` vanishes (rather than becoming a space) in a run
            that is the first token.
    """

    later: Sequence[bytes | None]
    first: Sequence[bytes | None] | None = None
    skipped: frozenset[int] = field(default_factory=frozenset)
    strip_char: str = ""
    strip_count: int = 0
    run_ids: frozenset[int] = field(default_factory=frozenset)
    run_rep: str = ""
    run_rep_drop_first: bool = False
    fast_texts: list[str | None] | None = field(default=None, init=False, repr=False)
    """Filled on first use by the stream engine (text of ids whose bytes are complete UTF-8)."""
    split_tails: list[tuple[str, bytes] | None] | None = field(default=None, init=False, repr=False)
    """Filled on first use by the stream engine: ids whose bytes end inside a character, as
    (text before that character, its incomplete bytes)."""

    @property
    def size(self) -> int:
        """One more than the largest id in the table (ids are ``0 <= id < size``)."""
        return len(self.later)


def table_from_token_bytes(
    token_bytes: Sequence[bytes | None], skipped: frozenset[int] = frozenset()
) -> DecodeTable:
    """A table with no context rules: the text of ids is the UTF-8 decode of their bytes joined.

    This is how tiktoken (and any byte-level tokenizer without decoder rules) decodes.
    """
    return DecodeTable(later=list(token_bytes), skipped=skipped)


def bytelevel_char_to_byte() -> dict[str, int]:
    """The GPT-2 ByteLevel map from the printable stand-in characters back to bytes."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = {b: b for b in printable}
    n = 0
    for b in range(256):
        if b not in chars:
            chars[b] = 256 + n
            n += 1
    return {chr(c): b for b, c in chars.items()}


_BYTELEVEL = bytelevel_char_to_byte()

_CLEANUP = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" do not", " don't"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)


def _cleanup(text: str) -> str:
    for a, b in _CLEANUP:
        text = text.replace(a, b)
    return text


class _Unsupported(Exception):
    """The decoder configuration cannot be reproduced by a per-id table."""


Form = str | bytes


class _Builder:
    """Runs the per-token steps of a decoder chain over the two forms (first, later) of a token."""

    def __init__(self, steps: list[Mapping[str, Any]]) -> None:
        self.steps = steps
        self.fused = False
        self.strip_char = ""
        self.strip_count = 0
        self.first_differs = False
        self.run_rep = ""
        self.run_rep_drop_first = False
        self._whole_strips: set[int] = set()
        self._check()

    def _check(self) -> None:
        """Validate the chain once and record whole-output rules."""
        fused = False
        after_bytes = False
        for step in self.steps:
            kind = step.get("type")
            if kind == "Replace":
                pattern = step.get("pattern", {})
                if "String" not in pattern or after_bytes:
                    raise _Unsupported("regex Replace or Replace after byte conversion")
            elif kind == "ByteFallback":
                after_bytes = True
            elif kind == "ByteLevel":
                if after_bytes:
                    raise _Unsupported("ByteLevel after byte conversion")
                after_bytes = True
                fused = True
            elif kind == "Fuse":
                fused = True
            elif kind == "Strip":
                if fused:
                    if int(step.get("stop", 0)) > 0 or self.strip_count:
                        raise _Unsupported("Strip of trailing characters of the whole output")
                    self._whole_strips.add(id(step))
                    self.strip_char = str(step["content"])
                    self.strip_count = int(step.get("start", 0))
                elif after_bytes:
                    raise _Unsupported("per-token Strip after byte conversion")
            elif kind == "Metaspace":
                if fused:
                    raise _Unsupported("Metaspace after fusing")
                if _metaspace_drops_first(step):
                    self.first_differs = True
                if after_bytes:
                    # A run of byte tokens is one string by now: if its bytes spell the
                    # replacement character, this step rewrites it like any other token's.
                    if self.run_rep:
                        raise _Unsupported("two Metaspace steps after byte conversion")
                    self.run_rep = str(step.get("replacement", "▁"))
                    self.run_rep_drop_first = _metaspace_drops_first(step)
            elif kind == "WordPiece":
                if fused or after_bytes:
                    raise _Unsupported("WordPiece after fusing or byte conversion")
                self.first_differs = True
            else:
                raise _Unsupported(f"decoder {kind!r}")
        self.fused = fused

    def forms(self, token: str) -> tuple[bytes, bytes]:
        """The (first, later) bytes of one token string."""
        first: Form = token
        later: Form = token
        for step in self.steps:
            kind = step["type"]
            if kind == "Replace":
                pat = str(step["pattern"]["String"])
                content = str(step["content"])
                if isinstance(first, str):
                    first = first.replace(pat, content)
                if isinstance(later, str):
                    later = later.replace(pat, content)
            elif kind == "ByteFallback":
                first = _byte_fallback(first)
                later = _byte_fallback(later)
            elif kind == "ByteLevel":
                first = _bytelevel(first)
                later = _bytelevel(later)
            elif kind == "Strip" and id(step) not in self._whole_strips:
                first = _strip(first, step)
                later = _strip(later, step)
            elif kind == "Metaspace":
                rep = str(step.get("replacement", "▁"))
                drop_first = _metaspace_drops_first(step)
                if isinstance(first, str):
                    first = first.replace(rep, "" if drop_first else " ")
                if isinstance(later, str):
                    later = later.replace(rep, " ")
            elif kind == "WordPiece":
                prefix = str(step.get("prefix", "##"))
                assert isinstance(later, str) and isinstance(first, str)
                later = later.replace(prefix, "", 1) if later.startswith(prefix) else " " + later
                if step.get("cleanup", True):
                    first = _cleanup(first)
                    later = _cleanup(later)
        return _to_bytes(first), _to_bytes(later)


def _metaspace_drops_first(step: Mapping[str, Any]) -> bool:
    """Whether a Metaspace decoder drops the replacement characters of token 0."""
    scheme = step.get("prepend_scheme")
    if scheme is None:  # configurations older than prepend_scheme
        return bool(step.get("add_prefix_space", True))
    return bool(scheme != "never")


def _to_bytes(form: Form) -> bytes:
    return form if isinstance(form, bytes) else form.encode("utf-8")


def _byte_fallback(form: Form) -> Form:
    if isinstance(form, str) and len(form) == 6:
        m = _BYTE_TOKEN.fullmatch(form)
        if m is not None:
            return bytes((int(m.group(1), 16),))
    return form


def _bytelevel(form: Form) -> bytes:
    if isinstance(form, bytes):
        return form
    try:
        return bytes(_BYTELEVEL[c] for c in form)
    except KeyError:
        return form.encode("utf-8")


def _strip(form: Form, step: Mapping[str, Any]) -> Form:
    if not isinstance(form, str):
        return form
    content = str(step["content"])
    start = int(step.get("start", 0))
    stop = int(step.get("stop", 0))
    chars = list(form)
    cut = 0
    while cut < min(start, len(chars)) and chars[cut] == content:
        cut += 1
    end = len(chars)
    while stop > 0 and end > cut and chars[end - 1] == content and len(chars) - end < stop:
        end -= 1
    return "".join(chars[cut:end])


def _decoder_steps(decoder_json: Mapping[str, Any] | None) -> list[Mapping[str, Any]] | None:
    """Flatten a decoder configuration into a list of steps (``None`` = no decoder)."""
    if decoder_json is None:
        return None
    if decoder_json.get("type") == "Sequence":
        out: list[Mapping[str, Any]] = []
        for sub in decoder_json.get("decoders", []):
            steps = _decoder_steps(sub)
            if steps is None:
                continue
            out.extend(steps)
        return out
    return [decoder_json]


def table_from_hf(tokenizer: Any, skip_special_tokens: bool) -> DecodeTable | None:
    """Build the table of a ``tokenizers.Tokenizer``; ``None`` when no exact table exists.

    Args:
        tokenizer: a ``tokenizers.Tokenizer``.
        skip_special_tokens: whether special tokens vanish (as in ``decode(..., skip_special_tokens)``).
    """
    decoder = tokenizer.decoder
    decoder_json: Mapping[str, Any] | None
    if decoder is None:
        decoder_json = None
    else:
        state = decoder.__getstate__()
        decoder_json = json.loads(state if isinstance(state, str) else bytes(state).decode("utf-8"))
    steps = _decoder_steps(decoder_json)
    try:
        builder = _Builder(steps or [])
    except _Unsupported:
        return None

    added = tokenizer.get_added_tokens_decoder()
    size = max(tokenizer.get_vocab_size(with_added_tokens=True), max(added, default=-1) + 1)
    special = frozenset(i for i, tok in added.items() if tok.special)
    skipped = special if skip_special_tokens else frozenset()

    later: list[bytes | None] = [None] * size
    first: list[bytes | None] = [None] * size
    run_ids: set[int] = set()
    joins_with_space = steps is None  # no decoder: tokens are joined with single spaces
    first_differs = builder.first_differs or joins_with_space
    for i in range(size):
        token = tokenizer.id_to_token(i)
        if token is None:
            continue
        if i in skipped:
            later[i] = first[i] = b""
            continue
        if joins_with_space:
            raw = token.encode("utf-8")
            first[i] = raw
            later[i] = b" " + raw
            continue
        if builder.run_rep and len(token) == 6 and _BYTE_TOKEN.fullmatch(token):
            run_ids.add(i)
        f, lt = builder.forms(token)
        first[i] = f
        later[i] = lt
    return DecodeTable(
        later=later,
        first=first if first_differs else None,
        skipped=skipped,
        strip_char=builder.strip_char,
        strip_count=builder.strip_count,
        run_ids=frozenset(run_ids),
        run_rep=builder.run_rep,
        run_rep_drop_first=builder.run_rep_drop_first,
    )
