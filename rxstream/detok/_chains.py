"""The decoder chains of ``tokenizers``, modelled per token: which chains a per-id table
reproduces exactly (:class:`ChainBuilder`, which also computes each token's bytes), and which a
window of ids can stream exactly (:func:`window_limit`).

A ``tokenizers`` decoder transforms a list of strings, one per token to begin with; a chain is
the flattened list of its steps (:func:`hf_steps`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ChainBuilder",
    "Unsupported",
    "byte_token_value",
    "bytelevel_char_to_byte",
    "fused_replaces",
    "hf_steps",
    "window_limit",
]

_BYTE_TOKEN = re.compile(r"<0x(\+[0-9A-Fa-f]|[0-9A-Fa-f]{2})>")


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


class Unsupported(Exception):
    """The decoder configuration cannot be reproduced by a per-id table."""


Form = str | bytes

# Where a decoder chain stands, as the list of strings the ``tokenizers`` decoders pass along:
_TOKENS = 0  # one string per (non-skipped) token
_RUNS = 1  # after ByteFallback: each run of byte tokens is one string (U+FFFD per byte if invalid)
_FUSED = 2  # after Fuse or ByteLevel: one string, the whole output


class ChainBuilder:
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
    decoder) raises :class:`Unsupported`: the detokenizer then decodes a window of ids instead.
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
                raise Unsupported(f"{kind} after a Strip of the whole output")
            if stage == _FUSED:
                if kind == "Replace" and not after_bytes and _single_char_pattern(step):
                    continue  # one character replaced in the fused text = in each token's text
                if kind == "Strip" and int(step.get("stop", 0)) == 0:
                    self._whole_strips.add(id(step))
                    self.strip_char = str(step["content"])
                    self.strip_count = int(step.get("start", 0))
                    ended = True
                    continue
                raise Unsupported(f"{kind} after the output was fused into one string")
            if kind == "Metaspace":
                if _metaspace_drops_first(step):
                    self.first_differs = True
                if stage == _RUNS:
                    # A run of byte tokens is one string by now: if its bytes spell the
                    # replacement character, this step rewrites it like any other token's.
                    if self.run_rep:
                        raise Unsupported("two Metaspace steps after ByteFallback")
                    self.run_rep = str(step.get("replacement", "▁"))
                    self.run_rep_drop_first = _metaspace_drops_first(step)
                continue
            if stage == _RUNS:
                raise Unsupported(f"{kind} after ByteFallback")
            if kind == "Replace":
                if "String" not in step.get("pattern", {}):
                    raise Unsupported("regex Replace")
            elif kind == "WordPiece":
                self.first_differs = True
            elif kind == "ByteFallback":
                stage = _RUNS
                after_bytes = True
            elif kind == "ByteLevel":
                stage = _FUSED
                after_bytes = True
            elif kind != "Strip":
                raise Unsupported(f"decoder {kind!r}")

    def forms(self, token: str) -> tuple[bytes, bytes, bool]:
        """The (first, later) bytes of one token string, and whether ``ByteFallback`` made it a
        byte (both forms alike; :class:`Unsupported` when only one form is a byte)."""
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
                    raise Unsupported("a token that is a byte token in one position only")
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
            raise Unsupported("Strip fails on a token (stop beyond its start)")
        if chars[len(chars) - i - 1] != content:
            break
        end = len(chars) - i - 1
    if cut > end:
        raise Unsupported("Strip fails on a token (start and stop cuts cross)")
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


def hf_steps(tokenizer: Any) -> list[Mapping[str, Any]] | None:
    decoder = tokenizer.decoder
    if decoder is None:
        return None
    state = decoder.__getstate__()
    return _decoder_steps(json.loads(state if isinstance(state, str) else bytes(state).decode("utf-8")))


def fused_replaces(
    steps: list[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], tuple[tuple[str, str], ...]]:
    """Split off a chain's tail of literal ``Replace`` steps on the fused output that no table
    applies per token (a pattern of several characters, or any once bytes were converted): the
    steps before it, and the tail's ``(pattern, content)`` pairs, streamed by
    :mod:`._post_replace`. A chain with no such tail (or with other steps in it) is returned as
    it is, with no pairs."""
    fused = after_bytes = False
    for k, step in enumerate(steps):
        kind = step.get("type")
        if kind == "Fuse":
            fused = True
        elif kind in ("ByteLevel", "ByteFallback"):
            fused = fused or kind == "ByteLevel"
            after_bytes = True
        elif fused and kind == "Replace" and "String" in step.get("pattern", {}):
            if after_bytes or not _single_char_pattern(step):
                tail = steps[k:]
                if all(t.get("type") == "Fuse" or _literal_replace(t) for t in tail):
                    pairs = tuple(
                        (str(t["pattern"]["String"]), str(t["content"]))
                        for t in tail
                        if t.get("type") == "Replace"
                    )
                    if all(a for a, _ in pairs):
                        return list(steps[:k]), pairs
                return steps, ()
    return steps, ()


def _literal_replace(step: Mapping[str, Any]) -> bool:
    return step.get("type") == "Replace" and "String" in step.get("pattern", {})


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
    steps = hf_steps(tokenizer)
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
