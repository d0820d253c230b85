"""Constrained decoding in the ONNX backend (``generate(..., grammar=...)``) on the tiny
random-weight model: its unconstrained output is noise, so every valid document here is the
grammar's doing. Batched rows with different grammars (and rows without) beside each other give
what each gives alone."""

from __future__ import annotations

import json
import threading
from typing import Any

import jsonschema
import pytest
from reactivex import operators as ops

from rxstream import Finish, FinishReason, FinishRecorder
from rxstream.backends import OnnxModel
from rxstream.structured import Grammar, GrammarError, OutputFormat, compose
from tests.backends.test_scheduler import start, wait_idle

SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 4}},
        "required": ["tags"],
        "additionalProperties": False,
    },
    {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3},
    {
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/point"}, "q": {"$ref": "#/$defs/point"}},
        "required": ["p"],
        "additionalProperties": False,
        "$defs": {
            "point": {
                "type": "object",
                "properties": {"x": {"type": "integer", "minimum": -9, "maximum": 9}},
                "required": ["x"],
                "additionalProperties": False,
            }
        },
    },
]


def text_of(model: OnnxModel, ids: list[int]) -> str:
    return str(model.tokenizer.decode(ids, skip_special_tokens=False))


def generate(
    model: OnnxModel, prompt: list[int], grammar: Grammar | None, **kw: Any
) -> tuple[list[int], Finish]:
    rec = FinishRecorder()
    ids: list[int] = model.generate(prompt, on_finish=rec, grammar=grammar, **kw).pipe(ops.to_list()).run()
    assert rec.finish is not None
    return ids, rec.finish


@pytest.mark.parametrize("schema", SCHEMAS, ids=["person", "tags", "booleans", "ref"])
@pytest.mark.parametrize(
    "sampling", [{}, {"temperature": 1.0, "seed": 7}, {"temperature": 1.5, "top_p": 0.9, "seed": 3}]
)
def test_a_noise_model_writes_valid_json(
    model: OnnxModel, schema: dict[str, Any], sampling: dict[str, Any]
) -> None:
    grammar = compose(None, OutputFormat.json_schema(schema))
    prompt = model.encode_chat([{"role": "user", "content": "JSON please"}])
    ids, finish = generate(model, prompt, grammar, max_new_tokens=200, **sampling)
    value = json.loads(text_of(model, ids))
    jsonschema.validate(value, schema)
    assert finish == Finish(FinishReason.EOS)  # the grammar ended it, not the budget


def test_without_the_grammar_the_same_model_writes_noise(model: OnnxModel) -> None:
    prompt = model.encode_chat([{"role": "user", "content": "JSON please"}])
    ids, _ = generate(model, prompt, None, max_new_tokens=40, ignore_eos=True)
    with pytest.raises(ValueError):
        json.loads(text_of(model, ids))


def test_regex_and_grammar(model: OnnxModel) -> None:
    prompt = model.encode_chat([{"role": "user", "content": "a code"}])
    ids, _ = generate(
        model, prompt, compose(None, OutputFormat.regex("[A-Z]{2}-[0-9]{3}")), max_new_tokens=30
    )
    assert __import__("re").fullmatch("[A-Z]{2}-[0-9]{3}", text_of(model, ids))
    lark = 'start: "yes" | "no" | "maybe " NUM\nNUM: /[0-9]{1,2}/'
    for seed in range(4):
        ids, _ = generate(
            model, prompt, compose(None, OutputFormat.grammar(lark)), temperature=1.0, seed=seed
        )
        assert __import__("re").fullmatch("yes|no|maybe [0-9]{1,2}", text_of(model, ids))


def test_rows_with_different_grammars_in_one_batch_equal_each_alone(tiny_dir: Any) -> None:
    batched = OnnxModel.load(tiny_dir, provider="cpu", batching=True)
    alone = OnnxModel.load(tiny_dir, provider="cpu", batching=False)
    grammars = [compose(None, OutputFormat.json_schema(s)) for s in SCHEMAS]
    plan: list[tuple[Grammar | None, dict[str, Any]]] = [
        (grammars[0], {}),
        (None, {"ignore_eos": True}),
        (grammars[1], {"temperature": 1.0, "seed": 11}),
        (grammars[3], {}),
        (None, {"temperature": 1.0, "seed": 5, "ignore_eos": True}),
        (grammars[0], {"temperature": 1.0, "seed": 2}),
        (grammars[2], {"temperature": 0.8, "seed": 9}),
    ]
    prompts = [batched.encode_chat([{"role": "user", "content": f"question {i}"}]) for i in range(len(plan))]
    gate = threading.Event()
    runs = [
        start(batched, p, gate.is_set, grammar=g, max_new_tokens=60, **kw)
        for p, (g, kw) in zip(prompts, plan, strict=True)
    ]
    gate.set()
    assert all(r.ended.wait(60) for r in runs)
    stats = batched.batch_stats()
    assert stats is not None and stats["peak_rows"] >= 4  # really side by side
    for prompt, (g, kw), run in zip(prompts, plan, runs, strict=True):
        assert not run.errors
        ids, finish = generate(alone, prompt, g, max_new_tokens=60, **kw)
        assert run.ids == ids
        assert run.finish == finish
        if g is not None:
            json.loads(text_of(alone, ids))
    wait_idle(batched)


def test_logprobs_stay_the_models_own(model: OnnxModel) -> None:
    prompt = model.encode_chat([{"role": "user", "content": "JSON please"}])
    grammar = compose(None, OutputFormat.json_object())
    pieces = model.generate(prompt, grammar=grammar, logprobs=2, max_new_tokens=10).pipe(ops.to_list()).run()
    free = model.generate(prompt, logprobs=2, max_new_tokens=1).pipe(ops.to_list()).run()
    assert text_of(model, list(pieces[0].ids)).startswith("{")
    # the first position's distribution is the same with and without the grammar
    assert pieces[0].top_logprobs[0] == free[0].top_logprobs[0]


def test_bad_grammars_raise_in_the_call(model: OnnxModel) -> None:
    prompt = model.encode_chat([{"role": "user", "content": "hi"}])
    with pytest.raises(GrammarError, match="does not compile"):
        model.generate(prompt, grammar=Grammar('{"grammars": [{"lark_grammar": "start: nope"}]}'))
    with pytest.raises(TypeError, match=r"grammar must be a rxstream\.structured\.Grammar"):
        model.generate(prompt, grammar="start: x")  # type: ignore[call-overload]


def test_a_cancelled_constrained_row_leaves_nothing(tiny_dir: Any) -> None:
    batched = OnnxModel.load(tiny_dir, provider="cpu", batching=True)
    grammar = compose(None, OutputFormat.regex("[a-z ]{1,400}"))
    prompt = batched.encode_chat([{"role": "user", "content": "words"}])
    run = start(batched, prompt, grammar=grammar, max_new_tokens=400)
    while len(run.ids) < 3:
        assert not run.ended.wait(0.01)
    run.subscription.dispose()
    wait_idle(batched)
    assert run.finish == Finish(FinishReason.CANCELLED)
