"""The ``redact`` operator: presets, Luhn, keyed replacements, streaming (SEMANTICS §7)."""

from __future__ import annotations

from typing import Any

import pytest
import reactivex as rx_
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops

from rxstream import rx
from rxstream.operators import redact
from rxstream.operators._redact import luhn_ok
from tests.operators.test_operator_properties import run_steps

KEY = "sk-" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz1bCd4fGh7jK"  # 40 characters


def run(op: Any, chunks: list[str]) -> str:
    return "".join(rx_.from_iterable(chunks).pipe(op, ops.to_list()).run())


def test_a_40_character_key_one_character_at_a_time() -> None:
    assert len(KEY) == 40
    text = f"token: {KEY}\nok"
    steps, out, _ = run_steps(list(text), redact())
    assert "".join(out) == "token: [API_KEY]\nok"
    assert not any("sk-" in "".join(step) for step in steps)  # never a piece of the key


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mail me at jo.doe+x@mail.example.co.uk.", "mail me at [EMAIL]."),
        ("card 4111 1111 1111 1111 ok", "card [CARD] ok"),
        ("card 4111-1111-1111-1111 ok", "card [CARD] ok"),
        ("card 4111111111111112 fails Luhn", "card 4111111111111112 fails Luhn"),
        ("gh ghp_" + "a1" * 18 + " x", "gh [API_KEY] x"),
        ("aws AKIAIOSFODNN7EXAMPLE.", "aws [API_KEY]."),
        ("slack xoxb-12345-67890-abcdef", "slack [API_KEY]"),
        ("host 10.0.255.1:80 and 999.1.1.1", "host [IPV4]:80 and 999.1.1.1"),
        ("call +1 (555) 123-4567 now", "call [PHONE] now"),
        ("call 555.123.4567", "call [PHONE]"),
        ("version 1.2.3 and 12345", "version 1.2.3 and 12345"),
    ],
)
def test_presets(text: str, expected: str) -> None:
    assert run(redact(), list(text)) == expected
    assert run(redact(), [text]) == expected


def test_luhn() -> None:
    assert luhn_ok("4111 1111 1111 1111") and luhn_ok("79927398713")
    assert not luhn_ok("4111 1111 1111 1112") and not luhn_ok("79927398710") and not luhn_ok("0")


def test_keyed_same_value_same_key_per_subscription() -> None:
    op = redact(["email", "ipv4"], keyed=True)
    text = "a@x.io,b@y.io 1.2.3.4 a@x.io 1.2.3.4 5.6.7.8"
    expected = "[EMAIL_1],[EMAIL_2] [IPV4_1] [EMAIL_1] [IPV4_1] [IPV4_2]"
    assert run(op, list(text)) == expected
    assert run(op, [text]) == expected  # a second subscription numbers from 1 again


def test_back_to_back_values() -> None:
    assert run(redact(["api_key"]), list(f"{KEY} {KEY}")) == "[API_KEY] [API_KEY]"
    assert run(redact(["email"], keyed=True), list("a@b.cc;c@d.cc")) == "[EMAIL_1];[EMAIL_2]"


def test_custom_rules_and_replacements() -> None:
    op = redact(
        ["email"],
        custom={rx(r"EMP-[0-9]{5}"): "[EMP_{n}]", "Project Falcon": "[PROJECT]"},
        replacements={"email": "<hidden>"},
    )
    text = "EMP-12345 on Project Falcon, EMP-99999, EMP-12345, x@y.org"
    assert run(op, list(text)) == "[EMP_1] on [PROJECT], [EMP_2], [EMP_1], <hidden>"


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown preset"):
        redact(["emial"])
    with pytest.raises(ValueError, match="not used"):
        redact(["email"], replacements={"card": "x"})
    with pytest.raises(ValueError, match="no rules"):
        redact([])
    with pytest.raises(TypeError):
        redact(custom={rx("a"): 1})  # type: ignore[dict-item]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["a@b.io", " ", KEY, "4111 1111 1111 1111", "10.1.2.3", "555-123-4567", "x", ".", "1"]
        ),
        max_size=10,
    ),
    st.lists(st.integers(0, 200), max_size=8),
)
def test_chunking_invariance(parts: list[str], cuts: list[int]) -> None:
    text = "".join(parts)
    bounds = sorted({min(c, len(text)) for c in cuts})
    chunks = [text[a:b] for a, b in zip([0, *bounds], [*bounds, len(text)], strict=True)]
    whole = run(redact(keyed=True), [text])
    assert run(redact(keyed=True), chunks) == whole
    assert run(redact(keyed=True), list(text)) == whole
