"""Choosing the next token from logits: greedy, temperature, top-k, top-p, repetition penalty, seeded."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

__all__ = ["Sampler", "check_sampling_args"]


def check_sampling_args(
    *,
    max_new_tokens: int,
    temperature: float,
    top_k: int,
    top_p: float,
    repetition_penalty: float,
    seed: int | None,
) -> None:
    """Raise ``ValueError``/``TypeError`` naming the bad argument."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
        raise TypeError(f"generate: max_new_tokens must be an int, got {max_new_tokens!r}")
    if max_new_tokens < 0:
        raise ValueError(f"generate: max_new_tokens must be >= 0, got {max_new_tokens}")
    if not isinstance(temperature, (int, float)) or not temperature >= 0.0:
        raise ValueError(f"generate: temperature must be a number >= 0, got {temperature!r}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ValueError(f"generate: top_k must be an int >= 0 (0 = off), got {top_k!r}")
    if not isinstance(top_p, (int, float)) or not 0.0 < top_p <= 1.0:
        raise ValueError(f"generate: top_p must be in (0, 1], got {top_p!r}")
    if not isinstance(repetition_penalty, (int, float)) or not repetition_penalty > 0.0:
        raise ValueError(f"generate: repetition_penalty must be > 0, got {repetition_penalty!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"generate: seed must be an int or None, got {seed!r}")


class Sampler:
    """Picks token ids from logits; one instance per generation (it holds the random state).

    ``temperature == 0`` is greedy (argmax, after the repetition penalty). Otherwise the logits are
    divided by the temperature, cut to the ``top_k`` best (0 = off) and to the smallest set whose
    probability reaches ``top_p``, and one id is drawn with a ``numpy`` generator seeded by ``seed``
    (the same seed gives the same ids). The repetition penalty follows the CTRL / Hugging Face rule:
    the logit of an id already seen (prompt or generated) is divided by the penalty when positive and
    multiplied by it when negative.
    """

    __slots__ = ("_rng", "_seen", "repetition_penalty", "temperature", "top_k", "top_p")

    def __init__(
        self,
        vocab_size: int,
        *,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        repetition_penalty: float = 1.0,
        seed: int | None = None,
        seen: Iterable[int] = (),
    ) -> None:
        self.temperature = float(temperature)
        self.top_k = int(top_k)
        self.top_p = float(top_p)
        self.repetition_penalty = float(repetition_penalty)
        self._rng = np.random.default_rng(seed)
        self._seen: npt.NDArray[np.bool_] | None = None
        if self.repetition_penalty != 1.0:
            self._seen = np.zeros(vocab_size, dtype=np.bool_)
            ids = np.fromiter(seen, dtype=np.int64)
            self._seen[ids[(ids >= 0) & (ids < vocab_size)]] = True

    def __call__(self, logits: npt.NDArray[np.float32]) -> int:
        """Choose an id from one row of logits ``[vocab]`` and remember it for the repetition penalty."""
        if self._seen is None and self.temperature == 0.0:
            return int(np.argmax(logits))
        x = logits.astype(np.float64, copy=True)
        if self._seen is not None:
            seen = self._seen[: x.shape[0]]
            x[seen] = np.where(
                x[seen] > 0, x[seen] / self.repetition_penalty, x[seen] * self.repetition_penalty
            )
        if self.temperature == 0.0:
            token = int(np.argmax(x))
        else:
            token = self._draw(x / self.temperature)
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
