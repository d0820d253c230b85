"""When each operator emits: every emission, completion and upstream disposal pinned to a frame."""

from __future__ import annotations

import pytest
from reactivex import operators as ops

import rxstream
import rxstream.channels
import rxstream.chat
import rxstream.operators as O
from rxstream import Finish, FinishReason, FinishRecorder
from rxstream.operators import (
    deltas,
    hold_back,
    max_tokens,
    replace,
    serialize,
    snapshots,
    stop,
    stop_on_tokens,
)
from rxstream.testing import MarbleMismatch, MarbleTest, check_docstring_marbles, docstring_marbles


@pytest.mark.parametrize("name", [n for n in O.__all__ if not isinstance(getattr(O, n), type)])
def test_docstring_marble_diagrams_hold(name: str) -> None:
    """Every public operator documents its timing with a diagram, and the diagram is true."""
    namespace = dict(vars(O))
    namespace["rx"] = rxstream.rx  # regular-expression rules, as a user imports them
    namespace.update({n: getattr(rxstream.channels, n) for n in rxstream.channels.__all__})  # Segment, events
    namespace.update({n: getattr(rxstream.chat, n) for n in rxstream.chat.__all__})  # ChatPlan, TextDelta
    if name in ("detokenize", "text_pipeline", "chat_pipeline"):
        from rxstream.testing.tokenizers import byte_tokenizer

        namespace["tokenizer"] = byte_tokenizer()
    assert check_docstring_marbles(getattr(O, name), namespace) >= 1


def test_docstring_checker_catches_a_wrong_diagram() -> None:
    doc = """
        source:   -a-b-|      a="x<", b="y"
        operator: replace({"<y": "!"})
        result:   -a-b-|      a="x<", b="y"
    """
    ex = docstring_marbles(doc)
    assert len(ex) == 1
    m = MarbleTest()
    src = m.cold(ex[0].source, ex[0].source_values)
    with pytest.raises(MarbleMismatch, match=r"expected: -a-b-\|"):
        m.expect(src.pipe(replace({"<y": "!"})), ex[0].result, ex[0].result_values)


def test_mismatch_message_shows_both_diagrams_and_values() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-|", {"a": "He", "b": "llo\n"})
    with pytest.raises(MarbleMismatch) as info:
        m.expect(src, "-a--b|", {"a": "He", "b": "llo\n"})
    text = str(info.value)
    assert "expected: -a--b|" in text
    assert "actual:   -a-b-|" in text
    assert "b='llo\\n'" in text


# -- replace -------------------------------------------------------------------------------------
def test_replace_tokflow_article_example_timing() -> None:
    m = MarbleTest()
    chunks = ["He", "llo", " ", "t", "h", "ere", "!<", "N", "L>m", "y ", "nam", "e ", "is", " tokfl", "ow."]
    src = m.cold("".join(f"-[{c}]" for c in chunks) + "-|")
    out = ["He", "llo", " ", "t", "h", "ere", "!", None, "\nm", "y ", "nam", "e ", "is", " tokfl", "ow."]
    values = {"n": "\nm"}
    expected = "".join("--" if o is None else ("-n" if o == "\nm" else f"-[{o}]") for o in out) + "-|"
    m.expect(src.pipe(replace({"<NL>": "\n"})), expected, values)
    m.expect_subscriptions(src, "^" + "-" * 30 + "!")


def test_replace_flushes_held_text_at_completion() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-|", {"a": "x<N", "b": "L"})
    m.expect(src.pipe(replace({"<NL>": "\n"})), "-a---(b|)", {"a": "x", "b": "<NL"})


def test_replace_upstream_error_drops_held_text() -> None:
    m = MarbleTest()
    boom = RuntimeError("backend died")
    src = m.cold("-a-b-#", {"a": "x<N", "b": "L"}, error=boom)
    m.expect(src.pipe(replace({"<NL>": "\n"})), "-a---#", {"a": "x"}, error=boom)


def test_replace_non_str_item_goes_to_on_error_and_disposes_upstream() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-c-|", {"a": "ok", "b": 42, "c": "late"})
    m.expect(
        src.pipe(replace({"x": "y"})),
        "-a-#",
        {"a": "ok"},
        error=TypeError("replace: expected str or Piece items, got int: 42"),
    )
    m.expect_subscriptions(src, "^--!")


def test_replace_subscriber_disposal_reaches_source() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-c-d-|")
    m.expect(src.pipe(replace({"c": "C"})), "-a-b-", dispose_at=5)
    m.expect_subscriptions(src, "^----!")


def test_hold_back_releases_the_moment_a_pattern_is_impossible() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-c-d-|", {"a": "x<", "b": "/", "c": "i", "d": "b>"})
    m.expect(src.pipe(hold_back(["</b>", "<b>"])), "-a---c-d-|", {"a": "x", "c": "</i", "d": "b>"})


# -- stop ----------------------------------------------------------------------------------------
def test_stop_waits_for_longer_stop_then_decides() -> None:
    m = MarbleTest()
    rec = FinishRecorder()
    src = m.cold("-a-b-c-d-|", {"a": "ok.", "b": "\n\n", "c": "Q", "d": "x"})
    m.expect(src.pipe(stop(["\n\nQ:", "\n\n"], on_finish=rec)), "-a-----|", {"a": "ok."})
    m.expect_subscriptions(src, "^------!")
    assert rec.finish == Finish(FinishReason.STOP, stop="\n\n")


def test_stop_on_completion_without_match_reports_eos_and_flushes() -> None:
    m = MarbleTest()
    rec = FinishRecorder()
    src = m.cold("-a-b-|", {"a": "hi ", "b": "<|e"})
    m.expect(src.pipe(stop("<|end|>", on_finish=rec)), "-a---(b|)", {"a": "hi ", "b": "<|e"})
    assert rec.finish == Finish(FinishReason.EOS)


def test_stop_resolves_held_text_as_batch_at_completion() -> None:
    m = MarbleTest()
    rec = FinishRecorder()
    # "ab" is held for "abcd"; at completion "b" alone is a stop string.
    src = m.cold("-a-b-|", {"a": "x", "b": "ab"})
    m.expect(src.pipe(stop(["abcd", "b"], on_finish=rec)), "-a---(b|)", {"a": "x", "b": "a"})
    assert rec.finish == Finish(FinishReason.STOP, stop="b")


def test_stop_subscriber_disposal_reports_cancelled() -> None:
    m = MarbleTest()
    rec = FinishRecorder()
    src = m.cold("-a-b-c-|")
    m.expect(src.pipe(stop("zz", on_finish=rec)), "-a-", dispose_at=3)
    m.expect_subscriptions(src, "^--!")
    assert rec.finish == Finish(FinishReason.CANCELLED)


def test_stop_upstream_error_reports_error_and_drops_held() -> None:
    m = MarbleTest()
    rec = FinishRecorder()
    boom = ConnectionError("lost")
    src = m.cold("-a-#", {"a": "x<|"}, error=boom)
    m.expect(src.pipe(stop("<|end|>", on_finish=rec)), "-a-#", {"a": "x"}, error=boom)
    assert rec.finish is not None and rec.finish.reason is FinishReason.ERROR and rec.finish.error is boom


def test_stop_on_finish_exception_becomes_on_error() -> None:
    def bad(_: Finish) -> None:
        raise RuntimeError("callback failed")

    m = MarbleTest()
    src = m.cold("-a-b-|", {"a": "x", "b": "STOP"})
    m.expect(src.pipe(stop("STOP", on_finish=bad)), "-a-#", {"a": "x"}, error=RuntimeError("callback failed"))


def test_stop_in_a_pipeline_disposes_the_source_through_other_operators() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-c-d-|", {"a": "x<NL>", "b": "y<|", "c": "end|>", "d": "z"})
    out = src.pipe(replace({"<NL>": "\n"}), stop("<|end|>"), ops.map(str.upper))
    m.expect(out, "-a-b-|", {"a": "X\n", "b": "Y"})
    m.expect_subscriptions(src, "^----!")


def test_prompt_aware_stop_ignores_stop_inside_prompt() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-|", {"a": "Sure. ", "b": "User: more"})
    m.expect(src.pipe(stop("User:", prompt="User: hi\nAssistant:")), "-a-|", {"a": "Sure. "})


def test_skip_initial_first_snapshot() -> None:
    m = MarbleTest()
    rec = FinishRecorder()
    src = m.cold(
        "-a-b-c-|", {"a": "User: hi\nBot:", "b": "User: hi\nBot: hello", "c": "User: hi\nBot: hello\nUser: x"}
    )
    out = src.pipe(deltas(), stop("User:", skip_initial=True, on_finish=rec), snapshots())
    m.expect(
        out, "-a-b-(c|)", {"a": "User: hi\nBot:", "b": "User: hi\nBot: hello", "c": "User: hi\nBot: hello\n"}
    )
    assert rec.finish == Finish(FinishReason.STOP, stop="User:")


# -- token ops -----------------------------------------------------------------------------------
def test_stop_on_tokens_cuts_a_sequence_item_and_disposes() -> None:
    m = MarbleTest()
    rec = FinishRecorder()
    src = m.cold("-a-b-c-|", {"a": (5, 6), "b": (7, 2, 9), "c": (1,)})
    m.expect(src.pipe(stop_on_tokens(2, on_finish=rec)), "-a-(b|)", {"a": (5, 6), "b": (7,)})
    m.expect_subscriptions(src, "^--!")
    # 9 came with the stop id in the same item: it entered but is not passed on
    assert rec.finish == Finish(FinishReason.STOP, stop=2, dropped=(9,))


def test_stop_on_tokens_include_stop() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-c-|", {"a": 5, "b": 2, "c": 1})
    m.expect(src.pipe(stop_on_tokens([2, 3], include_stop=True)), "-a-(b|)", {"a": 5, "b": 2})


def test_max_tokens_counts_ids_in_sequence_items() -> None:
    m = MarbleTest()
    rec = FinishRecorder()
    src = m.cold("-a-b-c-|", {"a": [1, 2], "b": [3, 4, 5], "c": [6]})
    m.expect(src.pipe(max_tokens(3, on_finish=rec)), "-a-(b|)", {"a": [1, 2], "b": [3]})
    m.expect_subscriptions(src, "^--!")
    assert rec.finish == Finish(FinishReason.LENGTH, dropped=(4, 5))  # cut from "b" to fit


def test_max_tokens_zero_completes_at_once_without_subscribing() -> None:
    m = MarbleTest()
    src = m.cold("-a-|", {"a": 1})
    m.expect(src.pipe(max_tokens(0)), "|")
    m.expect_subscriptions(src)


def test_max_tokens_source_ends_first_reports_eos() -> None:
    m = MarbleTest()
    rec = FinishRecorder()
    src = m.cold("-a-|", {"a": 1})
    m.expect(src.pipe(max_tokens(5, on_finish=rec)), "-a-|", {"a": 1})
    assert rec.finish == Finish(FinishReason.EOS)


def test_token_op_rejects_text_item() -> None:
    m = MarbleTest()
    src = m.cold("-a-|", {"a": "hello"})
    m.expect(src.pipe(max_tokens(5)), "-#", error=TypeError)


# -- cumulative ----------------------------------------------------------------------------------
def test_deltas_rejects_a_snapshot_that_does_not_extend() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-c-|", {"a": "Hello", "b": "Help", "c": "Help me"})
    m.expect(src.pipe(deltas()), "-a-#", {"a": "Hello"}, error=ValueError)
    m.expect_subscriptions(src, "^--!")


def test_serialize_is_transparent_on_one_thread() -> None:
    m = MarbleTest()
    src = m.cold("-a-b-c-|")
    m.expect(src.pipe(serialize()), "-a-b-c-|")
