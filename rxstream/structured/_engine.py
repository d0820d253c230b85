"""The grammar engine: a :class:`Grammar` compiled for a tokenizer, one :class:`TokenConstraint`
per generated row, and the masks of a batch's rows computed together (:func:`fill_masks`).

The engine is `llguidance <https://github.com/guidance-ai/llguidance>`_ (see
``docs/structured.md`` for why): an Earley parser over a derivative-based lexer that computes the
set of allowed tokens of a 49k vocabulary in about 15 µs per step here, with no tokenizer-wide
precomputation per grammar. It comes with the ``onnx`` extra; importing this module does not
import it.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "Grammar",
    "GrammarError",
    "GrammarTokenizer",
    "TokenConstraint",
    "fill_masks",
    "lark_regex",
    "validate_entry",
]


class GrammarError(RuntimeError):
    """The grammar engine refused a token or has no token left to allow (a generation's
    ``on_error``), or a grammar could not be compiled for the model's tokenizer."""


def _llg() -> Any:
    try:
        import llguidance
    except ImportError:
        raise ImportError(
            "constrained decoding needs llguidance, which comes with the 'onnx' extra: "
            "pip install 'rxstream[onnx]'"
        ) from None
    return llguidance


def lark_regex(pattern: str) -> str:
    """``pattern`` (Rust ``regex`` syntax) as a Lark ``/.../`` terminal."""
    return "/" + str(_llg().regex_to_lark(pattern, "")) + "/"


def validate_entry(entry_json: str) -> str:
    """Why one grammar entry (JSON text, an item of llguidance's ``grammars`` list) is bad, or ""
    when the engine accepts it (warnings are not errors)."""
    llg = _llg()
    try:
        is_error, messages = llg.LLMatcher.validate_grammar_with_warnings(f'{{"grammars": [{entry_json}]}}')
    except Exception as exc:  # a malformed entry the validator itself refuses
        return str(exc)
    return str(messages[0]) if is_error and messages else ""


@dataclass(frozen=True)
class Grammar:
    """A whole generation's grammar (llguidance's JSON form: a list of grammars, the first the
    start), as :func:`~rxstream.structured.compose` builds it.

    Attributes:
        text: the grammar, as the engine takes it.
        describe: what it constrains, in words (``"answer: json_schema 'person' after free
            reasoning"``), for logs and errors.
    """

    text: str
    describe: str = ""

    @classmethod
    def of(cls, grammars: Sequence[dict[str, Any]], describe: str = "") -> Grammar:
        """A grammar from its entries (the first is the start), checked by the engine.

        Raises:
            GrammarError: the engine refuses it (the message says why).
        """
        text = json.dumps({"grammars": list(grammars)}, ensure_ascii=False)
        llg = _llg()
        is_error, messages = llg.LLMatcher.validate_grammar_with_warnings(text)
        if is_error:
            raise GrammarError(f"the grammar is refused: {' '.join(str(messages[0]).split())[:300]}")
        return cls(text, describe)


_CACHE_SIZE = 64
"""Compiled grammars kept per tokenizer (the least recently used go first)."""


class GrammarTokenizer:
    """A model's tokenizer as the grammar engine sees it, and the grammars compiled for it.

    Built once per model (about 0.2 s for a 49k vocabulary): ``tokenizer`` is a
    ``tokenizers.Tokenizer``, ``vocab_size`` the width of the model's logits (ids past the
    tokenizer's own are never allowed), ``eos`` the ids that end a generation (allowed where the
    grammar is complete). Thread-safe.
    """

    def __init__(self, tokenizer: Any, vocab_size: int, eos: Iterable[int]) -> None:
        llg = _llg()
        to_str = getattr(tokenizer, "to_str", None)
        if not callable(to_str):
            raise GrammarError(
                f"constrained decoding needs a tokenizers.Tokenizer, got {type(tokenizer).__name__}"
            )
        eos_ids = sorted(set(eos))
        if not eos_ids:
            raise GrammarError("constrained decoding needs the model's end-of-sequence ids")
        self.vocab_size = int(vocab_size)
        self.eos = tuple(eos_ids)
        self._llt = llg.LLTokenizer(to_str(), n_vocab=self.vocab_size, eos_token=eos_ids)
        self._lock = threading.Lock()
        self._compiled: OrderedDict[str, Any] = OrderedDict()
        self.compiles = 0
        """How many grammars were compiled (a cached one is copied, not compiled)."""

    def constraint(self, grammar: Grammar) -> TokenConstraint:
        """A fresh :class:`TokenConstraint` for one row (the compiled grammar is cached).

        Raises:
            GrammarError: the grammar does not compile for this tokenizer.
        """
        with self._lock:
            template = self._compiled.get(grammar.text)
            if template is not None:
                self._compiled.move_to_end(grammar.text)
        if template is None:
            llg = _llg()
            template = llg.LLMatcher(self._llt, grammar.text, log_level=0)
            if template.is_error():
                raise GrammarError(f"the grammar does not compile: {template.get_error()[:300]}")
            with self._lock:
                self.compiles += 1
                self._compiled[grammar.text] = template
                while len(self._compiled) > _CACHE_SIZE:
                    self._compiled.popitem(last=False)
        return TokenConstraint(template.deep_copy(), self.vocab_size, grammar.describe)


class TokenConstraint:
    """One row's grammar state: which ids may come next (:meth:`allowed`), and the id that came
    (:meth:`advance`). Made by :meth:`GrammarTokenizer.constraint`; not thread-safe (one row is
    stepped by one thread at a time)."""

    __slots__ = ("_allowed", "_bits", "_matcher", "_ready", "describe", "vocab_size")

    def __init__(self, matcher: Any, vocab_size: int, describe: str = "") -> None:
        self._matcher = matcher
        self.vocab_size = vocab_size
        self.describe = describe
        self._bits: npt.NDArray[np.int32] = np.zeros((1, (vocab_size + 31) // 32), np.int32)
        self._allowed: npt.NDArray[np.bool_] | None = None
        self._ready = False

    @property
    def finished(self) -> bool:
        """Whether the grammar is complete and takes no more text (only an end-of-sequence id)."""
        return bool(self._matcher.is_stopped())

    @property
    def accepting(self) -> bool:
        """Whether the text so far is a whole match (the generation may end here)."""
        return bool(self._matcher.is_accepting())

    def _fill(self) -> None:
        llg_numpy = _llg_numpy()
        llg_numpy.fill_next_token_bitmask(self._matcher, self._bits)
        self._ready = True
        self._allowed = None

    def allowed(self) -> npt.NDArray[np.bool_]:
        """Which ids may come next (a bool per id of the vocabulary; read-only).

        Raises:
            GrammarError: no id may come next (the engine is in an error state).
        """
        if not self._ready:
            self._fill()
        if self._allowed is None:
            bits = np.unpackbits(self._bits[0].view(np.uint8), bitorder="little")[: self.vocab_size]
            allowed = bits.view(np.bool_)
            if not allowed.any():
                problem = self._matcher.get_error() or "no token can continue the text"
                raise GrammarError(f"constrained decoding stopped: {' '.join(problem.split())[:300]}")
            self._allowed = allowed
        return self._allowed

    def mask(self, logits: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.floating[Any]]:
        """``logits`` with every id the grammar forbids at ``-inf`` (a new array)."""
        allowed = self.allowed()
        width = logits.shape[-1]
        if width == allowed.shape[0]:
            return np.where(allowed, logits, -np.inf).astype(logits.dtype, copy=False)
        out = np.full(width, -np.inf, dtype=logits.dtype)
        n = min(width, allowed.shape[0])
        out[:n] = np.where(allowed[:n], logits[:n], -np.inf)
        return out

    def advance(self, token: int) -> None:
        """The row took ``token``: the next :meth:`allowed` is for the id after it.

        Raises:
            GrammarError: the grammar refuses it.
        """
        self._ready = False
        self._allowed = None
        if not self._matcher.consume_token(int(token)):
            problem = self._matcher.get_error() or f"token {token} is not allowed here"
            raise GrammarError(f"constrained decoding refused a token: {' '.join(problem.split())[:300]}")


def _llg_numpy() -> Any:
    _llg()
    import llguidance.numpy

    return llguidance.numpy


_EXECUTOR: Any = None
_EXECUTOR_LOCK = threading.Lock()


def _executor() -> Any:
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = _llg().LLExecutor()
        return _EXECUTOR


def fill_masks(constraints: Sequence[TokenConstraint]) -> None:
    """Compute the next masks of several rows at once (in parallel, off the GIL): a batch's
    decode step calls this before sampling its rows. One row is computed on the calling thread."""
    todo = [c for c in constraints if not c._ready]
    if len(todo) < 2:
        for c in todo:
            c._fill()
        return
    words = todo[0]._bits.shape[1]
    if any(c._bits.shape[1] != words for c in todo):  # rows of different vocabularies: one by one
        for c in todo:
            c._fill()
        return
    batch = np.zeros((len(todo), words), np.int32)
    _llg_numpy().fill_next_token_bitmask_par(
        _executor(), [(c._matcher, i) for i, c in enumerate(todo)], batch
    )
    for i, c in enumerate(todo):
        c._bits = batch[i : i + 1]
        c._ready = True
        c._allowed = None
