"""transformers ``response_template`` loaded unchanged: the message equals ``parse_response``'s.

The fixtures (tests/channels/data/response_templates.json) are the published test fixtures of
transformers' response parsing: its templates (cohere, ernie, gpt-oss, smollm, qwen3, gemma4,
inkling and the small ones of its tests), model outputs and expected messages. On top of them:
the same messages streamed per character and per real token, generated outputs compared with
``transformers.utils.chat_parsing.parse_response`` itself, and the loader's errors.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
import reactivex as rx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reactivex import operators as ops

from rxstream import Piece
from rxstream.channels import (
    MessageBuilder,
    ResponseTemplate,
    Router,
    Segment,
    SpecialToken,
    load_response_template,
    parse_message,
    route_spec,
    route_text,
)
from rxstream.channels._content import (
    ToolSchemas,
    apply_transform,
    coerce_argument,
    parse_content,
    schema_types,
)
from rxstream.operators import detokenize, route
from rxstream.testing.tokenizers import bytelevel, llama

DATA = json.loads((Path(__file__).parent / "data" / "response_templates.json").read_text(encoding="utf-8"))
TEMPLATES: dict[str, Any] = DATA["templates"]
CASES: dict[str, Any] = {c["name"]: c for c in DATA["cases"]}

transformers_parsing = pytest.importorskip("transformers.utils.chat_parsing")
content_parsers = pytest.importorskip("transformers.utils.chat_parsing.content_parsers")
response_parser = pytest.importorskip("transformers.utils.chat_parsing.response_parser")
parse_response = transformers_parsing.parse_response


def template_of(case: dict[str, Any]) -> dict[str, Any]:
    return TEMPLATES[case["template"]]  # type: ignore[no-any-return]


def build(template: Any, segments: list[Segment], tools: Any = None) -> dict[str, Any]:
    builder = MessageBuilder(template, tools)
    builder.feed(segments)
    return builder.finish()


def streamed(template: ResponseTemplate, chunks: list[str], tools: Any = None) -> dict[str, Any]:
    """Route chunk by chunk and build the message as the segments come."""
    router = Router(template.compiled)
    builder = MessageBuilder(template, tools)
    for chunk in chunks:
        builder.feed(router.feed(chunk))
    builder.feed(router.finish())
    return builder.finish()


# -- the published fixtures -----------------------------------------------------------------------


def test_the_fixtures_are_the_published_ones() -> None:
    assert "Apache-2.0" in DATA["source"] and "test_chat_parsing.py" in DATA["source"]
    for name in ("cohere", "ernie", "gpt_oss", "smollm", "qwen3", "gemma4", "inkling"):
        assert name in TEMPLATES
    assert len(CASES) == 52


@pytest.mark.parametrize("name", sorted(CASES))
def test_published_fixture(name: str) -> None:
    case = CASES[name]
    got = parse_message(case["text"], template_of(case), prefix=case["prefix"], tools=case.get("tools"))
    assert got == case["expected"]
    # the stored expectation is also what the installed transformers gives
    assert (
        parse_response(case["text"], template_of(case), prefix=case["prefix"], tools=case.get("tools")) == got
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_published_fixture_streamed_per_character(name: str) -> None:
    case = CASES[name]
    template = load_response_template(template_of(case))
    text = template.prompt_tail(case["prefix"]) + case["text"]
    assert streamed(template, list(text), case.get("tools")) == case["expected"]


_TOKENIZERS: dict[str, Any] = {}


def tokenizer(kind: str) -> Any:
    if kind not in _TOKENIZERS:
        _TOKENIZERS[kind] = bytelevel(800, 80_000) if kind == "bytelevel" else llama(800, 80_000)
    return _TOKENIZERS[kind]


@pytest.mark.parametrize("kind", ["bytelevel", "llama"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_published_fixture_streamed_per_real_token(name: str, kind: str) -> None:
    """Real token ids, detokenized aligned (pieces with ids), routed, built: equals the batch."""
    case = CASES[name]
    template = load_response_template(template_of(case))
    tok = tokenizer(kind)
    text = template.prompt_tail(case["prefix"]) + case["text"]
    ids = tok.encode(text).ids
    decoded = tok.decode(ids)
    segs: list[Segment] = (
        rx.from_iterable(ids).pipe(detokenize(tok, aligned=True), route(template.spec), ops.to_list()).run()
    )
    assert [i for s in segs for i in (s.ids or ())] == ids
    expected = parse_message(decoded, template, tools=case.get("tools"))
    if decoded == text:
        assert expected == case["expected"]
    assert build(template, segs, case.get("tools")) == expected
    # the batch parse of the decoded text is transformers' too
    assert parse_response(decoded, template_of(case), prefix="", tools=case.get("tools")) == expected


# -- generated outputs against transformers ---------------------------------------------------------

WORDS = st.sampled_from(["a", "b c", " ", "\n", "x\n\n", "<", ">", "/", "think", "é", "{", "}"])
plain = st.lists(WORDS, max_size=6).map("".join)
args_json = st.dictionaries(st.sampled_from(["city", "n", "unit"]), st.sampled_from(["Paris", 3, True, None]))
names = st.sampled_from(["get_weather", "f", "set_alarm"])


def _json_call(name: str, args: dict[str, Any]) -> str:
    return json.dumps({"name": name, "arguments": args})


def _qwen_call(name: str, args: dict[str, Any]) -> str:
    body = "".join(f"<parameter={k}>\n{json.dumps(v)}\n</parameter>\n" for k, v in args.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def _gpt_oss_call(name: str, args: dict[str, Any]) -> str:
    head = f"<|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>"
    return f"{head}{json.dumps(args)}<|call|>"


BLOCKS: dict[str, Any] = {
    "smollm": st.one_of(
        plain,
        plain.map(lambda t: f"<think>{t}</think>"),
        st.builds(lambda n, a: f"<tool_call>{_json_call(n, a)}</tool_call>", names, args_json),
        st.sampled_from(
            ["<|im_end|>", "</think>", "</tool_call>", "<think>", "<tool_call", "<tool_call>{x</tool_call>"]
        ),
    ),
    "qwen3": st.one_of(
        plain,
        plain.map(lambda t: f"<think>\n{t}\n</think>\n\n"),
        st.builds(_qwen_call, names, args_json),
        st.sampled_from(
            [
                "</think>",
                "<tool_call>",
                "</tool_call>",
                "<function=x>",
                "<tool_call> <function=",
                "<parameter=a>",
            ]
        ),
    ),
    "gpt_oss": st.one_of(
        plain.map(lambda t: f"<|channel|>analysis<|message|>{t}<|end|>"),
        plain.map(lambda t: f"<|start|>assistant<|channel|>final<|message|>{t}<|end|>"),
        st.builds(_gpt_oss_call, names, args_json),
        plain,
        st.sampled_from(
            [
                "<|end|>",
                "<|message|>",
                "<|channel|>",
                "<|call|>",
                "<|channel|>commentary to=functions.",
                "{x<|call|>",
            ]
        ),
    ),
    "inkling": st.one_of(
        plain,
        st.builds(
            lambda head, kind, t: f"{head}<|content_{kind}|>{t}<|end_message|>",
            st.sampled_from(["", "<|message_model|>", "<|message_model|>bot", "x y"]),
            st.sampled_from(["thinking", "text"]),
            plain,
        ),
        st.builds(
            lambda n, a: (
                f"<|message_model|>{n}<|content_invoke_tool_json|>"
                + json.dumps({"name": n, "args": a})
                + "<|end_message|>"
            ),
            names,
            args_json,
        ),
        st.sampled_from(
            ["<|end_message|>", "<|message_model|>", "<|content_text|>", "<|content_model_end_sampling|>"]
        ),
    ),
    "ernie": st.one_of(
        plain,
        plain.map(lambda t: f"<think>{t}</think>\n\n"),
        plain.map(lambda t: f"<response>\n{t}\n</response>"),
        st.builds(lambda n, a: f"<tool_call>\n{_json_call(n, a)}\n</tool_call>\n", names, args_json),
        st.sampled_from(
            ["</think>", "<think>\n", "</response>", "\n</s>", "<response>", "<tool_call>{</tool_call>"]
        ),
    ),
}


def _outcome(fn: Any) -> Any:
    try:
        return ("ok", fn())
    except ValueError:
        return ("ValueError", None)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(BLOCKS)), st.data())
def test_generated_outputs_parse_like_transformers(name: str, data: st.DataObject) -> None:
    blocks = data.draw(st.lists(BLOCKS[name], max_size=6))
    text = "".join(blocks)
    source = TEMPLATES[name]
    ours = _outcome(lambda: parse_message(text, source))
    theirs = _outcome(lambda: parse_response(text, source, prefix=""))
    assert ours == theirs, text
    cuts = data.draw(st.lists(st.integers(0, max(len(text), 1)), max_size=8))
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(text)}), len(text)]
    chunks = [text[a:b] for a, b in itertools.pairwise(bounds)]
    template = load_response_template(source)
    assert _outcome(lambda: streamed(template, chunks)) == ours


# -- the loaded spec ----------------------------------------------------------------------------


def test_spec_of_the_published_templates() -> None:
    ernie = load_response_template(TEMPLATES["ernie"])
    spec = ernie.spec
    assert [r.channel for r in spec.regions] == ["content", "thinking", "tool_calls"]  # by name
    assert spec.default == "unrouted" and spec.kind("unrouted") == "other"
    assert spec.initial == "thinking"
    assert (spec.kind("thinking"), spec.kind("tool_calls"), spec.kind("content")) == (
        "reasoning",
        "tool_call",
        "content",
    )
    (think_open,) = spec.regions[1].open
    assert not isinstance(think_open, (str, SpecialToken))
    assert think_open.allow_empty and not think_open.shortest
    smollm = load_response_template(TEMPLATES["smollm"]).spec
    assert smollm.default == "content" and smollm.default_close == ("<|im_end|>",)
    assert smollm.initial is None and smollm.start_anchor == ("<|im_start|>assistant\n",)
    gpt = load_response_template(TEMPLATES["gpt_oss"])
    (tool_open,) = gpt.spec.regions[2].open
    assert not isinstance(tool_open, (str, SpecialToken))
    assert tool_open.shortest and tool_open.max_hold == 4096
    assert gpt.fields["tool_calls"].repeats and gpt.fields["thinking"].content == "text"
    gemma = load_response_template(TEMPLATES["gemma4"]).spec
    assert gemma.start_anchor == ("<|turn>model\n", "<tool_response|>")
    assert gemma.default_close == ("<turn|>", "<|tool_response>", "<eos>")
    inkling = load_response_template(TEMPLATES["inkling"])
    assert inkling.fields["thinking"].join == "" and inkling.fields["thinking"].content_args == {
        "strip": False
    }


def test_bounded_patterns_hold_their_longest_match() -> None:
    t = load_response_template(
        {"start_anchor": "A", "fields": {"c": {"open": "<c>", "close_pattern": r"\n?</c>"}}}
    )
    (close,) = t.spec.regions[0].close
    assert not isinstance(close, (str, SpecialToken)) and close.max_hold == 5


def test_load_from_json_text_a_file_and_a_tokenizer_config(tmp_path: Path) -> None:
    source = TEMPLATES["smollm"]
    text = "<think>a</think>b"
    expected = parse_message(text, source)
    assert parse_message(text, json.dumps(source)) == expected
    path = tmp_path / "template.json"
    path.write_text(json.dumps(source), encoding="utf-8")
    assert parse_message(text, path) == expected
    assert parse_message(text, str(path)) == expected
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"model_max_length": 8, "response_template": source}), encoding="utf-8")
    assert parse_message(text, config) == expected
    assert load_response_template(load_response_template(source)).fields.keys() == source["fields"].keys()
    with pytest.raises(ValueError, match="cannot read"):
        load_response_template(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="not JSON"):
        load_response_template("{not json")


def test_start_anchor_pattern_and_the_prompt_tail() -> None:
    source = {
        "start_anchor_pattern": r"<\|im_start\|>(?:assistant|model)\n",
        "fields": {"thinking": {"open": "<think>", "close": "</think>"}, "content": {}},
    }
    t = load_response_template(source)
    assert t.spec.start_anchor == ()
    prompt = "<|im_start|>user\nhi<|im_start|>model\nold<|im_start|>assistant\n<think>\n"
    assert t.prompt_tail(prompt) == "<think>\n"
    assert t.prompt_tail("no anchor") == "no anchor"
    assert parse_message("x</think>y", t, prefix=prompt) == parse_response(
        "x</think>y", source, prefix=prompt
    )
    assert parse_message("x</think>y", t, prefix=prompt) == {"thinking": "x", "content": "y"}


# -- the builder on hand-made segments ------------------------------------------------------------

SMOLLM = TEMPLATES["smollm"]


def test_builder_implicit_runs_and_last_value_wins() -> None:
    segs = [
        Segment("content", "chunk", "hello "),
        Segment("tool_calls", "open", "<tool_call>"),
        Segment("tool_calls", "chunk", '{"name": "f", "arguments": {}}'),
        Segment("tool_calls", "close", "</tool_call>"),
        Segment("content", "chunk", "world"),
        Segment("content", "close", "<|im_end|>"),
        Segment("content", "chunk", "\n"),  # a new run: whitespace only -> "" -> dropped at the end
    ]
    assert build(SMOLLM, segs) == {
        "role": "assistant",
        "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {}}}],
    }
    text = 'hello <tool_call>{"name": "f", "arguments": {}}</tool_call>world<|im_end|>\n'
    assert parse_response(text, SMOLLM, prefix="") == build(SMOLLM, segs)


def test_builder_reads_a_stray_close_as_text_and_reports_closed_fields() -> None:
    builder = MessageBuilder(SMOLLM)
    assert builder.feed([Segment("content", "chunk", "a"), Segment("content", "malformed", "</think>")]) == []
    assert builder.field == "content"
    closed = builder.feed([Segment("thinking", "open", "<think>"), Segment("thinking", "chunk", " t ")])
    assert closed == [("content", "a</think>")]
    assert builder.message == {"role": "assistant", "content": "a</think>"}
    assert builder.feed([Segment("thinking", "malformed", "")]) == []  # still open at the end
    assert builder.finish() == {"role": "assistant", "content": "a</think>", "thinking": "t"}
    assert parse_response("a</think><think> t ", SMOLLM, prefix="") == builder.message
    with pytest.raises(ValueError, match="finished"):
        builder.feed([])
    with pytest.raises(ValueError, match="finished"):
        builder.finish()


def test_builder_errors() -> None:
    with pytest.raises(ValueError, match="unknown field 'nope'"):
        MessageBuilder(SMOLLM).feed([Segment("nope", "open", "<x>")])
    required = {
        "defaults": {"role": "assistant"},
        "start_anchor": "<|assistant|>",
        "fields": {"content": {"open": "<response>", "close": "</response>", "optional": False}},
    }
    with pytest.raises(ValueError, match="content"):
        parse_message("no response here", required)
    with pytest.raises(ValueError):
        parse_response("no response here", required, prefix="")
    joined = {
        "start_anchor": "a",
        "fields": {"x": {"open": "<x>", "close": "</x>", "repeats": True, "join": "", "content": "json"}},
    }
    with pytest.raises(ValueError, match="parse to a string"):
        parse_message("<x>{}</x>", joined)
    each = {
        "start_anchor": "a",
        "fields": {
            "x": {
                "open": "<x>",
                "close": "</x>",
                "content": "json",
                "transform_each": True,
                "transform": {"v": "{k}"},
            }
        },
    }
    with pytest.raises(ValueError, match="needs a list"):
        parse_message('<x>{"k": 1}</x>', each)
    with pytest.raises(ValueError, match="list of objects"):
        parse_message("<x>[1]</x>", each)
    assert parse_message('<x>[{"k": 1}, {"k": 2}]</x>', each) == {"x": [{"v": 1}, {"v": 2}]}


def test_transform_dotted_path_errors_like_transformers() -> None:
    def spec_with(transform: Any) -> dict[str, Any]:
        return {
            "start_anchor": "<|assistant|>",
            "fields": {"x": {"open": "<x>", "close": "</x>", "content": "json", "transform": transform}},
        }

    with pytest.raises(ValueError, match="missing key 'args'"):
        parse_message('<x>{"name": "n"}</x>', spec_with({"a": "{content.args}"}))
    with pytest.raises(ValueError, match="cannot index into str"):
        parse_message('<x>{"name": "n"}</x>', spec_with({"a": "{content.name.x}"}))
    with pytest.raises(KeyError):
        parse_message("<x>{}</x>", spec_with({"a": "{missing}"}))
    assert apply_transform({"a": ["{x}", 3, "plain {", "{x.y}"]}, {"x": {"y": 1}}) == {
        "a": [{"y": 1}, 3, "plain {", 1]
    }


# -- the start gate (RouteSpec.initial) --------------------------------------------------------------

ERNIE = TEMPLATES["ernie"]


@pytest.mark.parametrize(
    "text",
    [
        "plan</think>\n\n<response>\nhi\n</response>",
        "<response>\nhi\n</response>",  # another region's opening delimiter at the start wins
        '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>',
        "<think>\nplan</think><response>\nok</response>",  # its own delimiter: region text
        "</think>x",
        "",
        "<respons",
        "<resp</think><response>\nz</response>",
    ],
)
def test_initial_region_matches_transformers(text: str) -> None:
    expected = parse_response(text, ERNIE, prefix="")
    template = load_response_template(ERNIE)
    assert parse_message(text, template) == expected
    assert streamed(template, list(text)) == expected
    # with the generation prompt ending at the anchor, the gate waits for the generation
    prompt = "User: hi\nAssistant:"
    assert parse_message(text, template, prefix=prompt) == parse_response(text, ERNIE, prefix=prompt)
    router = Router(template.compiled, prompt=prompt)
    segs = [s for c in text for s in router.feed(c)] + router.finish()
    assert build(template, segs) == expected


def test_initial_region_segments_and_held_text() -> None:
    spec = route_spec({"reasoning": ("<think>", "</think>"), "answer": ("<a>", "</a>")}, initial="reasoning")
    router = Router(spec)
    assert router.feed("<") == [] and router.held == "<"  # "<a>" may start here
    segs = router.feed("b")  # not "<a>": the initial region is open and holds "<b"
    assert segs == [Segment("reasoning", "open", ""), Segment("reasoning", "chunk", "<b")]
    assert route_text("<a>x</a>y", spec) == [
        Segment("answer", "open", "<a>"),
        Segment("answer", "chunk", "x"),
        Segment("answer", "close", "</a>"),
        Segment("content", "chunk", "y"),
    ]
    assert route_text("<think>x</think>y", spec)[:2] == [
        Segment("reasoning", "open", ""),
        Segment("reasoning", "chunk", "<think>x"),
    ]
    # a prompt that already decided the start
    assert Router(spec, prompt="why").channel == "reasoning"
    assert Router(spec, prompt="<a>").channel == "answer"
    assert Router(spec, prompt="<").channel == "reasoning"  # undecided at its end: as at an end
    with pytest.raises(ValueError, match="initial 'nope'"):
        route_spec({"reasoning": ("<think>", "</think>")}, initial="nope")


def test_initial_region_with_aligned_pieces_and_special_tokens() -> None:
    spec = route_spec(
        {"reasoning": ("<think>", SpecialToken(9, "</think>")), "answer": (SpecialToken(7, "<a>"), "</a>")},
        initial="reasoning",
    )
    r = Router(spec, aligned=True)
    segs = r.feed_piece(Piece("<a>", (7,))) + r.feed_piece(Piece("x", (1,))) + r.finish()
    assert [(s.channel, s.event, s.text, s.ids) for s in segs] == [
        ("answer", "open", "<a>", (7,)),
        ("answer", "chunk", "x", (1,)),
        ("answer", "malformed", "", ()),
    ]
    r = Router(spec, aligned=True)
    segs = r.feed_piece(Piece("ab", (1, 2))) + r.feed_piece(Piece("</think>", (9,))) + r.finish()
    assert [(s.channel, s.event, s.text, s.ids) for s in segs] == [
        ("reasoning", "open", "", ()),
        ("reasoning", "chunk", "ab", (1, 2)),
        ("reasoning", "close", "</think>", (9,)),
    ]


# -- the loader's errors --------------------------------------------------------------------------


def _with_field(**field: Any) -> dict[str, Any]:
    return {"start_anchor": "<|assistant|>", "fields": {"x": {"open": "<x>", "close": "</x>", **field}}}


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ([], "must be a dict"),
        ({**SMOLLM, "version": 2}, "unsupported version 2"),
        ({**SMOLLM, "extra": 1}, "unknown keys \\['extra'\\]"),
        ({"start_anchor": "a", "fields": {}}, "non-empty"),
        ({"start_anchor": "a", "fields": []}, "non-empty"),
        ({**SMOLLM, "defaults": []}, "defaults must be an object"),
        ({"fields": SMOLLM["fields"]}, "start_anchor"),
        ({**SMOLLM, "start_anchor_pattern": "x"}, "both 'start_anchor' and 'start_anchor_pattern'"),
        ({"start_anchor": "a", "fields": {"a": {}, "b": {}}}, "at most one field.*a, b"),
        (_with_field(colour=1), "field 'x': unknown keys \\['colour'\\]"),
        ({"start_anchor": "a", "fields": {"x": 3}}, "field 'x': must be an object"),
        (_with_field(content="yaml"), "field 'x': unknown content parser 'yaml'"),
        (_with_field(join=""), "field 'x': 'join' requires 'repeats'"),
        (_with_field(repeats=True, join=7), "field 'x': 'join' must be a string"),
        (_with_field(repeats="yes"), "field 'x': repeats must be a bool"),
        (_with_field(transform_each=True), "field 'x': transform_each is set but no transform"),
        (_with_field(transform_each=1, transform={}), "transform_each must be a bool"),
        (_with_field(transform={"label": "name: {content}"}), "field 'x'.*interpolation"),
        (
            {"start_anchor": "a", "fields": {"x": {"open_pattern": r"<t (?P<name>\w+)>", "close": "</t>"}}},
            "field 'x': .*named group.*'name'.*transform",
        ),
        (_with_field(open=[]), "field 'x': 'open' list must contain at least one"),
        (_with_field(open=[""]), "field 'x': 'open' literals cannot be empty"),
        (_with_field(open=[1, 2]), "field 'x': 'open' list must contain only strings"),
        (_with_field(open={"foo": "bar"}), "field 'x': 'open' must be a string or a list"),
        (_with_field(open_pattern="<y>"), "field 'x': cannot specify both 'open' and 'open_pattern'"),
        (_with_field(content="xml-inline"), "field 'x': xml-inline needs content_args.tag_pattern"),
        (_with_field(content="xml-inline", content_args={"tag_pattern": "<(\\w+)>"}), "named group 'key'"),
        (_with_field(content_args=[1]), "field 'x': content_args must be an object"),
        (_with_field(content="json", content_args={"string_delims": ["<"]}), "string_delims"),
        (_with_field(content="kv-lines", content_args={"value_parser": {"name": "toml"}}), "value_parser"),
        (
            {"start_anchor": "a", "fields": {"x": {"open_pattern": "(", "close": ")"}}},
            "field 'x': invalid open_pattern",
        ),
    ],
)
def test_loader_errors_name_the_field(template: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        load_response_template(template)
    assert "\n" not in str(info.value)


def _pattern_field(**field: Any) -> dict[str, Any]:
    return {"start_anchor": "a", "fields": {"x": {**field, "transform": {"c": "{content}"}}}}


@pytest.mark.parametrize(
    ("template", "message"),
    [
        (_pattern_field(open_pattern="<x(?=y)", close="</x>"), "field 'x': open_pattern .*look-ahead"),
        (_pattern_field(open_pattern="(?<=a)<x>", close="</x>"), "field 'x': open_pattern .*look-behind"),
        (_pattern_field(open="<x>", close_pattern=r"<(\w)>\1"), "field 'x': close_pattern .*back-reference"),
        (
            _pattern_field(open="<x>", close_pattern="</x>$"),
            "field 'x': close_pattern .*\\$ without MULTILINE",
        ),
        (_pattern_field(open="<x>", close_pattern="$"), "field 'x': close_pattern .*\\$ without MULTILINE"),
        (
            _pattern_field(open_pattern="x*", close="</x>"),
            "field 'x': open_pattern 'x\\*' can match the empty",
        ),
        (_pattern_field(open_pattern="(?:<x>|^)", close="</x>"), "only a first alternative"),
        (_pattern_field(open_pattern="^", close="</x>"), "matches only the empty string"),
        (_pattern_field(open="<x>", close_pattern="(?:</x>)?"), "field 'x': close_pattern .*before the end"),
        (_pattern_field(open_pattern="<x(?>y)", close="</x>"), "atomic group"),
    ],
)
def test_patterns_the_engine_cannot_stream_exactly_are_refused(template: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        load_response_template(template)
    assert "\n" not in str(info.value)


def test_accepted_empty_matches() -> None:
    # an empty match at the end only: the end of the stream, where a region closes anyway
    for close in (r"\Z", r"(?:</x>|\Z)"):
        source = {"start_anchor": "a", "fields": {"x": {"open": "<x>", "close_pattern": close}}}
        for text in ("<x>a</x>b", "<x>a"):
            assert parse_message(text, source) == parse_response(text, source, prefix="")
    with pytest.raises(ValueError, match="max_hold"):
        load_response_template(SMOLLM, max_hold=0)


# -- content parsers and casts, against transformers' ----------------------------------------------


def _same(ours: Any, theirs: Any) -> None:
    a, b = _outcome(ours), _outcome(theirs)
    assert a == b


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='{}[],:" \n\tab1-.e<|>\\', max_size=30), st.booleans(), st.booleans(), st.booleans())
def test_json_dialect_like_transformers(text: str, unquoted: bool, delims: bool, lax: bool) -> None:
    args: dict[str, Any] = {"unquoted_keys": unquoted, "allow_non_json": lax}
    if delims:
        args["string_delims"] = [["<|", "|>"]]
    _same(
        lambda: parse_content(text, "json", args), lambda: content_parsers.parse_content(text, "json", args)
    )


CALL_PARTS = st.sampled_from(
    [
        "[",
        "]",
        "(",
        ")",
        "f",
        "get.w-x",
        "=",
        ",",
        " ",
        "a",
        "'x'",
        '"y\\n"',
        "1",
        "-2.5e3",
        "True",
        "None",
        "null",
        "{",
        "}",
        ":",
        "'\\u00e9'",
        "'\\ud83d\\ude00'",
        "'\\q'",
        "007",
        "12345678901234567890",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(CALL_PARTS, max_size=14).map("".join))
def test_python_call_list_like_transformers(text: str) -> None:
    _same(
        lambda: parse_content(text, "python-call-list", {}),
        lambda: content_parsers.parse_content(text, "python-call-list", {}),
    )


@pytest.mark.parametrize(
    "text",
    [
        "[get_weather(city='Paris', days=3), f()]",
        '[f(a={"k": [1, 2.5, None, true]}, b="\\u00e9\\n")]',
        "[]",
        "[f(a=1,)]",
        "[f(1)]",
        "[f(a=1, a=2)]",
        "[f(a=9007199254740992)]",
        "[f(a=" + "[" * 101 + "]" * 101 + ")]",
        "[f(a='\\ud800')]",
        "[f(a=1)] x",
    ],
)
def test_python_call_list_examples(text: str) -> None:
    _same(
        lambda: parse_content(text, "python-call-list", {}),
        lambda: content_parsers.parse_content(text, "python-call-list", {}),
    )


@pytest.mark.parametrize(
    ("parser", "text", "args"),
    [
        ("text", "  a b \n", {}),
        ("text", "  a b \n", {"strip": False}),
        ("int", " 42\n", {}),
        ("float", "2.5", {}),
        ("bool", " True ", {}),
        ("bool", "yes", {}),
        ("kv-lines", "a: 1\nb = 2\n\nc:x:y", {}),
        ("kv-lines", "a=1;b=2", {"line_sep": ";", "kv_sep": "=", "value_parser": {"name": "int"}}),
        ("xml-inline", "<a>1</a><b>x</b><a>2</a>", {"tag_pattern": r"<(?P<key>\w+)>(?P<value>.*?)</\1>"}),
        (
            "xml-inline",
            "<a>1</a><b>x</b><a>2</a>",
            {
                "tag_pattern": r"<(?P<key>\w+)>(?P<value>.*?)</\1>",
                "merge_duplicates": True,
                "value_parser": {"name": "json", "args": {"allow_non_json": True}},
            },
        ),
        ("json", '{a: 1, "b": "c: d", e :[1]}', {"unquoted_keys": True}),
        ("json", "{a:\x01}", {"string_delims": [["<", ">"]]}),
        ("json", "not json", {}),
        ("json", " not json ", {"allow_non_json": True}),
    ],
)
def test_content_parsers_like_transformers(parser: str, text: str, args: dict[str, Any]) -> None:
    _same(
        lambda: parse_content(text, parser, args), lambda: content_parsers.parse_content(text, parser, args)
    )


TYPES = st.lists(
    st.sampled_from(["integer", "number", "boolean", "null", "object", "array", "string", "x"]), max_size=3
)


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.sampled_from(
            [
                "3",
                "3.0",
                "3.5",
                "1e3",
                "NaN",
                "inf",
                "true",
                "0",
                "null",
                "None",
                "[1]",
                '{"a": 1}',
                " 7 ",
                "x",
            ]
        ),
        st.text(max_size=6),
    ),
    TYPES,
)
def test_argument_casts_like_transformers(raw: str, kinds: list[str]) -> None:
    _same(lambda: coerce_argument(raw, kinds), lambda: response_parser._coerce(raw, tuple(kinds)))


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer"},
        {"type": ["integer", "string"]},
        {"anyOf": [{"type": "boolean"}, {"oneOf": [{"type": "string"}]}]},
        {"type": "integer", "nullable": True},
        {"type": "null", "nullable": True},
        {"description": "no type"},
        "not a schema",
    ],
)
def test_schema_types_like_transformers(schema: Any) -> None:
    assert schema_types(schema) == response_parser._schema_types(schema)


def test_function_tools_give_schemas() -> None:
    def set_alarm(hour: int, enabled: bool, label: str | None = None) -> None:
        """
        Set an alarm.

        Args:
            hour: The hour the alarm should ring at.
            enabled: Whether the alarm starts out enabled.
            label: An optional label for the alarm.
        """

    text = (
        "<tool_call>\n<function=set_alarm>\n<parameter=hour>\n7\n</parameter>\n"
        "<parameter=enabled>\ntrue\n</parameter>\n<parameter=label>\nnull\n</parameter>\n</function>\n</tool_call>"
    )
    source = TEMPLATES[CASES["tools_coerce_xml_inline_string_args"]["template"]]
    ours = parse_message(text, source, tools=[set_alarm])
    assert ours == parse_response(text, source, prefix="", tools=[set_alarm])
    assert ours["tool_calls"][0]["function"]["arguments"] == {"hour": 7, "enabled": True, "label": None}
    schemas = ToolSchemas([set_alarm, {"function": {"name": "g"}}, "junk", {"name": 3}])
    assert set(schemas.params) == {"set_alarm", "g"}
    call = {"type": "function", "function": {"name": ["set_alarm"], "arguments": {"hour": "7"}}}
    assert schemas.coerce(call) == call  # an unusable name is left alone
    assert schemas.coerce("text") == "text"


def test_one_line_errors_of_content_parsers() -> None:
    with pytest.raises(ValueError, match=re.escape("json: the region is not JSON")):
        parse_content("{x", "json", {})
    with pytest.raises(ValueError, match="reserves"):
        parse_content("\x01", "json", {"string_delims": [["<", ">"]]})
    with pytest.raises(ValueError, match="python-call-list: expected '\\['"):
        parse_content("f()", "python-call-list", {})
