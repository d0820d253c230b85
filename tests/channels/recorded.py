"""Recorded-style completions of each model family, read from ``tests/channels/data/recorded``.

One JSON file per family (``<family>.json``: ``{"family": ..., "recordings": [...]}``); each
recording has its ``completion`` (in the family's own format, with the hard cases: nested JSON,
unicode, escaped quotes, empty arguments, text after a tool call, a delimiter lookalike inside
the reasoning), the ``prompt`` it continues (the router starts from its anchor), whether it is
read with tools (``with_tools``: the family's bare-call regions too), and the ``expected``
result of the batch run (text per channel, the calls and their arguments, the count of invalid
calls). A new family adds its file; ``test_every_family_has_recorded_outputs`` checks it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "recorded"


@dataclass(frozen=True)
class Recording:
    name: str
    family: str
    completion: str
    prompt: str
    with_tools: bool
    expected: dict[str, Any]


def _load() -> dict[str, Recording]:
    out: dict[str, Recording] = {}
    for path in sorted(DATA.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data["family"] == path.stem, path
        for r in data["recordings"]:
            assert r["name"] not in out, r["name"]
            out[r["name"]] = Recording(
                r["name"], data["family"], r["completion"], r["prompt"], r["with_tools"], r["expected"]
            )
    return out


RECORDINGS: dict[str, Recording] = _load()
"""Every recording, by name."""

ALL: dict[str, tuple[str, str]] = {
    n: (r.completion, r.prompt) for n, r in RECORDINGS.items() if not r.with_tools
}
"""name -> (completion, prompt), for the recordings read without tools."""

FAMILIES: frozenset[str] = frozenset(r.family for r in RECORDINGS.values())

QWEN3 = RECORDINGS["qwen3"].completion
DEEPSEEK_R1 = RECORDINGS["deepseek-r1"].completion
DEEPSEEK_R1_PROMPT = RECORDINGS["deepseek-r1"].prompt
MISTRAL = RECORDINGS["mistral"].completion
QWEN3_CODER = RECORDINGS["qwen3-coder"].completion
LLAMA3 = RECORDINGS["llama3"].completion
HARMONY = RECORDINGS["harmony"].completion
HARMONY_FINAL = RECORDINGS["harmony-final"].completion


def preset_of(name: str) -> str:
    """The family a recording is in."""
    return RECORDINGS[name].family
