"""Rules, stop strings and tokenizers are checked and compiled once per operator, not once per
subscription or per engine; the compiled forms are shared by every stream built from them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import reactivex as rx
from reactivex import operators as rxops

import rxstream
import rxstream.detok._stream as detok_stream
import rxstream.text._rules as rules_module
from rxstream import StopMatcher, StreamDetokenizer
from rxstream.compat.tokflow import SentenceStop
from rxstream.detok import InexactDecoderWarning
from rxstream.operators import detokenize, hold_back, replace, stop, text_pipeline
from rxstream.testing.tokenizers import byte_tokenizer, bytelevel
from rxstream.text import replace_rules, stop_rules


def counting(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    calls: list[int] = []
    original: Callable[..., Any] = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def run3(op: Any, items: list[Any]) -> list[list[Any]]:
    return [rx.from_iterable(items).pipe(op, rxops.to_list()).run() for _ in range(3)]


def test_stop_checks_its_strings_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting(monkeypatch, rules_module, "normalize_stops")
    outs = run3(stop(["<end>", "<end>", "\n\n"]), ["a<e", "nd>b"])
    assert outs == [["a"]] * 3
    assert len(calls) == 1


def test_replace_and_hold_back_check_their_rules_once(monkeypatch: pytest.MonkeyPatch) -> None:
    rule_calls = counting(monkeypatch, rules_module, "normalize_rules")
    stop_calls = counting(monkeypatch, rules_module, "normalize_stops")
    assert run3(replace({"<NL>": "\n"}), ["x<N", "L>"]) == [["x", "\n"]] * 3
    assert run3(hold_back(["<b>"]), ["x<", "b>"]) == [["x", "<b>"]] * 3
    assert (len(rule_calls), len(stop_calls)) == (1, 1)


def test_text_pipeline_checks_everything_once(monkeypatch: pytest.MonkeyPatch) -> None:
    rule_calls = counting(monkeypatch, rules_module, "normalize_rules")
    stop_calls = counting(monkeypatch, rules_module, "normalize_stops")
    adapt_calls = counting(monkeypatch, detok_stream, "as_detok_tokenizer")
    op = text_pipeline(byte_tokenizer(), stop=["##"], replace={"a": "A"}, on_finish=lambda f: None)
    assert run3(op, list(b"ab##c")) == [["A", "b"]] * 3
    assert (len(rule_calls), len(stop_calls), len(adapt_calls)) == (1, 1, 1)


def test_sentence_stop_checks_its_strings_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting(monkeypatch, rules_module, "normalize_stops")
    ss = SentenceStop(["<end>"])
    for _ in range(3):
        assert ss.put("x<end>")["stop_str_found"]
        ss.clear()
    assert len(calls) == 1


def test_compiled_stop_rules_are_shared_not_rechecked() -> None:
    rules = stop_rules(["<end>", "\n"])
    assert stop_rules(rules) is rules
    a, b = StopMatcher(rules), StopMatcher(rules)
    assert a.feed("x<en") == "x" and b.feed("y\n") == "y" and b.stopped and not a.stopped
    assert a.feed("d>") == "" and a.stop_string == "<end>"
    compiled = replace_rules({"<b>": "B"})
    assert replace_rules(compiled) is compiled
    assert rxstream.replace_text("a<b>", compiled) == "aB"  # type: ignore[arg-type]
    assert stop_rules(["<b>"]).echo().pairs == (("<b>", "<b>"),)


def test_detokenize_adapts_its_tokenizer_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting(monkeypatch, detok_stream, "as_detok_tokenizer")
    op = detokenize(byte_tokenizer(), prompt_ids=[104])
    assert run3(op, [105, [33, 195], 169]) == [["i", "!", "é"]] * 3
    assert len(calls) == 1


def test_factory_checks_prompt_ids_at_once_and_builds_fresh_detokenizers() -> None:
    tok = byte_tokenizer()
    with pytest.raises(ValueError, match="outside the vocabulary"):
        StreamDetokenizer.factory(tok, prompt_ids=[10**6])
    with pytest.raises(TypeError, match="detokenize: prompt_ids must be"):
        StreamDetokenizer.factory(tok, prompt_ids=["a"], owner="detokenize")
    make = StreamDetokenizer.factory(tok, prompt_ids=[0xC3])  # the prompt ends inside "é"
    first, second = make(), make()
    assert first is not second
    assert first.push(0xA9) == "é" and second.push(0x41) == "A"


def iter_ids(text: str, tok: Any) -> Iterator[int]:
    yield from tok.encode(text, add_special_tokens=False).ids


def test_push_fast_serves_context_free_ids_and_defers_the_rest() -> None:
    """``push_fast`` returns the text of an id exactly when pushing it needs no context, else None
    without consuming it; mixed with ``push_one`` it gives ``decode``."""
    tok = bytelevel()
    det = StreamDetokenizer(tok)
    ids = list(iter_ids("plain text, then 中文 and 🗼 split over tokens", tok))
    out: list[str] = []
    fast = 0
    for i in ids:
        text = det.push_fast(i)
        if text is None:
            text = det.push_one(i)
        else:
            fast += 1
        out.append(text)
    out.append(det.finish())
    assert "".join(out) == tok.decode(ids)
    assert 0 < fast < len(ids)
    assert det.push_fast(10**9) is None  # out of vocabulary: not served (push_one raises)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        det.push_one(10**9)
    byte_det = StreamDetokenizer(byte_tokenizer())  # id n is the byte n
    assert byte_det.push_fast(0x61) == "a"
    assert byte_det.push_one(0xE4) == ""  # the first byte of "中" is held now
    assert byte_det.push_fast(0x61) is None  # so "a" needs context: not consumed
    assert byte_det.push_one(0xB8) + byte_det.push_one(0xAD) == "中"


def test_inexact_decoder_warning_is_public() -> None:
    assert rxstream.InexactDecoderWarning is InexactDecoderWarning
    assert "InexactDecoderWarning" in rxstream.__all__
    assert issubclass(InexactDecoderWarning, RuntimeWarning)
