"""How to sample a generation (:class:`SamplingParams`): one frozen, validated value that the
CLI, the server and every backend pass along instead of re-typing and re-checking keyword lists.

Each field is declared once, in the dataclass, with its :class:`SamplingField` (type, range, the
CLI option and the request field that set it, help text); :meth:`SamplingParams.table` lists
them, and the faces derive their options, request parsing, banner and reported defaults from it.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, TypeVar

__all__ = [
    "Bounds",
    "SamplingField",
    "SamplingOptions",
    "SamplingParams",
    "SamplingParamsError",
    "SamplingParamsTypeError",
]

_T = TypeVar("_T")


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


def _number_text(x: float) -> str:
    return str(int(x)) if isinstance(x, int) else f"{x:g}"


@dataclass(frozen=True, slots=True)
class Bounds:
    """A range of numbers: ``lo`` (``> lo`` when ``lo_open``) to ``hi`` (None: unbounded)."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False

    def holds(self, x: float) -> bool:
        if self.lo is not None and (x < self.lo or (self.lo_open and x == self.lo)):
            return False
        return self.hi is None or x <= self.hi

    def text(self, whole: bool) -> str:
        """In words: ``>= 0``, ``> 0``, ``between 0 and 5`` (ints), ``in (0, 1]`` (numbers)."""
        lo, hi = self.lo, self.hi
        if hi is None:
            return "" if lo is None else f"{'>' if self.lo_open else '>='} {_number_text(lo)}"
        if lo is None:
            return f"<= {_number_text(hi)}"
        if whole:
            return f"between {_number_text(lo)} and {_number_text(hi)}"
        return f"in {'(' if self.lo_open else '['}{_number_text(lo)}, {_number_text(hi)}]"


Kind = Literal["int", "float", "bool", "ids"]
"""A field's type: an int, a (finite) number, a bool, or a sequence of token ids."""


@dataclass(frozen=True, slots=True)
class SamplingField:
    """One row of the sampling table: what a :class:`SamplingParams` field is and how each face
    spells it. Declared next to the field (see :meth:`SamplingParams.table`).

    Attributes:
        kind: the type (see :data:`Kind`).
        domain: the values :class:`SamplingParams` accepts (checked at construction).
        limit: the narrower range the faces accept from a user (the CLI and the server's
            requests; OpenAI's ranges), or None for the domain.
        note: said after the range when a value is out of it (``(0 = greedy)``).
        flag: the command-line option (``--top-p``), or None for no option.
        json: the request body's field (``top_p``), or None when requests cannot set it.
        json_off: a request value that means the field's default (vLLM's ``top_k: -1``).
        help: the option's help text.
        face_default: the faces default to this field's default (else to the model's own).
        hf: read from a model's ``generation_config.json`` as a sampling field (``do_sample``
            decides whether it applies).
        greedy_too: still applies under greedy decoding.
        shown: in the start-up banner: ``sampling`` always when sampling, ``changed`` when
            it differs from its default, ``""`` never.
        name: the field's name (filled in from the dataclass).
        default: the field's default (filled in from the dataclass).
    """

    kind: Kind
    domain: Bounds = Bounds()
    limit: Bounds | None = None
    note: str = ""
    flag: str | None = None
    json: str | None = None
    json_off: int | None = None
    help: str = ""
    face_default: bool = False
    hf: bool = False
    greedy_too: bool = False
    shown: Literal["", "sampling", "changed"] = ""
    name: str = ""
    default: Any = None

    @property
    def dest(self) -> str | None:
        """The attribute argparse stores the option in (``top_p`` for ``--top-p``)."""
        return None if self.flag is None else self.flag.removeprefix("--").replace("-", "_")

    def check(self, value: Any, *, limited: bool = False, hi: float | None = None) -> Any:
        """``value`` checked against the field's type and domain (with ``limited``: also against
        the faces' :attr:`limit`, its upper end ``hi`` when given), as the field stores it.

        Raises:
            SamplingParamsError: naming the field (a :class:`SamplingParamsTypeError` for a
                value of the wrong type).
        """
        if value is None and self.default is None:
            return None
        if self.kind == "bool":
            if not _is_bool(value):
                raise SamplingParamsTypeError(self.name, f"must be a bool, got {value!r}")
            return bool(value)
        if self.kind == "ids":
            if isinstance(value, str | bytes) or not isinstance(value, Iterable):
                raise SamplingParamsTypeError(self.name, f"must be a sequence of token ids, got {value!r}")
            return tuple(self._number(i, limited, hi) for i in value)
        return self._number(value, limited, hi)

    def _number(self, value: Any, limited: bool, hi: float | None) -> Any:
        whole = self.kind != "float"
        number: float
        shown: Any
        if whole:
            if _is_bool(value) or not isinstance(value, numbers.Integral):
                raise SamplingParamsTypeError(
                    self.name, f"must be an int, got {value!r} ({type(value).__name__})"
                )
            number = shown = int(value)
        else:
            if _is_bool(value) or not isinstance(value, numbers.Real):
                raise SamplingParamsTypeError(
                    self.name, f"must be a number, got {value!r} ({type(value).__name__})"
                )
            try:
                number = float(value)
            except OverflowError:
                number = math.inf
            if not math.isfinite(number):
                raise SamplingParamsError(self.name, f"must be a finite number, got {value!r}")
            shown = value
        ranges = [self.domain]
        if limited:
            limit = self.limit if self.limit is not None else self.domain
            ranges.append(limit if hi is None else dataclasses.replace(limit, hi=hi))
        for bounds in ranges:
            if not bounds.holds(number):
                note = f" {self.note}" if self.note and bounds is self.domain else ""
                raise SamplingParamsError(self.name, f"must be {bounds.text(whole)}{note}, got {shown!r}")
        return number


def _field(default: _T, spec: SamplingField) -> _T:
    """A dataclass field with its row of the table."""
    return dataclasses.field(default=default, metadata={"sampling": spec})


_BY_MODEL = "default: the model's"


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

    Each field's :class:`SamplingField` (its range, its CLI option and request field) is declared
    with it; :meth:`table` lists them.

    Raises:
        SamplingParamsError: (a ``ValueError``) naming the bad field. numpy integers and floats are
            accepted and stored as Python ``int``/``float``; ``bool`` is not a number here.
    """

    max_new_tokens: int = _field(
        256,
        SamplingField(
            "int",
            Bounds(0),
            limit=Bounds(1),
            flag="--max-tokens",
            json="max_tokens",
            face_default=True,
            help="token budget (default 256)",
        ),
    )
    temperature: float = _field(
        0.0,
        SamplingField(
            "float",
            Bounds(0.0),
            limit=Bounds(0.0, 2.0),
            note="(0 = greedy)",
            flag="--temperature",
            json="temperature",
            help="0 = greedy; default: the model's own (its generation_config.json, else greedy)",
            hf=True,
            shown="sampling",
        ),
    )
    top_k: int = _field(
        0,
        SamplingField(
            "int",
            Bounds(0),
            limit=Bounds(0, 1_000_000),
            flag="--top-k",
            json="top_k",
            json_off=-1,
            help=f"sample from the k best ids (0 = off; {_BY_MODEL})",
            hf=True,
            shown="changed",
        ),
    )
    top_p: float = _field(
        1.0,
        SamplingField(
            "float",
            Bounds(0.0, 1.0, lo_open=True),
            flag="--top-p",
            json="top_p",
            help=f"nucleus sampling mass (1.0 = off; {_BY_MODEL})",
            hf=True,
            shown="sampling",
        ),
    )
    repetition_penalty: float = _field(
        1.0,
        SamplingField(
            "float",
            Bounds(0.0, lo_open=True),
            limit=Bounds(0.0, 10.0, lo_open=True),
            note="(1 = off)",
            flag="--repetition-penalty",
            json="repetition_penalty",
            help=f"1.0 = off ({_BY_MODEL})",
            hf=True,
            greedy_too=True,
            shown="changed",
        ),
    )
    seed: int | None = _field(
        None,
        SamplingField(
            "int",
            Bounds(0),
            limit=Bounds(0, 2**63 - 1),
            flag="--seed",
            json="seed",
            help="random seed for reproducible sampling",
        ),
    )
    stop_token_ids: tuple[int, ...] = _field((), SamplingField("ids", Bounds(0)))
    ignore_eos: bool = _field(False, SamplingField("bool"))

    def __post_init__(self) -> None:
        values = {spec.name: spec.check(getattr(self, spec.name)) for spec in _TABLE}
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
        return tuple(spec.name for spec in _TABLE)

    @classmethod
    def table(cls) -> tuple[SamplingField, ...]:
        """Every field's :class:`SamplingField`, in order: the one table the faces (options,
        request parsing, banner) and the backends (``generation_config.json``) read."""
        return _TABLE

    @classmethod
    def requested(cls, given: Mapping[str, Any], base: SamplingParams | None = None) -> SamplingParams:
        """``base`` (default ``SamplingParams()``) with the values a user asked for through a face
        (field name -> value), each checked against its field's :attr:`SamplingField.limit` too.

        Raises:
            SamplingParamsError: naming the field.
        """
        checked = {name: _BY_NAME[name].check(value, limited=True) for name, value in given.items()}
        return (base if base is not None else cls()).replace(**checked)

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


_TABLE: tuple[SamplingField, ...] = tuple(
    dataclasses.replace(f.metadata["sampling"], name=f.name, default=f.default)
    for f in dataclasses.fields(SamplingParams)
)
_BY_NAME = {spec.name: spec for spec in _TABLE}


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
