"""The streaming-parser parity kit (``rxstream.testing``): it passes correct parsers, catches
buggy ones with a minimized chunking, drives Rx operators, and cuts by real tokenizers' tokens."""

from __future__ import annotations

import codecs
import doctest
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import Observable
from reactivex import operators as ops
from tokenizers import Tokenizer

import rxstream.testing._chunkings as chunkings_module
import rxstream.testing._merge as merge_module
import rxstream.testing._parity as parity_module
from rxstream import replace_text, stop_text
from rxstream.operators import replace, stop
from rxstream.testing import (
    Chunking,
    Parity,
    ParityError,
    characters,
    check_chunking,
    check_parity,
    check_parity_exhaustive,
    chunkings,
    delimiter_splits,
    merge_text,
    random_cuts,
    token_boundaries,
    token_groups,
    tokens,
    utf8_splits,
    whole,
)
from rxstream.testing import tokenizers as trained

ROOT = Path(__file__).resolve().parents[2]
QUICK = settings(max_examples=60, derandomize=True)
OPEN, CLOSE = "<think>", "</think>"
TEXT = "Hi <think>a < b</think> so <b>ok</b> <think>x</think>."
Event = tuple[str, str]


# ------------------------------------------------------------------ parsers under test
def split_batch(text: str) -> list[Event]:
    """Batch reference: ("text", ...) outside <think>...</think>, ("think", ...) inside."""
    out: list[Event] = []
    pos, inside = 0, False
    while True:
        tag = CLOSE if inside else OPEN
        at = text.find(tag, pos)
        kind = "think" if inside else "text"
        if at < 0:
            out.append((kind, text[pos:]))
            return out
        out.append((kind, text[pos:at]))
        pos, inside = at + len(tag), not inside


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``tag``."""
    for k in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:k]):
            return k
    return 0


class TagSplitter:
    """A correct streaming splitter: holds only what could still be the start of a tag."""

    def __init__(self, drop_held_at_finish: bool = False) -> None:
        self.buf = ""
        self.inside = False
        self.drop_held_at_finish = drop_held_at_finish

    @property
    def kind(self) -> str:
        return "think" if self.inside else "text"

    def feed(self, chunk: str) -> list[Event]:
        self.buf += chunk
        out: list[Event] = []
        while True:
            tag = CLOSE if self.inside else OPEN
            at = self.buf.find(tag)
            if at >= 0:
                out.append((self.kind, self.buf[:at]))
                self.buf = self.buf[at + len(tag) :]
                self.inside = not self.inside
                continue
            keep = _partial_suffix(self.buf, tag)
            out.append((self.kind, self.buf[: len(self.buf) - keep]))
            self.buf = self.buf[len(self.buf) - keep :]
            return out

    def finish(self) -> list[Event]:
        held, self.buf = self.buf, ""
        return [] if self.drop_held_at_finish else [(self.kind, held)]


class ChunkLocalSplitter:
    """Buggy: finds a tag only when one chunk holds all of it."""

    def __init__(self) -> None:
        self.inside = False

    def feed(self, chunk: str) -> list[Event]:
        out: list[Event] = []
        while True:
            tag = CLOSE if self.inside else OPEN
            head, found, chunk = chunk.partition(tag)
            out.append(("think" if self.inside else "text", head))
            if not found:
                return out
            self.inside = not self.inside

    def finish(self) -> list[Event]:
        return []


class EagerRetractingSplitter:
    """Buggy: emits text at once, and when a tag turns up in it, emits ("retract", n) to take the
    last n characters back. Its final result is right; what it showed along the way was not."""

    def __init__(self) -> None:
        self.inside = False
        self.since_tag = ""

    def feed(self, chunk: str) -> list[Any]:
        out: list[Any] = [("think" if self.inside else "text", chunk)]
        self.since_tag += chunk
        while True:
            tag = CLOSE if self.inside else OPEN
            at = self.since_tag.find(tag)
            if at < 0:
                return out
            out.append(("retract", len(self.since_tag) - at))
            self.since_tag = self.since_tag[at + len(tag) :]
            self.inside = not self.inside
            out.append(("think" if self.inside else "text", self.since_tag))

    def finish(self) -> list[Any]:
        return []


def apply_retractions(events: Iterable[Any]) -> list[Any]:
    """normalize for EagerRetractingSplitter: apply ("retract", n), then merge text."""
    merged: list[Event] = []
    for kind, value in events:
        if kind != "retract":
            merged.append((kind, value))
            continue
        n = value
        while n:
            last_kind, last = merged.pop()
            cut = min(n, len(last))
            n -= cut
            if last[: len(last) - cut]:
                merged.append((last_kind, last[: len(last) - cut]))
    return merge_text()(merged)


def inside_a_tag(text: str, cut: int) -> bool:
    return any(0 < cut - at < len(tag) for tag in (OPEN, CLOSE) for at in _find_all(text, tag))


def _find_all(text: str, tag: str) -> list[int]:
    out, at = [], text.find(tag)
    while at >= 0:
        out.append(at)
        at = text.find(tag, at + 1)
    return out


# ------------------------------------------------------------------ correct parsers pass
def test_a_correct_splitter_passes_every_check() -> None:
    check_parity(TEXT, factory=TagSplitter, reference=split_batch, delimiters=[OPEN, CLOSE], settings=QUICK)
    check_parity_exhaustive(TEXT, factory=TagSplitter, reference=split_batch, delimiters=[OPEN, CLOSE])


def test_the_module_docstrings_run() -> None:
    for module in (parity_module, merge_module, chunkings_module):
        result = doctest.testmod(module, raise_on_error=False)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_without_a_reference_the_whole_input_run_is_the_reference() -> None:
    check_parity(TEXT, factory=TagSplitter, settings=QUICK)
    with pytest.raises(ParityError) as err:
        check_parity_exhaustive(TEXT, factory=ChunkLocalSplitter, max_cuts=1)
    assert "the parser's own whole-input run" in str(err.value)


# ------------------------------------------------------------------ buggy parsers are caught
def test_catches_a_splitter_that_sees_only_tags_inside_one_chunk() -> None:
    with pytest.raises(ParityError) as err:
        check_parity(TEXT, factory=ChunkLocalSplitter, reference=split_batch, settings=QUICK)
    e = err.value
    assert e.check == "parity"
    # found with one chunk per character, minimized to two chunks cut inside a tag
    assert e.found.source == "characters" and len(e.found.chunks) == len(TEXT)
    assert len(e.chunking.chunks) == 2 and inside_a_tag(TEXT, e.chunking.cuts[0])
    assert e.expected == merge_text()(split_batch(TEXT))
    message = str(e)
    assert e.chunking.describe() in message
    assert f"minimized from {len(TEXT)} chunks" in message
    assert repr(e.expected[0]) in message and "actual (streamed, normalized)" in message


def test_catches_a_splitter_that_drops_a_partial_tag_at_the_end() -> None:
    # the whole input ends cleanly, so only a stream that ends early shows the bug
    def factory() -> TagSplitter:
        return TagSplitter(drop_held_at_finish=True)

    Parity(factory=factory, reference=split_batch, checks=["parity", "retraction"]).check_exhaustive(
        TEXT, max_cuts=1
    )
    with pytest.raises(ParityError) as err:
        check_parity(TEXT, factory=factory, reference=split_batch, settings=QUICK)
    e = err.value
    assert e.check == "flush"
    held = e.chunking.data
    assert isinstance(held, str) and TEXT.startswith(held) and _partial_suffix(held, OPEN) > 0
    assert e.chunking.chunks == (held,)  # one chunk is enough: feed it, finish, the tail is lost
    assert e.expected == merge_text()(split_batch(held)) and e.actual != e.expected
    assert f"input so far: {held!r}" in str(e)


def test_long_inputs_still_end_early_inside_every_delimiter() -> None:
    """Past 256 cuts a fixed chunking ends early at the cuts inside delimiters and a spread of the
    rest, not at all of them: the partial tags are still among them (the spread alone misses them
    in this text)."""
    text = "x" * 1504 + " <think>y</think> " + "z" * 500

    def factory() -> TagSplitter:
        return TagSplitter(drop_held_at_finish=True)

    parity = Parity(factory=factory, reference=split_batch)
    with pytest.raises(ParityError) as err:
        parity.check(
            text,
            chunkers=[characters()],
            delimiters=[OPEN, CLOSE],
            settings=settings(max_examples=1, derandomize=True),
        )
    assert err.value.check == "flush" and err.value.found.source == "characters"


def test_catches_a_splitter_that_emits_text_then_retracts_it() -> None:
    parity = Parity(factory=EagerRetractingSplitter, reference=split_batch, normalize=apply_retractions)
    parity.check_chunking([TEXT])  # in one chunk nothing is shown too early
    per_character = Chunking(TEXT, tuple(range(1, len(TEXT))))
    Parity(
        factory=EagerRetractingSplitter, reference=split_batch, normalize=apply_retractions, checks=["parity"]
    ).check_chunking(per_character)  # the final result is right...
    with pytest.raises(ParityError) as err:
        parity.check(TEXT, settings=QUICK)
    e = err.value
    assert e.check == "retraction"
    assert len(e.chunking.chunks) == 2 and inside_a_tag(TEXT, e.chunking.cuts[0])
    assert "emitted after chunk 1 of 2" in str(e)
    # ...and without the retraction check every chunking passes
    Parity(
        factory=EagerRetractingSplitter,
        reference=split_batch,
        normalize=apply_retractions,
        checks=["parity", "flush"],
    ).check(TEXT, settings=QUICK)


def test_an_exception_in_the_parser_is_a_failure_with_its_chunking() -> None:
    class Strict(TagSplitter):
        def feed(self, chunk: str) -> list[Event]:
            if chunk.startswith(">"):
                raise ValueError("unexpected '>'")
            return super().feed(chunk)

    with pytest.raises(ParityError) as err:
        check_parity_exhaustive(TEXT, factory=Strict, reference=split_batch, max_cuts=1)
    assert err.value.chunking.chunks[1].startswith(">")
    assert "raises ValueError: unexpected '>' (feeding chunk 2 of 2)" in str(err.value)
    assert isinstance(err.value.actual, ValueError)


def test_both_raising_the_same_exception_type_agree() -> None:
    def reference(text: str) -> list[Event]:
        if "<b>" in text:
            raise ValueError("no <b> allowed")
        return split_batch(text)

    class Refuses(TagSplitter):
        def finish(self) -> list[Event]:
            if "<b>" in self.seen:
                raise ValueError("no <b> here either")
            return super().finish()

        def feed(self, chunk: str) -> list[Event]:
            self.seen = getattr(self, "seen", "") + chunk
            return super().feed(chunk)

    check_parity_exhaustive(TEXT, factory=Refuses, reference=reference, max_cuts=1)


def test_a_bug_only_empty_chunks_show_is_found_by_hypothesis() -> None:
    class EmptyFlushes(TagSplitter):
        def feed(self, chunk: str) -> list[Event]:
            if not chunk:  # treats an empty delta as "flush": the held start of a tag becomes text
                held, self.buf = self.buf, ""
                return [(self.kind, held)]
            return super().feed(chunk)

    text = "ab<think>cd</think>"
    check_parity_exhaustive(text, factory=EmptyFlushes, reference=split_batch)  # no empty chunks there
    with pytest.raises(ParityError) as err:
        check_parity(
            text,
            factory=EmptyFlushes,
            reference=split_batch,
            settings=settings(max_examples=300, derandomize=True),
        )
    chunks = err.value.chunking.chunks
    assert "" in chunks and len(chunks) <= 4, chunks
    assert "random_cuts" in err.value.found.source


def test_exhaustive_covers_every_two_cut_chunking() -> None:
    def factory() -> tuple[Callable[[str], list[str]], Callable[[], list[str]]]:
        chunks: list[str] = []

        def finish() -> list[str]:
            text = "".join(chunks)
            return [text.upper() if [len(c) for c in chunks] == [2, 1, len(text) - 3] else text]

        return lambda c: chunks.append(c), finish

    Parity(factory=factory, reference=lambda t: t).check_exhaustive("abcdef", max_cuts=1)
    with pytest.raises(ParityError) as err:
        check_parity_exhaustive("abcdef", factory=factory, reference=lambda t: t)
    assert err.value.chunking.chunks == ("ab", "c", "def")


# ------------------------------------------------------------------ Rx operators
STOPS = ["</s>", "\nUser:"]
RULES = {"<NL>": "\n", "foo": "bar", "fo": "X"}
STOP_TEXT = "Fine.\nUse the <NL> key.</s>\nUser: more"


def test_rx_stop_operator_agrees_with_stop_text() -> None:
    check_parity(
        STOP_TEXT,
        operator=stop(STOPS),
        reference=lambda t: stop_text(t, STOPS)[0],
        delimiters=STOPS,
        settings=QUICK,
    )


def test_rx_replace_operator_agrees_with_replace_text() -> None:
    text = "a <NL> fofoo <N foo<NL>"
    check_parity(
        text,
        operator=replace(RULES),
        reference=lambda t: replace_text(t, RULES),
        delimiters=list(RULES),
        settings=QUICK,
    )
    check_parity_exhaustive(text[:14], operator=replace(RULES), reference=lambda t: replace_text(t, RULES))


def test_rx_operator_that_replaces_per_item_is_caught() -> None:
    def naive(source: Observable[str]) -> Observable[str]:
        return source.pipe(ops.map(lambda s: s.replace("<NL>", "\n")))

    with pytest.raises(ParityError) as err:
        check_parity(
            "x <NL> y", operator=naive, reference=lambda t: replace_text(t, {"<NL>": "\n"}), settings=QUICK
        )
    assert len(err.value.chunking.chunks) == 2 and "<NL>" not in err.value.chunking.chunks


def test_rx_operator_that_never_completes_fails_the_check() -> None:
    def hangs(source: Observable[str]) -> Observable[str]:
        return rx.concat(source, rx.never())

    with pytest.raises(ParityError) as err:
        check_chunking(["ab", "c"], operator=hangs, reference=lambda t: t, timeout=0.2)
    assert "raises TimeoutError: the operator did not complete within 0.2 s" in str(err.value)


def test_rx_operator_error_is_reported() -> None:
    def fails(source: Observable[str]) -> Observable[str]:
        def boom(s: str) -> str:
            if s == "c":
                raise RuntimeError("no c")
            return s

        return source.pipe(ops.map(boom))

    with pytest.raises(ParityError) as err:
        check_chunking(["ab", "c"], operator=fails, reference=lambda t: t)
    assert err.value.chunking.chunks == ("ab", "c")
    assert "raises RuntimeError: no c (feeding chunk 2 of 2)" in str(err.value)


@pytest.mark.parametrize("name", ["deepseek-r1", "harmony-final"])
def test_the_route_engine_and_operator_keep_parity(name: str) -> None:
    """rxstream's own splitter (a preset with a prompt; one with regular-expression delimiters),
    its Segment events merged by the default normalize."""
    from rxstream.channels import PRESETS, CompiledRoute, Router, route_text
    from rxstream.operators import route
    from tests.channels.recorded import ALL

    text, prompt = ALL[name]
    spec = CompiledRoute(PRESETS[name.removesuffix("-final")])
    delimiters = [
        d for r in spec.spec.regions for d in (*r.open, *r.close) if isinstance(d, str) and len(d) > 1
    ]

    def router() -> Router:
        return Router(spec, prompt=prompt)

    def batch(t: str) -> list[Any]:
        return route_text(t, spec, prompt=prompt)

    tok = trained.bytelevel()
    check_parity(text, factory=router, reference=batch, tokenizer=tok, delimiters=delimiters, settings=QUICK)
    check_parity(
        text, operator=route(spec.spec, prompt=prompt), reference=batch, tokenizer=tok, settings=QUICK
    )


# ------------------------------------------------------------------ tokens
def _independent_boundaries(tok: Tokenizer, text: str) -> set[int]:
    """Ends of the whole characters decoded after each token (decode of every prefix of ids; the
    texts here hold no U+FFFD of their own)."""
    ids = tok.encode(text, add_special_tokens=False).ids
    ends = set()
    for k in range(1, len(ids) + 1):
        decoded = tok.decode(ids[:k], skip_special_tokens=False).rstrip("\ufffd")  # a character still open
        assert text.startswith(decoded)
        ends.add(len(decoded))
    return ends - {0}


MULTILINGUAL = "Grüße 🌦️ aus 東京 <think>naïve 👩‍💻</think><|im_end|>"


@pytest.mark.parametrize("family", ["bytelevel", "llama"])
def test_token_chunks_are_whole_characters_as_the_detokenizer_emits_them(family: str) -> None:
    tok = getattr(trained, family)()
    ids = tok.encode(MULTILINGUAL, add_special_tokens=False).ids
    ends = token_boundaries(tok, MULTILINGUAL)
    assert len(ends) == len(ids) and ends[-1] == len(MULTILINGUAL)
    assert set(ends) - {0} == _independent_boundaries(tok, MULTILINGUAL)
    assert len(set(ends)) < len(ids)  # some tokens end inside a character and add no text
    chunking = tokens(tok).fixed(MULTILINGUAL)[0]
    assert "".join(chunking.chunks) == MULTILINGUAL  # type: ignore[arg-type]
    assert all(c and "\ufffd" not in c for c in chunking.chunks)


def test_token_chunks_of_the_real_smollm2_tokenizer() -> None:
    from rxstream.backends import default_cache_dir

    path = default_cache_dir() / "models" / "smollm2-135m-instruct-fp32" / "tokenizer.json"
    if not path.is_file():
        pytest.skip("the SmolLM2 model is not in the model cache")
    tok = Tokenizer.from_file(str(path))
    text = "<think>东京 🌦️</think>\n<tool_call>{}</tool_call><|im_end|>"
    assert set(token_boundaries(tok, text)) - {0} == _independent_boundaries(tok, text)
    with pytest.raises(ParityError) as err:
        Parity(factory=ChunkLocalSplitter, reference=split_batch).check(
            text, chunkers=[tokens(tok)], settings=QUICK
        )
    assert err.value.found.source == "tokens"


def test_any_object_with_encode_and_decode_gives_the_same_tokens() -> None:
    tok = trained.bytelevel()

    class Plain:
        def encode(self, text: str) -> list[int]:
            return list(tok.encode(text, add_special_tokens=False).ids)

        def decode(self, ids: list[int]) -> str:
            return str(tok.decode(ids, skip_special_tokens=False))

    assert token_boundaries(Plain(), MULTILINGUAL) == token_boundaries(tok, MULTILINGUAL)


def test_a_tokenizer_that_does_not_give_the_text_back_is_refused() -> None:
    with pytest.raises(ValueError, match="does not give the text back"):
        token_boundaries(trained.wordpiece(), "a,b")


def test_per_token_chunking_catches_the_chunk_local_splitter() -> None:
    tok = trained.bytelevel()
    assert len(tokens(tok).fixed("<think>")[0].chunks) > 1  # the tag is several tokens
    parity = Parity(factory=ChunkLocalSplitter, reference=split_batch)
    with pytest.raises(ParityError) as err:
        parity.check(TEXT, chunkers=[whole(), tokens(tok)], settings=QUICK)
    assert err.value.found.source == "tokens" and len(err.value.chunking.chunks) == 2
    # multi-token groups cut inside the tags too
    with pytest.raises(ParityError) as err:
        parity.check(TEXT, chunkers=[token_groups(tok, 3)], settings=QUICK)
    assert err.value.found.source == "token_groups(<=3)"
    check_parity(TEXT, factory=TagSplitter, reference=split_batch, tokenizer=tok, settings=QUICK)


# ------------------------------------------------------------------ bytes
def utf8_batch(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def test_bytes_mode_catches_a_decoder_that_splits_characters() -> None:
    data = "Grüße 🌦️ 東京".encode()

    def per_chunk() -> tuple[Callable[[bytes], str], Callable[[], str]]:
        return lambda b: b.decode("utf-8", "replace"), lambda: ""

    def incremental() -> tuple[Callable[[bytes], str], Callable[[], str]]:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        return decoder.decode, lambda: decoder.decode(b"", final=True)

    check_parity(data, factory=incremental, reference=utf8_batch, settings=QUICK)
    with pytest.raises(ParityError) as err:
        check_parity(
            data, factory=per_chunk, reference=utf8_batch, chunkers=[whole(), utf8_splits()], settings=QUICK
        )
    e = err.value
    assert e.found.source == "utf8_splits" and len(e.chunking.chunks) == 2
    assert 0x80 <= data[e.chunking.cuts[0]] < 0xC0  # cut inside a multi-byte character
    assert "(the first" not in str(e) and "bytes)" in str(e)


# ------------------------------------------------------------------ chunkings and normalization
def test_chunkers_cut_where_they_say() -> None:
    text = "a</think>b</think>"
    assert [c.cuts for c in delimiter_splits(CLOSE).fixed(text)] == [
        (p,) for p in [*range(2, 9), *range(11, 18)]
    ]
    assert characters().fixed("abc")[0].chunks == ("a", "b", "c")
    assert whole().fixed("abc")[0].chunks == ("abc",)
    assert random_cuts().fixed("abc") == []
    assert utf8_splits().fixed("é".encode())[0].chunks == (b"\xc3", b"\xa9")
    assert utf8_splits().fixed("é") == []
    assert Chunking("abc", (0, 3, 3)).chunks == ("", "abc", "", "")
    assert Chunking.of([b"a", b"", b"bc"]).cuts == (1, 1)


@given(st.data())
def test_drawn_chunkings_are_chunkings_of_the_input(data: st.DataObject) -> None:
    tok = trained.bytelevel()
    chunkers = [
        whole(),
        characters(),
        random_cuts(),
        tokens(tok),
        token_groups(tok),
        delimiter_splits(OPEN, CLOSE),
    ]
    chunking = data.draw(chunkings(TEXT, chunkers))
    assert "".join(chunking.chunks) == TEXT  # type: ignore[arg-type]
    names = chunking.source.split("+")
    assert names and set(names) <= {c.name for c in chunkers}
    # the pattern for a parity check inside one's own @given test
    check_chunking(chunking, factory=TagSplitter, reference=split_batch)


@given(st.data())
def test_token_groups_hold_one_to_max_group_tokens(data: st.DataObject) -> None:
    tok = trained.bytelevel()
    bounds = tokens(tok).fixed(TEXT)[0].cuts  # where tokens end
    chunking = data.draw(token_groups(tok, 3).strategy(TEXT))
    assert set(chunking.cuts) <= set(bounds)
    ends = [*chunking.cuts, len(TEXT)]
    per_chunk = [
        sum(a < b <= c for b in [*bounds, len(TEXT)]) for a, c in zip([0, *chunking.cuts], ends, strict=True)
    ]
    assert all(1 <= n <= 3 for n in per_chunk), per_chunk


def test_merge_text_joins_text_of_one_kind() -> None:
    from rxstream import Piece

    merge = merge_text()
    events: list[Any] = [
        {"type": "chunk", "field": "a", "text": "x"},
        {"type": "chunk", "field": "a", "text": "y"},
        {"type": "chunk", "field": "b", "text": "z"},
        {"type": "close", "field": "b"},
        Piece("p", (1,)),
        Piece("q", (2, 3)),
        b"",
        ("k", ""),
    ]
    assert merge(events) == [
        {"type": "chunk", "field": "a", "text": "xy"},
        {"type": "chunk", "field": "b", "text": "z"},
        {"type": "close", "field": "b"},
        Piece("pq", (1, 2, 3)),
    ]
    assert merge_text("delta")([{"delta": "a"}, {"delta": "b"}]) == [{"delta": "ab"}]
    assert merge_text(drop_empty=False)(["", ("k", "")]) == ["", ("k", "")]
    assert merge.is_partial(Piece("p", (1,)), Piece("pq", (1, 2)))
    assert not merge.is_partial(("a", "x"), ("b", "xy"))


# ------------------------------------------------------------------ bad use
def test_bad_arguments_are_refused_clearly() -> None:
    with pytest.raises(TypeError, match="exactly one of factory"):
        Parity()
    with pytest.raises(TypeError, match="exactly one of factory"):
        Parity(factory=TagSplitter, operator=stop("x"))
    with pytest.raises(TypeError, match="checks must be"):
        Parity(factory=TagSplitter, checks="parity")
    with pytest.raises(TypeError, match="checks must be"):
        Parity(factory=TagSplitter, checks=["parity", "speed"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="timeout"):
        Parity(factory=TagSplitter, timeout=0)
    with pytest.raises(TypeError, match="feed, finish"):
        check_chunking(["a"], factory=lambda: 42, reference=lambda t: t)
    with pytest.raises(TypeError, match="needs normalize to return a list"):
        check_chunking(
            ["a", "b"], factory=TagSplitter, normalize=lambda ev: {"text": "".join(t for _, t in ev)}
        )
    with pytest.raises(TypeError, match="str or bytes"):
        check_parity_exhaustive(["a"], factory=TagSplitter)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_group"):
        token_groups(trained.bytelevel(), 1)
    with pytest.raises(ValueError, match="at least 2"):
        delimiter_splits("<")
    with pytest.raises(ValueError, match="cuts must lie"):
        Chunking("ab", (3,))


def test_the_kit_imports_and_runs_exhaustively_without_hypothesis() -> None:
    code = (
        "import sys; sys.modules['hypothesis'] = None\n"
        "from rxstream import stop_text, StopMatcher\n"
        "from rxstream.testing import check_parity_exhaustive\n"
        "def make():\n"
        "    m = StopMatcher(['</s>'])\n"
        "    return m.feed, m.flush\n"
        "check_parity_exhaustive('ab</s>c', factory=make, reference=lambda t: stop_text(t, ['</s>'])[0])\n"
        "print('ok')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr


# ------------------------------------------------------------------ the example
EXAMPLE = ROOT / "examples" / "parity_response_parser.py"


def _run_example(prelude: str) -> subprocess.CompletedProcess[str]:
    code = f"{prelude}\nimport runpy\nrunpy.run_path({str(EXAMPLE)!r}, run_name='__main__')"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)


def test_example_without_transformers_prints_one_line_and_exits_0() -> None:
    proc = _run_example("import sys; sys.modules['transformers'] = None")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1 and "transformers is not installed" in proc.stdout


@pytest.mark.slow
def test_example_exits_1_with_the_minimized_chunking_when_the_parser_breaks() -> None:
    pytest.importorskip("transformers")
    # a ResponseParser that loses any chunk that is exactly ">"
    proc = _run_example(
        "from transformers.utils.chat_parsing import response_parser as m\n"
        "feed = m.ResponseParser.feed\n"
        "m.ResponseParser.feed = lambda self, text: [] if text == '>' else feed(self, text)"
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "events: PARITY FAILURE (parity)" in proc.stdout
    assert " | '>'" in proc.stdout  # the minimized chunking isolates the lost '>'
    assert "parity failures found" in proc.stdout
