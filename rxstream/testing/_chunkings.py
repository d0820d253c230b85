"""Ways to cut a text (or its UTF-8 bytes) into the chunks a streaming parser is fed.

A :class:`Chunking` is the input plus the offsets where it is cut; a :class:`Chunker` is a named
way to choose those offsets, both as a ``hypothesis`` strategy (:meth:`Chunker.strategy`) and as a
few fixed chunkings (:meth:`Chunker.fixed`) for runs without ``hypothesis``. :func:`chunkings`
combines several chunkers into one strategy: each example uses a non-empty subset of them and cuts
at every offset any of them chose.

``hypothesis`` is imported only when a strategy is built.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rxstream.detok import DecodeTable, StreamDetokenizer, as_detok_tokenizer

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = [
    "Chunker",
    "Chunking",
    "characters",
    "chunkings",
    "default_chunkers",
    "delimiter_splits",
    "random_cuts",
    "token_boundaries",
    "token_groups",
    "tokens",
    "utf8_splits",
    "whole",
]

Data = str | bytes
"""What a parser is fed: text (``str`` chunks) or UTF-8 bytes (``bytes`` chunks)."""


@dataclass(frozen=True)
class Chunking:
    """``data`` cut at ``cuts`` (sorted offsets into ``data``; an offset given twice, or ``0`` or
    ``len(data)``, makes an empty chunk there). ``source`` names the chunkers that chose the cuts.

    >>> Chunking("<think>", (3, 3, 5)).chunks
    ('<th', '', 'in', 'k>')
    >>> Chunking.of(["ab", "c"])
    Chunking(data='abc', cuts=(2,), source='')
    """

    data: Data
    cuts: tuple[int, ...] = ()
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.data, (str, bytes)):
            raise TypeError(f"Chunking: data must be str or bytes, got {type(self.data).__name__}")
        cuts = tuple(sorted(int(c) for c in self.cuts))
        if cuts and (cuts[0] < 0 or cuts[-1] > len(self.data)):
            raise ValueError(f"Chunking: cuts must lie in 0..{len(self.data)}, got {list(self.cuts)}")
        object.__setattr__(self, "cuts", cuts)

    @classmethod
    def of(cls, chunks: Iterable[Data], source: str = "") -> Chunking:
        """The chunking of the concatenation of ``chunks`` (all ``str`` or all ``bytes``)."""
        parts = list(chunks)
        if not parts:
            raise ValueError("Chunking.of: give at least one chunk")
        kinds = {type(p) for p in parts}
        if kinds not in ({str}, {bytes}):
            raise TypeError(
                f"Chunking.of: chunks must be all str or all bytes, got {sorted(k.__name__ for k in kinds)}"
            )
        data: Data = "".join(parts) if isinstance(parts[0], str) else b"".join(parts)  # type: ignore[arg-type]
        return cls(data, tuple(itertools.accumulate(len(p) for p in parts[:-1])), source)

    @property
    def chunks(self) -> tuple[Data, ...]:
        """The chunks, in order; they concatenate to ``data``."""
        bounds = (0, *self.cuts, len(self.data))
        return tuple(self.data[a:b] for a, b in itertools.pairwise(bounds))

    def truncated(self, end: int) -> Chunking:
        """The stream ended at offset ``end`` (a cut or ``len(data)``): ``data[:end]`` with the cuts
        before it."""
        return Chunking(self.data[:end], tuple(c for c in self.cuts if c < end), self.source)

    def describe(self) -> str:
        """The chunks as a readable list (``'<th' | 'ink>'``)."""
        return " | ".join(repr(c) for c in self.chunks)


@dataclass(frozen=True)
class Chunker:
    """A named way to cut an input: :meth:`strategy` draws cut offsets with ``hypothesis``,
    :meth:`fixed` lists the deterministic chunkings worth always running. Build one with
    :func:`whole`, :func:`characters`, :func:`tokens`, :func:`token_groups`,
    :func:`delimiter_splits`, :func:`utf8_splits` or :func:`random_cuts`."""

    name: str
    draw: Callable[[Data], SearchStrategy[tuple[int, ...]]] = field(repr=False)
    fixed_cuts: Callable[[Data], Iterable[tuple[int, ...]]] = field(repr=False)

    def strategy(self, data: Data) -> SearchStrategy[Chunking]:
        """A ``hypothesis`` strategy of chunkings of ``data``."""
        return self.draw(data).map(lambda cuts: Chunking(data, cuts, self.name))

    def fixed(self, data: Data) -> list[Chunking]:
        """The deterministic chunkings of ``data`` (possibly none)."""
        return [Chunking(data, cuts, self.name) for cuts in dict.fromkeys(self.fixed_cuts(data))]


def _st() -> Any:
    try:
        from hypothesis import strategies
    except ImportError as exc:  # pragma: no cover - hypothesis is in the test extra
        raise ImportError(
            "rxstream.testing: drawing chunkings needs hypothesis (pip install hypothesis)"
        ) from exc
    return strategies


def _just(cuts: Callable[[Data], tuple[int, ...]]) -> Callable[[Data], SearchStrategy[tuple[int, ...]]]:
    return lambda data: _st().just(cuts(data))


def _subsets(points: Callable[[Data], Sequence[int]]) -> Callable[[Data], SearchStrategy[tuple[int, ...]]]:
    """Draw a non-empty subset of ``points(data)`` (shrinking towards one point), or no cut."""

    def draw(data: Data) -> SearchStrategy[tuple[int, ...]]:
        st = _st()
        pts = sorted(set(points(data)))
        if not pts:
            return st.just(())  # type: ignore[no-any-return]
        return st.lists(st.sampled_from(pts), min_size=1, unique=True).map(lambda c: tuple(sorted(c)))  # type: ignore[no-any-return]

    return draw


def _singles(points: Callable[[Data], Sequence[int]]) -> Callable[[Data], Iterable[tuple[int, ...]]]:
    return lambda data: [(p,) for p in sorted(set(points(data)))]


# ------------------------------------------------------------------ the chunkers
def whole() -> Chunker:
    """The whole input as one chunk (what a batch parse sees)."""
    return Chunker("whole", _just(lambda data: ()), lambda data: [()])


def characters() -> Chunker:
    """One chunk per character (per byte for ``bytes`` input): every cut point at once."""

    def cuts(data: Data) -> tuple[int, ...]:
        return tuple(range(1, len(data)))

    return Chunker("characters", _just(cuts), lambda data: [cuts(data)])


def token_boundaries(tokenizer: Any, text: str) -> tuple[int, ...]:
    """Character offsets in ``text`` where the tokens of ``tokenizer.encode(text)`` end, as a
    streaming detokenizer emits them: each token adds the text
    :class:`rxstream.StreamDetokenizer` (the ``detokenize`` operator's engine, special tokens kept)
    gives for it, so a token that ends inside a UTF-8 character adds nothing and the character
    comes whole with the token that completes it. Offsets repeat for such tokens; ``0`` is left out
    and ``len(text)`` ends the list when ``text`` is not empty.

    ``tokenizer``: a ``tokenizers.Tokenizer``, a ``transformers`` tokenizer, a ``tiktoken.Encoding``,
    a :class:`rxstream.TokenizerProtocol`, or any object with ``encode(text)`` (a list of ids, or
    an object with ``.ids``) and ``decode(ids)``.

    Raises:
        ValueError: the tokens do not give ``text`` back (a normalizer changed it, an unknown
            character became an unknown token...): the chunks would not be a chunking of ``text``.
    """
    ids = _encode(tokenizer, text)
    try:
        adapted = as_detok_tokenizer(tokenizer)
    except TypeError:
        adapted = _DecodeOnly(tokenizer)
    det = StreamDetokenizer(adapted, skip_special_tokens=False)
    ends: list[int] = []
    pieces: list[str] = []
    done = 0
    for i in ids:
        pieces.append(det.push(i))
        done += len(pieces[-1])
        ends.append(done)
    pieces.append(det.finish())
    if ends:
        ends[-1] += len(pieces[-1])
    if "".join(pieces) != text:
        decoded = adapted.decode(ids, False)
        why = "decode(encode(text)) differs from text" if decoded != text else "its streamed text differs"
        raise ValueError(
            f"tokens: the tokenizer does not give the text back ({why}: {decoded[:80]!r}... for "
            f"{text[:80]!r}...); per-token chunks need a tokenizer that round-trips the text"
        )
    return tuple(ends)


def _encode(tokenizer: Any, text: str) -> list[int]:
    for kwargs in ({"add_special_tokens": False}, {"allowed_special": "all"}, {}):
        try:
            encoded = tokenizer.encode(text, **kwargs)
        except TypeError:
            continue
        ids = getattr(encoded, "ids", encoded)
        return [int(i) for i in ids]
    raise TypeError(
        f"tokens: {type(tokenizer).__name__}.encode(text) failed; expected a tokenizer with encode/decode"
    )


class _DecodeOnly:
    """A :class:`~rxstream.TokenizerProtocol` over any object with ``decode(ids)``: no table, so the
    detokenizer decodes a short window of ids."""

    def __init__(self, tokenizer: Any) -> None:
        if not callable(getattr(tokenizer, "decode", None)):
            raise TypeError(f"tokens: {type(tokenizer).__name__} has no decode(ids)")
        self.tokenizer = tokenizer

    @property
    def vocab_size(self) -> int:
        size = getattr(self.tokenizer, "vocab_size", None)
        return int(size) if isinstance(size, int) else 2**31 - 1

    def decode(self, ids: Sequence[int], skip_special_tokens: bool) -> str:
        try:
            return str(self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens))
        except TypeError:
            return str(self.tokenizer.decode(list(ids)))

    def decode_table(self, skip_special_tokens: bool) -> DecodeTable | None:
        return None


def _char_to_offset(data: Data) -> Callable[[int], int]:
    """Map a character offset of ``data`` (decoded as UTF-8 for bytes) to an offset in ``data``."""
    if isinstance(data, str):
        return lambda i: i
    text = data.decode("utf-8")
    starts = list(itertools.accumulate((len(ch.encode("utf-8")) for ch in text), initial=0))
    return lambda i: starts[i]


def _token_cuts(tokenizer: Any) -> Callable[[Data], tuple[int, ...]]:
    cache: dict[Data, tuple[int, ...]] = {}

    def cuts(data: Data) -> tuple[int, ...]:
        if data not in cache:
            text = data if isinstance(data, str) else data.decode("utf-8")
            to_offset = _char_to_offset(data)
            ends = token_boundaries(tokenizer, text)
            cache[data] = tuple(sorted({to_offset(e) for e in ends} - {0, len(data)}))
        return cache[data]

    return cuts


def tokens(tokenizer: Any) -> Chunker:
    """One chunk per token of ``tokenizer`` (see :func:`token_boundaries`; tokens that add no text
    add no empty chunk). For ``bytes`` input the cuts are the same characters' byte offsets."""
    cuts = _token_cuts(tokenizer)
    return Chunker("tokens", _just(cuts), lambda data: [cuts(data)])


def token_groups(tokenizer: Any, max_group: int = 4) -> Chunker:
    """Runs of 1..``max_group`` consecutive tokens per chunk (the multi-token deltas servers send);
    drawn group sizes shrink towards single tokens. Fixed: every group of exactly 2..``max_group``."""
    if max_group < 2:
        raise ValueError(f"token_groups: max_group must be >= 2, got {max_group}")
    token_cuts = _token_cuts(tokenizer)

    def grouped(bounds: Sequence[int], sizes: Iterable[int]) -> tuple[int, ...]:
        out: list[int] = []
        at = 0
        for size in sizes:
            at += size
            if at > len(bounds):
                break
            out.append(bounds[at - 1])
        return tuple(out)

    def draw(data: Data) -> SearchStrategy[tuple[int, ...]]:
        st = _st()
        bounds = token_cuts(data)

        @st.composite  # type: ignore[untyped-decorator]
        def groups(draw: Any) -> tuple[int, ...]:
            sizes: list[int] = []
            while sum(sizes) <= len(bounds):  # len(bounds) + 1 tokens with text
                sizes.append(draw(st.integers(1, max_group)))
            return grouped(bounds, sizes)

        return groups()  # type: ignore[no-any-return]

    def fixed(data: Data) -> Iterator[tuple[int, ...]]:
        bounds = token_cuts(data)
        for k in range(2, max_group + 1):
            yield grouped(bounds, itertools.repeat(k, len(bounds) // k + 1))

    return Chunker(f"token_groups(<={max_group})", draw, fixed)


def _delimiter_points(delimiters: Sequence[Data]) -> Callable[[Data], list[int]]:
    def points(data: Data) -> list[int]:
        out: list[int] = []
        for d in delimiters:
            needle: Any = d
            if isinstance(data, bytes) and isinstance(d, str):
                needle = d.encode("utf-8")
            elif isinstance(data, str) and isinstance(d, bytes):
                needle = d.decode("utf-8")
            start = data.find(needle)
            while start != -1:
                out.extend(range(start + 1, start + len(needle)))
                start = data.find(needle, start + 1)
        return out

    return points


def delimiter_splits(*delimiters: Data) -> Chunker:
    """Cuts inside the occurrences of ``delimiters`` in the input (``</think>`` as ``</th`` +
    ``ink>``). Drawn: a non-empty subset of all such positions; fixed: each one alone."""
    if not delimiters or any(not isinstance(d, (str, bytes)) or len(d) < 2 for d in delimiters):
        raise ValueError(f"delimiter_splits: give delimiters of at least 2 characters, got {delimiters!r}")
    points = _delimiter_points(delimiters)
    return Chunker("delimiter_splits", _subsets(points), _singles(points))


def _utf8_points(data: Data) -> list[int]:
    if isinstance(data, str):
        return []
    return [i for i in range(1, len(data)) if 0x80 <= data[i] < 0xC0]


def utf8_splits() -> Chunker:
    """Cuts inside multi-byte UTF-8 characters (``bytes`` input only; none for ``str``). Drawn: a
    non-empty subset of those positions; fixed: each one alone."""
    return Chunker("utf8_splits", _subsets(_utf8_points), _singles(_utf8_points))


def random_cuts(max_cuts: int = 24) -> Chunker:
    """Up to ``max_cuts`` random cut offsets (repeats and the two ends make empty chunks). No fixed
    chunkings."""

    def draw(data: Data) -> SearchStrategy[tuple[int, ...]]:
        st = _st()
        offsets = st.lists(st.integers(0, len(data)), max_size=max_cuts)
        return offsets.map(lambda c: tuple(sorted(c)))  # type: ignore[no-any-return]

    return Chunker(f"random_cuts(<={max_cuts})", draw, lambda data: [])


def default_chunkers(
    data: Data, *, tokenizer: Any = None, delimiters: Iterable[Data] = (), max_group: int = 4
) -> list[Chunker]:
    """The chunkers used when none are given: :func:`whole`, :func:`characters`,
    :func:`random_cuts`; :func:`tokens` and :func:`token_groups` with a ``tokenizer``;
    :func:`delimiter_splits` with ``delimiters``; :func:`utf8_splits` for ``bytes`` input."""
    out = [whole(), characters(), random_cuts()]
    if tokenizer is not None:
        out += [tokens(tokenizer), token_groups(tokenizer, max_group)]
    delims = tuple(delimiters)
    if delims:
        out.append(delimiter_splits(*delims))
    if isinstance(data, bytes):
        out.append(utf8_splits())
    return out


def chunkings(data: Data, chunkers: Sequence[Chunker] | None = None) -> SearchStrategy[Chunking]:
    """A ``hypothesis`` strategy of chunkings of ``data``: each example picks a non-empty subset
    of ``chunkers`` (default: ``whole``, ``characters``, ``random_cuts``) and cuts wherever any of
    them cut (a repeated offset keeps the most repeats any chunker gave it). It shrinks towards
    fewer chunkers and fewer cuts. Use it in your own ``@given`` test::

        @given(st.data())
        def test_my_parser(data):
            chunking = data.draw(chunkings(TEXT, [tokens(tok), delimiter_splits("</think>")]))
            check_chunking(chunking, factory=MyParser, reference=parse_batch)
    """
    st = _st()
    chosen = list(chunkers) if chunkers is not None else [whole(), characters(), random_cuts()]
    if not chosen:
        raise ValueError("chunkings: give at least one chunker")
    draws = [c.draw(data) for c in chosen]  # built once: token boundaries etc. are computed here

    @st.composite  # type: ignore[untyped-decorator]
    def combined(draw: Any) -> Chunking:
        picks = draw(st.lists(st.integers(0, len(chosen) - 1), min_size=1, max_size=len(chosen), unique=True))
        counts: Counter[int] = Counter()
        for i in sorted(picks):
            for cut, n in Counter(draw(draws[i])).items():
                counts[cut] = max(counts[cut], n)
        cuts = tuple(sorted(counts.elements()))
        return Chunking(data, cuts, "+".join(chosen[i].name for i in sorted(picks)))

    return combined()  # type: ignore[no-any-return]
