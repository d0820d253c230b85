"""rxstream.compat.tokflow: TokFlow's API on rxstream's engine, without TokFlow's bugs."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import pytest
import tokflow
from hypothesis import given, settings
from hypothesis import strategies as st

from rxstream.compat.tokflow import SentenceStop, TokFlow
from tests.reference import batch_replace, batch_stop

ARTICLE = ["He", "llo", " ", "t", "h", "ere", "!<", "N", "L>m", "y ", "nam", "e ", "is", " tokfl", "ow."]


def test_article_example_same_text_as_tokflow_and_earlier() -> None:
    ours, theirs = TokFlow([("<NL>", "\n")]), tokflow.TokFlow([("<NL>", "\n")])
    a = [ours.put(c) for c in ARTICLE] + [ours.flush()]
    b = [theirs.put(c) for c in ARTICLE] + [theirs.flush()]
    assert "".join(a) == "".join(b) == "Hello there!\nmy name is tokflow."
    # "!" cannot start "<NL>", so it goes out with its chunk; TokFlow holds it until "L>m".
    assert a[6] == "!" and b[6] == ""


def test_full_in_full_out() -> None:
    t = TokFlow([("<NL>", "\n")])
    full = ""
    outs = []
    for c in ARTICLE:
        full += c
        outs.append(t.put(full, {"in_type": "full", "out_type": "full"}))
    assert outs[-1] == "Hello there!\nmy name is tokflow."
    assert all(outs[i + 1].startswith(outs[i]) for i in range(len(outs) - 1))
    assert t.flush({"in_type": "full", "out_type": "full"}) == "Hello there!\nmy name is tokflow."


def test_flush_keeps_held_text_where_tokflow_loses_it() -> None:
    ours, theirs = TokFlow([("<NL>", "\n")]), tokflow.TokFlow([("<NL>", "\n")])
    assert ours.put("a<N") + ours.flush() == "a<N"
    assert theirs.put("a<N") + theirs.flush() != "a<N"  # TokFlow drops "<N"


def test_second_target_in_one_chunk() -> None:
    rules = [("<NL>", "\n"), ("<b>", "B")]
    ours, theirs = TokFlow(rules), tokflow.TokFlow(rules)
    assert ours.put("x<NL>y<b>z") + ours.flush() == "x\nyBz"
    assert theirs.put("x<NL>y<b>z") + theirs.flush() != "x\nyBz"


def test_restart_inside_failed_partial_match() -> None:
    t = TokFlow([("<NL>", "\n")])
    assert "".join(t.put(c) for c in ["<", "<", "N", "L>"]) + t.flush() == "<\n"


def test_no_state_leaks_after_flush() -> None:
    t = TokFlow([("<NL>", "\n")])
    t.put("abc<N")
    t.flush()
    assert t.put("L>x") + t.flush() == "L>x"


def test_full_snapshot_that_does_not_extend_raises() -> None:
    t = TokFlow([("<NL>", "\n")])
    t.put("Hello", {"in_type": "full"})
    with pytest.raises(ValueError, match="does not extend"):
        t.put("Help", {"in_type": "full"})


def test_bad_opts() -> None:
    with pytest.raises(ValueError, match="unknown in_type"):
        TokFlow([("a", "b")]).put("x", {"in_type": "bulk"})


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(alphabet="ab<>N", max_size=6), max_size=10),
    st.lists(
        st.tuples(st.text(alphabet="ab<>N", min_size=1, max_size=4), st.text(max_size=2)),
        min_size=1,
        max_size=4,
    ),
)
def test_tokflow_facade_is_batch_replace(chunks: list[str], rules) -> None:
    t = TokFlow(rules)
    assert "".join(t.put(c) for c in chunks) + t.flush() == batch_replace("".join(chunks), rules)


# -- SentenceStop --------------------------------------------------------------------------------------
def test_sentence_stop_dict_keys_and_values() -> None:
    s = SentenceStop(["User:"])
    r1 = s.put("Fine. Us", {})
    assert r1 == {"text": "Fine. ", "stop_str_found": False, "possible": True, "stop_str": None}
    r2 = s.put("er: next", {})
    assert r2 == {"text": "", "stop_str_found": True, "possible": True, "stop_str": "User:"}


def test_sentence_stop_full_mode_matches_tokflow() -> None:
    text = "Answer: 42.\nUser: next question"
    ours, theirs = SentenceStop(["\nUser:"]), tokflow.SentenceStop(["\nUser:"])
    full = ""
    for c in [text[i : i + 3] for i in range(0, len(text), 3)]:
        full += c
        a = ours.put(full, {"in_type": "full", "out_type": "full"})
        b = theirs.put(full, {"in_type": "full", "out_type": "full"})
        if b["stop_str_found"]:
            break
    assert a["stop_str_found"] and b["stop_str_found"]
    assert a["text"] == b["text"] == "Answer: 42."
    assert a["stop_str"] == b["stop_str"] == "\nUser:"


@pytest.mark.parametrize("in_type", ["spot", "full"])
def test_skip_existing_stop_str_in_every_mode(in_type: str) -> None:
    opts = {"in_type": in_type, "out_type": "full", "skip_existing_stop_str": True}
    s = SentenceStop(["User:"])
    pieces = ["User: hi\nBot:", " hello", " User", ": more"]
    full, result = "", {}
    for p in pieces:
        full += p
        result = s.put(full if in_type == "full" else p, opts)
        if result["stop_str_found"]:
            break
    assert result == {
        "text": "User: hi\nBot: hello ",
        "stop_str_found": True,
        "possible": True,
        "stop_str": "User:",
    }


def test_tokflow_skip_existing_is_broken_in_spot_mode() -> None:
    """What the facade fixes: TokFlow masks the head of every later spot chunk."""
    s = tokflow.SentenceStop(["User:"])
    opts = {"skip_existing_stop_str": True}
    s.put("User: hi\nBot:", opts)
    r = s.put(" hello User: more", opts)
    assert not r["stop_str_found"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(alphabet="ab<>", max_size=6), max_size=10),
    st.lists(st.text(alphabet="ab<>", min_size=1, max_size=4), min_size=1, max_size=4),
)
def test_sentence_stop_is_batch_stop(chunks: list[str], stops) -> None:
    s = SentenceStop(stops)
    out, found = "", None
    for c in chunks:
        r = s.put(c, {})
        out += r["text"]
        if r["stop_str_found"]:
            found = r["stop_str"]
            break
    else:
        out += s.flush({})  # a stop decided only at the end is not reported by flush (TokFlow's API)
        assert out == batch_stop("".join(chunks), stops)[0]
        return
    assert (out, found) == batch_stop("".join(chunks), stops)


def _bytes_allocated_per_char(put: Callable[[str], object], chunks: list[str]) -> float:
    """Transient allocation of every put, summed (tracemalloc peaks), per input character."""
    total = 0
    tracemalloc.start()
    try:
        for c in chunks:
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            put(c)
            total += tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    return total / sum(map(len, chunks))


@pytest.mark.parametrize("kind", ["tokflow", "sentence_stop"])
def test_spot_put_does_not_copy_the_stream(kind: str) -> None:
    """A ``spot`` put must cost what its chunk costs, not the length of the stream so far:
    counted as bytes allocated per character over a long stream (a copy of the whole text on
    every put is thousands of bytes per character here)."""
    chunks = [f"word {k:05d} <b>text</b>, " for k in range(4000)]  # 24 chars each
    if kind == "tokflow":
        t = TokFlow([("<b>", "**"), ("</b>", "**")])
        per_char = _bytes_allocated_per_char(t.put, chunks)
    else:
        s = SentenceStop(["<|end|>", "\nUser:"])
        per_char = _bytes_allocated_per_char(lambda c: s.put(c, {}), chunks)
    assert per_char < 200, f"{per_char:.0f} bytes allocated per character"


def test_full_modes_still_see_the_whole_text_after_many_spot_puts() -> None:
    t = TokFlow([("<b>", "**")])
    chunks = [f"x{k}<b>" for k in range(300)]
    outs = [t.put(c) for c in chunks]
    assert t.put("", {"out_type": "full"}) == "".join(outs)
    whole = "".join(chunks)
    assert t.put(whole + "y<b", {"in_type": "full", "out_type": "full"}) == "".join(outs) + "y"
    with pytest.raises(ValueError, match="does not extend"):
        t.put(whole[:-1], {"in_type": "full"})
