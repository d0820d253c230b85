"""How a model batches concurrent generations: :class:`BatchConfig` and its defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._sampling import check_int

if TYPE_CHECKING:
    from ._session import DecoderSession

__all__ = [
    "DEFAULT_DRAFT_TOKENS",
    "DEFAULT_KV_TOKENS",
    "DEFAULT_PREFIX_CACHE_BYTES",
    "MAX_DRAFT_TOKENS",
    "MIN_SHARED_PREFIX",
    "BatchConfig",
    "idle_stats",
]

DEFAULT_KV_TOKENS = 65536
"""KV-cache positions a batch holds at most by default (or the model's context, if larger)."""

DEFAULT_PREFIX_CACHE_BYTES = 128 << 20
"""Bytes of ended rows' KV positions a batch keeps by default for later prompts (128 MiB)."""

MIN_SHARED_PREFIX = 4
"""Shorter common prefixes are prefilled anew (the copy would cost about what it saves)."""

DEFAULT_DRAFT_TOKENS = 4
"""Draft ids a lone row reads with its next id at most (prompt lookup; 0: off)."""
MAX_DRAFT_TOKENS = 16
"""The largest ``draft_tokens`` (a draft pass is one small prefill)."""


SNAPSHOT_SECONDS = 0.05
"""While the batch only decodes, its stats are rebuilt at most this often."""

FIRST_TOKEN_YIELD_SECONDS = 0.002
"""How long the worker leaves the cores to the consumers after the rows of a batch that holds no
other row sampled their first tokens: a lone client's first token through the server, p50,
27.6 -> 21.3 ms (SmolLM2 int4-a8, 2 cores); it had waited for a core while the next step's
threads held both. Never when other rows are decoding (they would wait too)."""

LINGER_SECONDS = 0.25
"""How long an idle worker waits for the next generation before it ends and frees the KV buffers
(starting a thread, and allocating and faulting in the buffers, cost each request of a
sequential client about 0.6 ms before its prompt pass)."""


@dataclass(frozen=True, slots=True)
class BatchConfig:
    """How a model batches concurrent generations (:meth:`OnnxModel.load`'s ``batching``).

    Attributes:
        max_batch: rows decoded together at most; more wait (first come, first served).
        max_kv_tokens: KV-cache positions at most, all rows together, counted as allocated
            (slots x capacity: rows are padded to the longest reservation, prompt plus
            ``max_new_tokens``); a row that cannot fit even alone fails with a ``ValueError``.
            None (default): 65536, or the model's context length when that is larger (one
            request of the whole context always fits).
        prefill_chunk: prompt tokens per prefill pass. Larger chunks prefill faster (bigger matrix
            products), smaller ones let the decoding rows' next tokens out sooner while a long
            prompt is read (a decode step waits for at most about one chunk of prefill).
        share_prefix: a prompt that begins with tokens another row in the batch already holds
            in its cache (a chat template's system prompt), or that the prefix store kept
            from a row that ended (see ``prefix_cache_bytes``), starts from a copy of those
            positions and prefills only the rest (at least ``MIN_SHARED_PREFIX`` tokens
            shared; the last prompt token is always computed).
        draft_tokens: prompt lookup (speculative decoding without a second model): while a
            row decodes alone (one stream), ids that followed an earlier occurrence of its last
            ids are read with its next id in one pass, at most this many, and kept while its
            own sampler picks them (see :mod:`._lookup`); the ids are exactly those of plain
            decoding. Slot layout (GroupQueryAttention graphs), rows without a grammar. 0: off;
            None (default): :data:`DEFAULT_DRAFT_TOKENS`, off for graphs with 8-bit activations
            (``int4-a8``), whose several-position passes round otherwise than single steps.
        prefix_cache_bytes: with ``share_prefix``, the KV positions of rows that ended (their
            prompt and the answer tokens fed back) are kept up to this many bytes, least
            recently used dropped first, for the prompts that begin with them (a chat's next
            turn repeats the conversation so far). 0 keeps none. Counted apart from
            ``max_kv_tokens``; ``batch_stats()`` reports it. Slot layout (GroupQueryAttention
            graphs) only.
    """

    max_batch: int = 16
    max_kv_tokens: int | None = None
    prefill_chunk: int = 256
    share_prefix: bool = True
    prefix_cache_bytes: int = DEFAULT_PREFIX_CACHE_BYTES
    draft_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_batch", "max_kv_tokens", "prefill_chunk"):
            value = getattr(self, name)
            if value is not None or name != "max_kv_tokens":
                check_int("BatchConfig", name, value, minimum=1)
        check_int("BatchConfig", "prefix_cache_bytes", self.prefix_cache_bytes, minimum=0)
        if not isinstance(self.share_prefix, bool):
            raise TypeError(f"BatchConfig: share_prefix must be a bool, got {self.share_prefix!r}")
        if self.draft_tokens is not None:
            if check_int("BatchConfig", "draft_tokens", self.draft_tokens, minimum=0) > MAX_DRAFT_TOKENS:
                raise ValueError(
                    f"BatchConfig: draft_tokens must be <= {MAX_DRAFT_TOKENS}, got {self.draft_tokens}"
                )

    def draft_tokens_for(self, graph: DecoderSession) -> int:
        """:attr:`draft_tokens`, with None resolved for ``graph``: :data:`DEFAULT_DRAFT_TOKENS`,
        or 0 where its kernels round the activations to 8 bits (``MatMulNBits`` at
        ``accuracy_level`` 4: a pass of several positions rounds them otherwise than single
        steps do, so the ids would not always be plain decoding's)."""
        if self.draft_tokens is not None:
            return self.draft_tokens
        return 0 if graph.int8_activations else DEFAULT_DRAFT_TOKENS

    def kv_budget(self, context_length: int) -> int:
        """:attr:`max_kv_tokens`, with None resolved for a model of ``context_length`` tokens."""
        if self.max_kv_tokens is not None:
            return self.max_kv_tokens
        return max(DEFAULT_KV_TOKENS, context_length)


def idle_stats(
    layout: str | None, config: BatchConfig, context_length: int, draft_tokens: int
) -> dict[str, Any]:
    """A model's batch stats before its scheduler exists (no row, no KV memory)."""
    return {
        "layout": layout,
        "rows": 0,
        "waiting": 0,
        "kv_bytes": 0,
        "max_batch": config.max_batch,
        "max_kv_tokens": config.kv_budget(context_length),
        "float_graph": False,
        "decode_steps": 0,
        "prefill_tokens": 0,
        "shared_prefix_tokens": 0,
        "draft_tokens": draft_tokens,
        "drafted_tokens": 0,
        "kept_draft_tokens": 0,
    }
