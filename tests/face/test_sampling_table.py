"""The sampling table: each face's options, request fields and ranges come from
``SamplingParams.table()`` (declared once, with the dataclass), and each face refuses an
out-of-range value in its own spelling."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from rxstream import SamplingParams, SamplingParamsError
from rxstream._sampling_params import SamplingField
from rxstream.cli import build_parser
from rxstream.face import add_model_options, describe_sampling, sampling_from_args, sampling_option
from rxstream.server import RequestError, ServerLimits
from rxstream.server._args import add_serve_arguments
from rxstream.server._request_sampling import REQUEST_FIELDS, reported_defaults
from rxstream.server._requests import validate_request

TABLE = SamplingParams.table()
FLAGGED = [spec for spec in TABLE if spec.flag is not None]
REQUESTED = [spec for spec in TABLE if spec.json is not None]
LIMITS = ServerLimits()


def _inside(spec: SamplingField) -> Any:
    """A value inside the faces' range that is not the field's default."""
    bounds = spec.limit or spec.domain
    lo = bounds.lo if bounds.lo is not None else 0
    hi = bounds.hi if bounds.hi is not None else lo + 4
    value = (lo + hi) / 2 if spec.kind == "float" else int(lo) + 1
    return value


def _outside(spec: SamplingField) -> list[Any]:
    """Values of the right type beyond the faces' range (its lower and upper ends)."""
    bounds = spec.limit or spec.domain
    out: list[Any] = []
    if bounds.lo is not None:
        out.append(
            bounds.lo if bounds.lo_open else (bounds.lo - 1 if spec.kind == "int" else bounds.lo - 0.5)
        )
    if bounds.hi is not None:
        out.append(int(bounds.hi) + 1 if spec.kind == "int" else bounds.hi + 0.5)
    return out


def _chat(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(["chat", "hi", *argv])


def _serve(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    return parser.parse_args(argv)


def test_the_table_has_every_field_once_and_its_defaults_are_the_dataclass_defaults() -> None:
    assert tuple(spec.name for spec in TABLE) == SamplingParams.fields()
    defaults = SamplingParams()
    assert all(getattr(defaults, spec.name) == spec.default for spec in TABLE)
    flags = [spec.flag for spec in FLAGGED]
    names = [spec.json for spec in REQUESTED]
    assert len(set(flags)) == len(flags) and len(set(names)) == len(names)
    assert REQUEST_FIELDS == set(names)


@pytest.mark.parametrize("parse", [_chat, _serve], ids=["chat", "serve"])
@pytest.mark.parametrize("spec", FLAGGED, ids=lambda spec: spec.name)
def test_every_flag_of_the_table_is_an_option_of_both_faces(parse: Any, spec: SamplingField) -> None:
    value = _inside(spec)
    args = parse([spec.flag, str(value)])
    assert sampling_from_args(args)[spec.name] == value
    unset = sampling_from_args(parse([]))
    assert unset.get(spec.name) == (spec.default if spec.face_default else None)


@pytest.mark.parametrize("spec", FLAGGED, ids=lambda spec: spec.name)
def test_options_out_of_range_are_refused_naming_the_flag(spec: SamplingField) -> None:
    for value in _outside(spec):
        with pytest.raises(ValueError, match=rf"^{spec.flag} must be ") as info:
            sampling_from_args(_chat([spec.flag, str(value)]))
        assert not isinstance(info.value, SamplingParamsError)  # the flag's spelling, not the field's


@pytest.mark.parametrize("chat", [True, False], ids=["chat", "completions"])
@pytest.mark.parametrize("spec", REQUESTED, ids=lambda spec: spec.name)
def test_every_request_field_of_the_table_is_read_and_refused_by_its_json_name(
    spec: SamplingField, chat: bool
) -> None:
    base: dict[str, Any] = {"messages": [{"role": "user", "content": "x"}]} if chat else {"prompt": "x"}
    value = _inside(spec)
    req = validate_request({**base, spec.json: value}, chat=chat, limits=LIMITS)
    got = req.max_tokens if spec.name == "max_new_tokens" else req.sampling[spec.name]
    assert got == value
    for bad in _outside(spec):
        if spec.name == "max_new_tokens" and bad > LIMITS.max_tokens:
            bad = LIMITS.max_tokens + 1  # the server's own upper end
        if bad == spec.json_off:
            bad -= 1  # -1 is vLLM's "off" for top_k
        with pytest.raises(RequestError) as info:
            validate_request({**base, spec.json: bad}, chat=chat, limits=LIMITS)
        assert info.value.param == spec.json
        assert str(info.value).startswith(f"'{spec.json}' must be ")
    with pytest.raises(RequestError) as typed:
        validate_request({**base, spec.json: "five"}, chat=chat, limits=LIMITS)
    assert typed.value.param == spec.json


@pytest.mark.parametrize("spec", [s for s in TABLE if s.limit is not None], ids=lambda spec: spec.name)
def test_the_faces_limit_is_narrower_than_the_domain(spec: SamplingField) -> None:
    """What SamplingParams takes from code (the domain) covers what the faces take from users."""
    assert spec.limit is not None
    for value in _outside(spec):
        if spec.domain.holds(value):
            SamplingParams(**{spec.name: value})  # a library value, refused only from a user
            with pytest.raises(SamplingParamsError) as info:
                SamplingParams.requested({spec.name: value})
            assert info.value.field == spec.name


def test_the_flag_and_request_spellings_of_a_field() -> None:
    assert sampling_option("top_p") == "--top-p" and sampling_option("max_new_tokens") == "--max-tokens"
    assert sampling_option("stop_token_ids") == "stop_token_ids"  # no option: the field's name
    with pytest.raises(ValueError, match=r"^--top-p must be in \(0, 1\], got 2.0$"):
        sampling_from_args(_chat(["--top-p", "2"]))
    with pytest.raises(RequestError, match=r"^'top_p' must be in \(0, 1\], got 2$"):
        validate_request({"prompt": "x", "top_p": 2}, chat=False, limits=LIMITS)
    assert validate_request({"prompt": "x", "top_k": -1}, chat=False, limits=LIMITS).sampling["top_k"] == 0


def test_reported_defaults_and_banner_come_from_the_table() -> None:
    params = SamplingParams(temperature=0.7, top_k=50, top_p=0.9, repetition_penalty=1.1)
    assert reported_defaults(params, 100) == {
        "temperature": 0.7,
        "top_k": 50,
        "top_p": 0.9,
        "repetition_penalty": 1.1,
        "max_tokens": 100,
    }
    assert describe_sampling(params) == "temperature 0.7, top_k 50, top_p 0.9, repetition_penalty 1.1"
    assert describe_sampling(SamplingParams()) == "greedy"
    assert (
        describe_sampling(SamplingParams(top_k=5, repetition_penalty=1.2)) == "greedy, repetition_penalty 1.2"
    )


def test_both_faces_take_the_shared_option_set() -> None:
    parser = argparse.ArgumentParser()
    add_model_options(parser)
    shared = {a.dest for a in parser._actions} - {"help"}
    for parse in (_chat, _serve):
        assert shared <= set(vars(parse([])))
    assert {"model", "provider", "quantization", "reasoning_format"} <= shared
    assert {spec.dest for spec in FLAGGED} <= shared


def test_the_quantization_option_names_the_backends_builds() -> None:
    # the faces write the choices out (parsing imports no backend); they must be the backend's
    from rxstream.backends.onnx import QUANTIZATIONS
    from rxstream.face import QUANTIZATIONS as FACE_QUANTIZATIONS

    assert FACE_QUANTIZATIONS == QUANTIZATIONS
    for parse in (_chat, _serve):
        assert parse([]).quantization == "fp32"
        assert parse(["--int4"]).quantization == "int4"
        assert parse(["--quantization", "int4-a8"]).quantization == "int4-a8"


def test_serve_refuses_a_bad_option_naming_it_and_passes_the_sampling_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rxstream.server import _args

    assert _args.serve_from_args(_serve(["--temperature", "5"])) == 2
    assert capsys.readouterr().err.strip() == "rxstream serve: --temperature must be in [0, 2], got 5.0"
    seen: dict[str, Any] = {}
    monkeypatch.setattr(_args, "serve", lambda **kw: seen.update(kw))
    assert _args.serve_from_args(_serve(["--top-p", "0.5", "--max-tokens", "99"])) == 0
    assert seen["sampling"] == {"top_p": 0.5} and seen["limits"].default_max_tokens == 99


def test_the_cli_imports_no_private_server_module_for_options_or_loading() -> None:
    import ast
    from pathlib import Path

    import rxstream.cli

    # the chat pipeline's parts, and --tools read with the server's own checks; never the
    # server's options (_args) or its loader (_run)
    allowed = {f"rxstream.server.{m}" for m in ("_channels", "_tools", "_errors", "_limits")}
    for path in Path(rxstream.cli.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                name = (
                    "rxstream.cli." if node.level == 1 else "rxstream." if node.level == 2 else ""
                ) + node.module
                if name.startswith("rxstream.server._"):
                    assert name in allowed, f"{path.name} imports {name}"
