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
reproduce exactly: any step that sees text spanning tokens (after ``Fuse``/``ByteLevel``, anything
but a ``Strip`` of leading characters; after ``ByteFallback``, anything but one ``Metaspace`` and
``Fuse``), ``BPEDecoder`` (its last token differs) and ``CTC`` (it merges repeated tokens), regex
``Replace``, a ``Strip`` the Rust decoder fails on for some token, an unknown decoder (see
:class:`_Builder` for the exact rule). The caller then falls back to a windowed decode.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DecodeTable",
    "byte_token_value",
    "bytelevel_char_to_byte",
    "table_from_hf",
    "table_from_token_bytes",
    "window_limit",
]

_BYTE_TOKEN = re.compile(r"<0x(\+[0-9A-Fa-f]|[0-9A-Fa-f]{2})>")


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

# Where a decoder chain stands, as the list of strings the ``tokenizers`` decoders pass along:
_TOKENS = 0  # one string per (non-skipped) token
_RUNS = 1  # after ByteFallback: each run of byte tokens is one string (U+FFFD per byte if invalid)
_FUSED = 2  # after Fuse or ByteLevel: one string, the whole output


class _Builder:
    """Runs the per-token steps of a decoder chain over the two forms (first, later) of a token.

    The ``tokenizers`` decoders transform a list of strings, one per token to begin with. A
    per-id table reproduces a chain exactly only while every step acts on each token on its own
    (its first or later form); once the list has been fused into one string (``Fuse``,
    ``ByteLevel``) a step sees text that spans tokens. The accepted chains are:

    * any number of ``Replace`` (string pattern), ``Strip``, ``Metaspace`` and ``WordPiece``
      steps on single tokens, in any order;
    * then optionally ``ByteLevel`` or ``ByteFallback``; after ``ByteFallback`` at most one
      ``Metaspace`` (it sees a run of byte tokens as one string: :attr:`DecodeTable.run_rep`);
    * then optionally ``Fuse``; after fusing, ``Replace`` of a single character (unless bytes were
      converted before: their bytes may spell it), then one ``Strip`` of leading characters of
      the whole output (``stop`` 0: :attr:`DecodeTable.strip_char`), and further ``Fuse`` steps.

    Everything else (regex ``Replace``, ``CTC``, ``BPEDecoder``, any other step after fusing or
    after byte conversion, a ``Strip`` that makes the Rust decoder fail on some token, an unknown
    decoder) raises :class:`_Unsupported`: the detokenizer then decodes a window of ids instead.
    """

    def __init__(self, steps: list[Mapping[str, Any]]) -> None:
        self.steps = steps
        self.strip_char = ""
        self.strip_count = 0
        self.first_differs = False
        self.run_rep = ""
        self.run_rep_drop_first = False
        self._whole_strips: set[int] = set()
        self._check()

    def _check(self) -> None:
        """Validate the chain once and record whole-output rules."""
        stage = _TOKENS
        after_bytes = False  # ByteFallback or ByteLevel ran: tokens' bytes may spell characters
        ended = False  # a whole-output Strip was applied: nothing but Fuse may follow
        for step in self.steps:
            kind = step.get("type")
            if kind == "Fuse":
                stage = _FUSED
                continue
            if ended:
                raise _Unsupported(f"{kind} after a Strip of the whole output")
            if stage == _FUSED:
                if kind == "Replace" and not after_bytes and _single_char_pattern(step):
                    continue  # one character replaced in the fused text = in each token's text
                if kind == "Strip" and int(step.get("stop", 0)) == 0:
                    self._whole_strips.add(id(step))
                    self.strip_char = str(step["content"])
                    self.strip_count = int(step.get("start", 0))
                    ended = True
                    continue
                raise _Unsupported(f"{kind} after the output was fused into one string")
            if kind == "Metaspace":
                if _metaspace_drops_first(step):
                    self.first_differs = True
                if stage == _RUNS:
                    # A run of byte tokens is one string by now: if its bytes spell the
                    # replacement character, this step rewrites it like any other token's.
                    if self.run_rep:
                        raise _Unsupported("two Metaspace steps after ByteFallback")
                    self.run_rep = str(step.get("replacement", "▁"))
                    self.run_rep_drop_first = _metaspace_drops_first(step)
                continue
            if stage == _RUNS:
                raise _Unsupported(f"{kind} after ByteFallback")
            if kind == "Replace":
                if "String" not in step.get("pattern", {}):
                    raise _Unsupported("regex Replace")
            elif kind == "WordPiece":
                self.first_differs = True
            elif kind == "ByteFallback":
                stage = _RUNS
                after_bytes = True
            elif kind == "ByteLevel":
                stage = _FUSED
                after_bytes = True
            elif kind != "Strip":
                raise _Unsupported(f"decoder {kind!r}")

    def forms(self, token: str) -> tuple[bytes, bytes, bool]:
        """The (first, later) bytes of one token string, and whether ``ByteFallback`` made it a
        byte (both forms alike; :class:`_Unsupported` when only one form is a byte)."""
        first: Form = token
        later: Form = token
        is_byte = False
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
                if isinstance(first, bytes) != isinstance(later, bytes):
                    raise _Unsupported("a token that is a byte token in one position only")
                is_byte = isinstance(later, bytes)
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
        return _to_bytes(first), _to_bytes(later), is_byte


def _single_char_pattern(step: Mapping[str, Any]) -> bool:
    """Whether a Replace step's pattern is a string of exactly one character."""
    pattern = step.get("pattern", {})
    return "String" in pattern and len(str(pattern["String"])) == 1


def _metaspace_drops_first(step: Mapping[str, Any]) -> bool:
    """Whether a Metaspace decoder drops the replacement characters of token 0."""
    scheme = step.get("prepend_scheme")
    if scheme is None:  # configurations older than prepend_scheme
        return bool(step.get("add_prefix_space", True))
    return bool(scheme != "never")


def _to_bytes(form: Form) -> bytes:
    return form if isinstance(form, bytes) else form.encode("utf-8")


def byte_token_value(token: str) -> int | None:
    """The byte a ``ByteFallback`` decoder turns ``token`` into (``<0xXX>``), or ``None``.

    As the Rust decoder: 6 bytes, ``<0x`` + two characters that parse as a hexadecimal ``u8``
    (a leading ``+`` included) + ``>``.
    """
    if len(token) != 6:
        return None
    m = _BYTE_TOKEN.fullmatch(token)
    return int(m.group(1), 16) if m is not None else None


def _byte_fallback(form: Form) -> Form:
    if isinstance(form, str):
        value = byte_token_value(form)
        if value is not None:
            return bytes((value,))
    return form


def _bytelevel(form: Form) -> bytes:
    if isinstance(form, bytes):
        return form
    try:
        return bytes(_BYTELEVEL[c] for c in form)
    except KeyError:
        return form.encode("utf-8")


def _strip(form: Form, step: Mapping[str, Any]) -> Form:
    """One token through the Rust ``Strip`` decoder (which panics where the cuts cross or run past
    the start of the token: then no table reproduces ``decode``)."""
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
    for i in range(stop):
        if i >= len(chars):
            raise _Unsupported("Strip fails on a token (stop beyond its start)")
        if chars[len(chars) - i - 1] != content:
            break
        end = len(chars) - i - 1
    if cut > end:
        raise _Unsupported("Strip fails on a token (start and stop cuts cross)")
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
    steps = _hf_steps(tokenizer)
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
        try:
            f, lt, is_byte = builder.forms(token)
        except _Unsupported:
            return None
        if builder.run_rep and is_byte:
            run_ids.add(i)
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


def _hf_steps(tokenizer: Any) -> list[Mapping[str, Any]] | None:
    decoder = tokenizer.decoder
    if decoder is None:
        return None
    state = decoder.__getstate__()
    return _decoder_steps(json.loads(state if isinstance(state, str) else bytes(state).decode("utf-8")))


def window_limit(tokenizer: Any) -> str | None:
    """Why a windowed decode cannot reproduce ``decode`` of a ``tokenizers.Tokenizer`` exactly,
    or ``None`` when it can.

    A window of the last few ids reproduces ``decode`` when each token's text depends on a bounded
    number of tokens before it and text once decoded never changes when tokens follow: every step
    acts on single tokens (``Replace``, ``Strip``, ``Metaspace``, ``WordPiece``, ``CTC``,
    ``ByteLevel``, ``ByteFallback``; ``BPEDecoder`` as the first step when its suffix only ends
    tokens), after ``ByteFallback`` only ``Metaspace`` and single-character ``Replace``, and after
    fusing (``Fuse``, ``ByteLevel``) only ``Strip``, ``Metaspace`` and single-character ``Replace``.
    Other steps that see the fused text can depend on text
    arbitrarily far back (``Replace("  ", " ")`` halves a run of spaces of any length) or rewrite
    text already decoded (a ``ByteLevel`` after ``Fuse`` maps the whole output to bytes or not at
    all), which no bounded window reproduces.
    """
    steps = _hf_steps(tokenizer)
    if steps is None:
        return None
    stage = _TOKENS
    for n, step in enumerate(steps):
        kind = step.get("type")
        if kind == "Fuse":
            stage = _FUSED
        elif stage == _FUSED:
            if kind == "Replace":
                if not _single_char_pattern(step):
                    return "a Replace of more than one character (or a regex) after the output was fused"
            elif kind not in ("Strip", "Metaspace"):
                return f"{kind} after the output was fused into one string"
        elif stage == _RUNS:
            if kind == "Replace":
                if not _single_char_pattern(step):
                    return "a Replace of more than one character (or a regex) after ByteFallback"
            elif kind != "Metaspace":
                return f"{kind} after ByteFallback"
        elif kind == "ByteFallback":
            stage = _RUNS
        elif kind == "ByteLevel":
            stage = _FUSED
        elif kind == "BPEDecoder":
            suffix = str(step.get("suffix", "</w>"))
            if n > 0 or not suffix:
                return "BPEDecoder after another step"
            size = tokenizer.get_vocab_size(with_added_tokens=True)
            for i in range(size):
                token = tokenizer.id_to_token(i) or ""
                k = token.find(suffix)
                if k >= 0 and k != len(token) - len(suffix):
                    return f"BPEDecoder suffix {suffix!r} inside token {token!r}"
        elif kind not in ("Replace", "Strip", "Metaspace", "WordPiece", "CTC"):
            return f"decoder {kind!r}"
    return None
