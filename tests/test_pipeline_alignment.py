"""detokenize(aligned=True) -> replace -> stop on a real tokenizer: ids and logprobs stay aligned
with the text end to end (SEMANTICS §4–§5), however the ids are grouped into items."""

from __future__ import annotations

import reactivex as rx
from hypothesis import given, settings
from hypothesis import strategies as st

from rxstream import FinishReason, FinishRecorder, Piece
from rxstream.operators import detokenize, replace, stop
from tests.reference import batch_replace, batch_stop
from tests.tokenizer_factory import bytelevel, llama

WORDS = ["Hello", " world", "<NL>", " café", " 🗼", " 中文", "!\n", "User:", " end", "<|", "|>", " 👩‍👩‍👧"]
RULES = [("<NL>", "\n"), ("café", "CAFE"), ("<||>", "[sep]")]
STOPS = ["\nUser:", "STOP", " end."]


def logprob(i: int) -> float:
    return -((i % 97) + 1) / 10


@settings(max_examples=120, deadline=None)
@given(st.lists(st.sampled_from([*WORDS, " end.", "STOP"]), max_size=14),
       st.lists(st.integers(1, 3), max_size=40), st.sampled_from(["bytelevel", "llama"]))
def test_pipeline_keeps_ids_and_logprobs_aligned(words: list[str], sizes: list[int], family: str) -> None:
    tok = bytelevel() if family == "bytelevel" else llama()
    text = "".join(words)
    ids = tok.encode(text, add_special_tokens=False).ids
    decoded = tok.decode(ids)
    # group ids into items of 1-3 ids (speculative decoding), each a Piece with logprobs
    items, k = [], 0
    for n in [*sizes, *([1] * len(ids))]:
        if k >= len(ids):
            break
        group = tuple(ids[k:k + n])
        items.append(Piece("", group, tuple(logprob(i) for i in group)))
        k += n
    rec = FinishRecorder()
    out: list[Piece] = []
    rx.from_iterable(items).pipe(
        detokenize(tok, aligned=True), replace(RULES), stop(STOPS, on_finish=rec)
    ).subscribe(out.append)

    expected_text, match = batch_stop(batch_replace(decoded, RULES), STOPS)
    assert "".join(p.text for p in out) == expected_text
    kept = [i for p in out for i in p.ids]
    for p in out:
        assert p.logprobs == tuple(logprob(i) for i in p.ids)
    assert rec.finish is not None
    if match is None:
        assert rec.finish.reason is FinishReason.EOS
        assert kept == ids  # every id comes out exactly once, in order
    else:
        assert rec.finish.reason is FinishReason.STOP and rec.finish.stop == match
        dropped = list(rec.finish.dropped)
        assert kept + dropped == ids[: len(kept) + len(dropped)]
        # the kept ids are a prefix of the stream, and the stop cut nothing before their text ends
        assert decoded.startswith(tok.decode(kept))
        assert len(batch_replace(tok.decode(kept), RULES)) <= len(expected_text) + max(map(len, STOPS))
