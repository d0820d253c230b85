"""Prompt lookup through the real ``rxstream serve`` process and the official ``openai`` client: one
client's stream reads drafts from its own context (``--draft-tokens``), the text is the same as
with drafting off, and the counts reach ``/metrics`` under vLLM's speculative-decoding names."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import openai
import pytest

from rxstream.backends import build_tiny_model
from tests.serve_process import serve_process

QUESTIONS = ["a b c a b c a b c a b c", "hello hello hello", "What is the capital of France?"]


@pytest.fixture(scope="module")
def gqa_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the fused-attention graph: the slot layout, where a lone request drafts
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "gqa", seed=0, attention="gqa")


def answers(url: str) -> list[str]:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="none")
    out = []
    for question in QUESTIONS:
        stream = client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": question}],
            max_tokens=48,
            temperature=0,
            stream=True,
        )
        out.append("".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices))
    return out


def metric(url: str, name: str) -> float:
    response = httpx.get(f"{url}/metrics", timeout=10)
    assert response.status_code == 200
    found = re.search(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", response.text, re.MULTILINE)
    assert found, name
    return float(found.group(1))


def test_a_lone_stream_drafts_and_its_text_is_unchanged(gqa_dir: Path) -> None:
    with serve_process(gqa_dir, "--model-name", "tiny", "--draft-tokens", "0") as plain:
        expected = answers(plain.url)
        assert metric(plain.url, "vllm:spec_decode_num_draft_tokens_total") == 0
    with serve_process(gqa_dir, "--model-name", "tiny", "--draft-tokens", "8") as drafting:
        assert answers(drafting.url) == expected
        drafted = metric(drafting.url, "vllm:spec_decode_num_draft_tokens_total")
        kept = metric(drafting.url, "vllm:spec_decode_num_accepted_tokens_total")
        assert 0 < kept <= drafted
        assert "prompt lookup up to 8 ids" in drafting.text()
