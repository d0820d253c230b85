"""How to sample a generation (:class:`SamplingParams`): one frozen, validated value that the
CLI, the server and every backend pass along instead of re-typing and re-checking keyword lists."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

__all__ = ["SamplingOptions", "SamplingParams", "SamplingParamsError", "SamplingParamsTypeError"]


class SamplingParamsError(ValueError):
    """A bad sampling parameter: ``field`` names it (so a face can name its own spelling of it,
    like ``--top-p`` or ``"top_p"``) and ``reason`` says what is wrong. The message is
    ``"{who}: {field} {reason}"`` (``who`` the call that was given it, when known)."""

    def __init__(self, field: str, reason: str, who: str = "") -> None:
        super().__init__(f"{who}: {field} {reason}" if who else f"{field} {reason}")
        self.field = field
        self.reason = reason
        self.who = who

    def named(self, who: str) -> SamplingParamsError:
        """The same error (same class), its message starting with ``who``."""
        return type(self)(self.field, self.reason, who)


class SamplingParamsTypeError(SamplingParamsError, TypeError):
    """A sampling parameter of the wrong type (also a ``TypeError``)."""


def _is_bool(value: Any) -> bool:
    kind = type(value)
    return isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"))


def _int(name: str, value: Any, lo: int, hi: int | None = None) -> int:
    if _is_bool(value) or not isinstance(value, numbers.Integral):
        raise SamplingParamsTypeError(name, f"must be an int, got {value!r} ({type(value).__name__})")
    number = int(value)
    if number < lo or (hi is not None and number > hi):
        bound = f">= {lo}" if hi is None else f"between {lo} and {hi}"
        raise SamplingParamsError(name, f"must be {bound}, got {number}")
    return number


def _float(name: str, value: Any) -> float:
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise SamplingParamsTypeError(name, f"must be a number, got {value!r} ({type(value).__name__})")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise SamplingParamsError(name, f"must be a finite number, got {value!r}")
    return number


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """How one generation samples and when it ends. Built once, checked once, passed everywhere.

    Attributes:
        max_new_tokens: the budget of generated ids (``Finish(LENGTH)`` when spent; 0 generates
            nothing).
        temperature: 0 is greedy (argmax); above 0 the logits are divided by it and sampled.
        top_k: sample among the ``top_k`` most likely ids (0: all).
        top_p: sample among the smallest set of ids whose probability reaches ``top_p`` (1: all).
        repetition_penalty: divide positive (multiply negative) logits of ids already seen by this
            (1: off).
        seed: seeds the random generator (None: a fresh seed each generation); the same seed and
            logits give the same samples.
        stop_token_ids: ids that end the generation (not emitted; ``Finish(STOP, stop=id)``).
        ignore_eos: keep generating past the model's end-of-sequence ids.

    Raises:
        SamplingParamsError: (a ``ValueError``) naming the bad field. numpy integers and floats are
            accepted and stored as Python ``int``/``float``; ``bool`` is not a number here.
    """

    max_new_tokens: int = 256
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        values: dict[str, Any] = {
            "max_new_tokens": _int("max_new_tokens", self.max_new_tokens, 0),
            "temperature": _float("temperature", self.temperature),
            "top_k": _int("top_k", self.top_k, 0),
            "top_p": _float("top_p", self.top_p),
            "repetition_penalty": _float("repetition_penalty", self.repetition_penalty),
            "seed": None if self.seed is None else _int("seed", self.seed, 0),
        }
        if values["temperature"] < 0:
            raise SamplingParamsError("temperature", f"must be >= 0 (0 = greedy), got {self.temperature!r}")
        if not 0.0 < values["top_p"] <= 1.0:
            raise SamplingParamsError("top_p", f"must be in (0, 1], got {self.top_p!r}")
        if values["repetition_penalty"] <= 0:
            raise SamplingParamsError(
                "repetition_penalty", f"must be > 0 (1 = off), got {self.repetition_penalty!r}"
            )
        stops = self.stop_token_ids
        if isinstance(stops, str | bytes) or not isinstance(stops, Iterable):
            raise SamplingParamsTypeError("stop_token_ids", f"must be a sequence of token ids, got {stops!r}")
        values["stop_token_ids"] = tuple(_int("stop_token_ids", i, 0) for i in stops)
        if not _is_bool(self.ignore_eos):
            raise SamplingParamsTypeError("ignore_eos", f"must be a bool, got {self.ignore_eos!r}")
        values["ignore_eos"] = bool(self.ignore_eos)
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @property
    def greedy(self) -> bool:
        """Whether the next id is always the most likely one."""
        return self.temperature == 0.0

    def replace(self, **changes: Any) -> SamplingParams:
        """A copy with ``changes`` (checked like a new value)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        """The parameter names, in order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_kwargs(
        cls,
        params: SamplingParams | None,
        kwargs: Mapping[str, Any],
        who: str,
        default: SamplingParams | None = None,
    ) -> SamplingParams:
        """``params`` (or ``default``, or ``SamplingParams()``) updated by keyword arguments: the
        keyword form of ``generate(...)``.

        Raises:
            TypeError: an unknown keyword or a ``params`` that is no ``SamplingParams``, naming
                ``who``.
            SamplingParamsError: a bad value; the message starts with ``who`` (a
                :class:`SamplingParamsTypeError` for a value of the wrong type).
        """
        unknown = sorted(set(kwargs) - set(cls.fields()))
        if unknown:
            raise TypeError(f"{who}: unexpected keyword argument(s) {', '.join(unknown)}")
        base = params if params is not None else (default if default is not None else cls())
        if not isinstance(base, SamplingParams):
            raise TypeError(f"{who}: params must be a SamplingParams, got {type(base).__name__}")
        try:
            return base.replace(**kwargs) if kwargs else base
        except SamplingParamsError as exc:
            raise exc.named(who) from None


class SamplingOptions(TypedDict, total=False):
    """The keyword form of :class:`SamplingParams` (``generate(ids, temperature=0.7)``), for
    ``**kwargs: Unpack[SamplingOptions]`` signatures."""

    max_new_tokens: int
    temperature: float
    top_k: int
    top_p: float
    repetition_penalty: float
    seed: int | None
    stop_token_ids: Iterable[int]
    ignore_eos: bool
