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
:class:`~._chains.ChainBuilder` for the exact rule). The caller then falls back to a windowed decode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ._chains import ChainBuilder, Unsupported, fused_replaces, hf_steps

__all__ = [
    "DecodeTable",
    "table_from_hf",
    "table_from_token_bytes",
]


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
        post_replace: literal ``(pattern, content)`` replacements the decoder applies to the
            fused output after everything else, in order (streamed by
            :class:`~._post_replace.ReplacingEngine`; matches may span tokens).
    """

    later: Sequence[bytes | None]
    first: Sequence[bytes | None] | None = None
    skipped: frozenset[int] = field(default_factory=frozenset)
    strip_char: str = ""
    strip_count: int = 0
    run_ids: frozenset[int] = field(default_factory=frozenset)
    run_rep: str = ""
    run_rep_drop_first: bool = False
    post_replace: tuple[tuple[str, str], ...] = ()
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


def table_from_hf(tokenizer: Any, skip_special_tokens: bool) -> DecodeTable | None:
    """Build the table of a ``tokenizers.Tokenizer``; ``None`` when no exact table exists.

    Args:
        tokenizer: a ``tokenizers.Tokenizer``.
        skip_special_tokens: whether special tokens vanish (as in ``decode(..., skip_special_tokens)``).
    """
    steps = hf_steps(tokenizer)
    head, post = fused_replaces(steps) if steps else (steps, ())
    try:
        builder = ChainBuilder(head or [])
    except Unsupported:
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
        except Unsupported:
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
        post_replace=post,
    )
