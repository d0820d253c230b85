"""Choosing the next token from logits: greedy, temperature, top-k, top-p, repetition penalty, seeded."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any, Unpack

import numpy as np
import numpy.typing as npt

from rxstream import SamplingOptions, SamplingParams
from rxstream.structured import TokenConstraint

__all__ = ["MAX_LOGPROBS", "Sampler", "check_int", "check_logprobs", "token_logprobs"]

_BOOLS = (bool, np.bool_)


def check_int(who: str, name: str, value: Any, *, minimum: int | None = None) -> int:
    """``value`` as an ``int`` (Python or numpy integer, not a bool), else ``TypeError``/``ValueError``."""
    if isinstance(value, _BOOLS) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{who}: {name} must be an int, got {value!r} ({type(value).__name__})")
    n = int(value)
    if minimum is not None and n < minimum:
        raise ValueError(f"{who}: {name} must be >= {minimum}, got {n}")
    return n


MAX_LOGPROBS = 20
"""The most alternatives :func:`token_logprobs` reports per token (OpenAI's limit for chat)."""


def check_logprobs(who: str, value: Any) -> int | None:
    """``logprobs`` of a generate call: None, or an int from 0 to :data:`MAX_LOGPROBS`."""
    if value is None:
        return None
    k = check_int(who, "logprobs", value, minimum=0)
    if k > MAX_LOGPROBS:
        raise ValueError(f"{who}: logprobs must be at most {MAX_LOGPROBS}, got {k}")
    return k


def token_logprobs(
    logits_row: npt.NDArray[np.floating[Any]], token: int, k: int
) -> tuple[float, tuple[tuple[int, float], ...]]:
    """The log-probability of ``token`` and the ``k`` most likely tokens, from one row of logits.

    The distribution is the model's own: ``log_softmax`` of the raw logits, before temperature,
    top-k, top-p and the repetition penalty change them (as vLLM reports by default), so the
    numbers do not depend on how a token was chosen. The log-sum-exp is taken after subtracting
    the largest logit (no overflow), summed in float64. The ``k`` best are found with
    ``argpartition`` over the blocks of the row that can hold them (linear in the vocabulary) and
    sorted best first (ties among them by lower id). A logit of ``-inf`` gives ``-inf``; logits
    that are all ``-inf``, or hold ``inf`` or NaN, give NaN.

    Args:
        logits_row: the logits of one position, shape ``[vocab]`` (not modified).
        token: the id whose log-probability is wanted (the sampled one).
        k: how many alternatives (0: none).

    Returns:
        ``(logprob of token, ((id, logprob), ...))`` with plain Python numbers.
    """
    x = logits_row
    top = float(x.max())
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):  # NaN in, NaN out
        lse = top + float(np.log(np.sum(np.exp(x - top), dtype=np.float64)))
    logprob = float(x[token]) - lse
    if k <= 0:
        return logprob, ()
    best = _top_ids(x, k) if math.isfinite(top) else _top_ids_plain(x, k)
    vals = x[best]
    order = np.lexsort((best, -vals))  # best first; on a tie the lower id
    return logprob, tuple((int(best[j]), float(vals[j]) - lse) for j in order)


_BLOCK = 128
"""Block size of the top-k pre-filter (:func:`_top_ids`)."""


def _top_ids_plain(x: npt.NDArray[Any], k: int) -> npt.NDArray[np.intp]:
    n = x.shape[0]
    if k >= n:
        return np.arange(n)
    return np.argpartition(x, n - k)[n - k :]


def _top_ids(x: npt.NDArray[Any], k: int) -> npt.NDArray[np.intp]:
    """The ids of the ``k`` largest values (unordered), without partitioning the whole row.

    The row is cut into blocks of :data:`_BLOCK`; one of the ``k`` largest values lies in a block
    whose maximum is at least the ``k``-th largest block maximum (fewer than ``k`` blocks hold a
    larger value), so only those blocks (ties included) and the tail are partitioned: ~10x less
    work than ``argpartition`` over a 49k vocabulary.
    """
    n = x.shape[0]
    whole = n // _BLOCK * _BLOCK
    blocks = whole // _BLOCK
    if k * 4 >= blocks:
        return _top_ids_plain(x, k)
    maxima = x[:whole].reshape(blocks, _BLOCK).max(axis=1)
    kth = np.partition(maxima, blocks - k)[blocks - k]
    chosen = np.flatnonzero(maxima >= kth)
    candidates = (chosen[:, None] * _BLOCK + np.arange(_BLOCK)).ravel()
    if whole < n:
        candidates = np.concatenate([candidates, np.arange(whole, n)])
    picked = _top_ids_plain(x[candidates], k)
    return candidates[picked]


# Logits are clipped to this after the repetition penalty, so that dividing by a tiny penalty or
# temperature cannot turn them into inf (and inf - inf into NaN).
_CLIP = 1e300


class Sampler:
    """Picks token ids from logits; one instance per generation (it holds the random state).

    ``temperature == 0`` is greedy (argmax, after the repetition penalty). Otherwise the logits are
    divided by the temperature, cut to the ``top_k`` best (0 = off) and to the smallest set whose
    probability reaches ``top_p``, and one id is drawn with a ``numpy`` generator seeded by ``seed``
    (the same seed gives the same ids). The repetition penalty follows the CTRL / Hugging Face rule:
    the logit of an id already seen (prompt or generated) is divided by the penalty when positive and
    multiplied by it when negative.
    """

    __slots__ = ("_rng", "_seen", "constraint", "repetition_penalty", "temperature", "top_k", "top_p")

    def __init__(
        self,
        vocab_size: int,
        params: SamplingParams | None = None,
        *,
        seen: Iterable[int] = (),
        constraint: TokenConstraint | None = None,
        **options: Unpack[SamplingOptions],
    ) -> None:
        """Sample as ``params`` says (default ``SamplingParams()``), updated by keyword ``options``
        (``Sampler(n, temperature=0.7)``); ``seen``: the ids the repetition penalty starts from
        (the prompt); ``constraint``: a grammar's state -- the ids it forbids are never chosen
        (their logits are ``-inf`` before the penalty, temperature, top-k and top-p), and each
        chosen id advances it."""
        args = SamplingParams.from_kwargs(params, options, "Sampler")
        self.temperature = args.temperature
        self.top_k = args.top_k
        self.top_p = args.top_p
        self.repetition_penalty = args.repetition_penalty
        self._rng = np.random.default_rng(args.seed)
        self._seen: npt.NDArray[np.bool_] | None = None
        self.constraint = constraint
        if self.repetition_penalty != 1.0:
            self._seen = np.zeros(vocab_size, dtype=np.bool_)
            ids = np.fromiter(seen, dtype=np.int64)
            self._seen[ids[(ids >= 0) & (ids < vocab_size)]] = True

    def __call__(self, logits: npt.NDArray[np.float32]) -> int:
        """Choose an id from one row of logits ``[vocab]`` and remember it for the repetition penalty
        (and the constraint).

        Raises:
            GrammarError: the constraint allows no id (the generation fails with it).
        """
        constraint = self.constraint
        if constraint is not None:
            token = self._choose(constraint.mask(logits))
            constraint.advance(token)
            return token
        return self._choose(logits)

    def _choose(self, logits: npt.NDArray[np.floating[Any]]) -> int:
        if self._seen is None and self.temperature == 0.0:
            return int(np.argmax(logits))
        x = logits.astype(np.float64, copy=True)
        if self._seen is not None:
            seen = self._seen[: x.shape[0]]
            with np.errstate(over="ignore"):
                x[seen] = np.where(
                    x[seen] > 0, x[seen] / self.repetition_penalty, x[seen] * self.repetition_penalty
                )
            np.clip(x, -_CLIP, _CLIP, out=x)
        if self.temperature == 0.0:
            token = int(np.argmax(x))
        else:
            # shifted so the best logit is 0 before dividing: a tiny temperature gives 0 and -inf
            # (argmax), never inf - inf
            with np.errstate(over="ignore"):
                token = self._draw((x - x.max()) / self.temperature)
        if self._seen is not None and token < self._seen.shape[0]:
            self._seen[token] = True
        return token

    def _draw(self, x: npt.NDArray[np.float64]) -> int:
        if 0 < self.top_k < x.shape[0]:
            candidates = np.argpartition(-x, self.top_k - 1)[: self.top_k]
        else:
            candidates = np.arange(x.shape[0])
        vals = x[candidates]
        order = np.argsort(-vals, kind="stable")
        candidates, vals = candidates[order], vals[order]
        probs = np.exp(vals - vals[0])
        probs /= probs.sum()
        if self.top_p < 1.0:
            keep = int(np.searchsorted(np.cumsum(probs), self.top_p) + 1)
            candidates, probs = candidates[:keep], probs[:keep]
            probs = probs / probs.sum()
        cdf = np.cumsum(probs)
        pick = int(np.searchsorted(cdf, self._rng.random() * cdf[-1], side="right"))
        return int(candidates[min(pick, candidates.shape[0] - 1)])
