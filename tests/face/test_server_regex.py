"""Regex rules in the server's ``rxstream`` extension: a real server, the tiny model, real clients."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from rxstream import RegexStop, rx
from rxstream.backends import OnnxModel
from rxstream.operators import replace, stop
from rxstream.server import ServerLimits, create_app, run_in_thread
from rxstream.server._requests import RequestError, validate_request
from rxstream.text import make_stop_matcher
from tests.face.test_server import SAMPLING, generated_ids, operator_text, pick_substring

LIMITS = ServerLimits(max_regex_rules=3, max_regex_chars=40, max_regex_hold=64)


@pytest.fixture(scope="module")
def regex_server(model: OnnxModel) -> Iterator[str]:
    with run_in_thread(create_app(model, model_name="tiny", limits=LIMITS)) as url:
        yield url


def test_regex_stop_and_replace_end_to_end(regex_server: str, model: OnnxModel) -> None:
    prompt = "Once upon a time"
    prompt_ids = model.encode(prompt)
    ids, _finish = generated_ids(model, prompt_ids, 60)
    full = operator_text(model, prompt_ids, ids, [])
    # a stop regex that first matches in the middle: a 2-character piece, with any spacing after it
    piece = pick_substring(full, len(full) // 2, 2)
    stop_regex = re.escape(piece) + r"\s*"
    expected = operator_text(model, prompt_ids, ids, [stop([rx(stop_regex)])])
    assert expected == full[: full.find(piece)]
    word = re.escape(pick_substring(full, 2, 2))
    rules = {rx(f"({word})"): r"<\1>"}
    expected_replaced = operator_text(model, prompt_ids, ids, [stop([rx(stop_regex)]), replace(rules)])
    assert "<" in expected_replaced

    client = openai.OpenAI(base_url=f"{regex_server}/v1", api_key="unused")
    ext = {"stop_regex": [stop_regex], "replace": [{"regex": f"({word})", "replacement": r"<\1>"}]}
    chunks = list(
        client.completions.create(
            model="tiny", prompt=prompt, max_tokens=60, **SAMPLING, stream=True, extra_body={"rxstream": ext}
        )
    )
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == expected_replaced
    last = [c for c in chunks if c.choices and c.choices[0].finish_reason][-1].choices[0]
    assert last.finish_reason == "stop"
    matched = full[full.find(piece) :]
    assert re.match(stop_regex, matched)
    assert (last.model_extra or {}).get("stop_reason") == re.match(stop_regex, matched).group()  # type: ignore[union-attr]


BAD = [
    ({"stop_regex": ["a("]}, "rxstream.stop_regex[0]", "invalid pattern"),
    ({"stop_regex": ["ok", "a(?=b)"]}, "rxstream.stop_regex[1]", "look"),
    ({"stop_regex": ["a*"]}, "rxstream.stop_regex[0]", "empty string"),
    ({"stop_regex": ["(a)\\1"]}, "rxstream.stop_regex[0]", "back-reference"),
    ({"stop_regex": ["a", "b", "c", "d"]}, "rxstream", "at most 3 regex rules"),
    ({"stop_regex": ["a" * 41]}, "rxstream.stop_regex[0]", "limited to 40"),
    ({"stop_regex": [{"regex": "a", "max_hold": 65}]}, "rxstream.stop_regex[0]", "max_hold"),
    ({"stop_regex": [{"regex": "a", "replacement": "x"}]}, "rxstream.stop_regex[0]", "unknown fields"),
    ({"stop_regex": "a"}, "rxstream.stop_regex", "must be a list"),
    ({"stop_regex": [3]}, "rxstream.stop_regex[0]", "a regex rule must be"),
    ({"replace": [{"regex": "a+"}]}, "rxstream.replace[0]", "'replacement'"),
    ({"replace": [["x", "y"], {"regex": "(a", "replacement": "b"}]}, "rxstream.replace[1]", "invalid"),
    ({"replace": [{"regex": "(a)", "replacement": "\\2"}]}, "rxstream.replace[0]", "replacement"),
]


@pytest.mark.parametrize(("ext", "param", "message"), BAD)
def test_bad_regex_rules_get_400_naming_the_rule(
    regex_server: str, ext: Any, param: str, message: str
) -> None:
    body = {"model": "tiny", "prompt": "hi", "max_tokens": 2, "rxstream": ext}
    r = httpx.post(f"{regex_server}/v1/completions", json=body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and message in error["message"], error


def test_requests_compile_rules_once_in_the_parser() -> None:
    body = {
        "prompt": "hi",
        "stop": ["\n\nUser:"],
        "rxstream": {"stop_regex": [r"\n\s*(?:User|Human):"], "replace": [["<NL>", "\n"]]},
    }
    request = validate_request(body, chat=False, limits=LIMITS)
    assert [s if isinstance(s, str) else s.source for s in request.stop.strings] == [
        "\n\nUser:",
        r"\n\s*(?:User|Human):",
    ]
    matcher = make_stop_matcher(request.stop)
    assert "".join(matcher.feed(c) for c in "Hi\n Human: x") == "Hi"
    assert matcher.stop_string == RegexStop(r"\n\s*(?:User|Human):", "\n Human:")
    with pytest.raises(RequestError):
        validate_request({"prompt": "hi", "rxstream": {"stop_regex": ["a("]}}, chat=False, limits=LIMITS)
