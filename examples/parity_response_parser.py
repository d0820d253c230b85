"""Streaming parity of transformers' ``ResponseParser``, checked with ``rxstream.testing``.

    .venv/bin/python examples/parity_response_parser.py

``transformers.utils.chat_parsing.ResponseParser`` splits a model's output into message fields as
it streams, driven by a declarative ``response_template``. Here it gets the SmolLM template of
transformers' own tests (``thinking`` in ``<think>``...``</think>``, repeated JSON ``tool_calls``
in ``<tool_call>``...``</tool_call>``, and ``content`` everywhere else up to ``<|im_end|>``) and a
recorded output with reasoning, content and two tool calls, fed in many chunkings: the whole text,
one character at a time, one token at a time (the SmolLM2 tokenizer when the model cache holds it,
else a byte-level BPE trained here), multi-token deltas, every split inside every tag, random cuts,
and combinations of them that ``hypothesis`` draws. Two things are checked on each:

1. **events** -- the region events (``region_open``, ``region_chunk`` with adjacent text merged,
   ``region_close``) equal those of one whole-text feed; nothing emitted is taken back; a stream
   that ends after any chunk gives what the whole-text parse of that much gives;
2. **message** -- the final message equals transformers' own batch ``parse_response``, also for
   every such shorter stream.

Prints what it checked and the result; exits 1 on a parity failure (with the minimized
chunking), 0 when everything agrees, and 0 after one line when transformers is not installed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

# transformers warns at import that PyTorch is missing: this check needs only its parser
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
try:
    import transformers
    from transformers.utils.chat_parsing import ResponseParser, parse_response
except ImportError:
    print("transformers is not installed (pip install transformers): nothing to check")
    sys.exit(0)

from hypothesis import settings
from tokenizers import Tokenizer

from rxstream.backends import default_cache_dir
from rxstream.testing import Parity, ParityError
from rxstream.testing import tokenizers as trained

# The SmolLM template of transformers' tests (tests/utils/test_chat_parsing.py).
TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>", "content": "text"},
        "tool_calls": {
            "open": "<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close": "<|im_end|>", "content": "text"},
    },
}
DELIMITERS = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_end|>")

RECORDED = (
    "<think>\nThe user wants the weather in Paris and in Tokyo (東京). "
    "One get_weather call per city, in °C.\n</think>\n"
    "I'll look up both cities 🌦️ at once.\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo", "unit": "celsius"}}\n</tool_call>'
    "<|im_end|>"
)


def tokenizer() -> tuple[Tokenizer, str]:
    """The SmolLM2 tokenizer from the model cache, else a ByteLevel BPE trained in-process."""
    path = default_cache_dir() / "models" / "smollm2-135m-instruct-fp32" / "tokenizer.json"
    if path.is_file():
        return Tokenizer.from_file(str(path)), "the SmolLM2-135M-Instruct tokenizer"
    return trained.bytelevel(), "a ByteLevel BPE trained in-process (SmolLM2 not in the model cache)"


runs = 0


def response_parser() -> tuple[Callable[[str], list[dict[str, Any]]], Callable[[], list[dict[str, Any]]]]:
    """A fresh parser as a (feed, finish) pair; finish adds the final message as one more event."""
    global runs
    runs += 1
    parser = ResponseParser(TEMPLATE, prefix="")

    def finish() -> list[dict[str, Any]]:
        message, events = parser.finalize()
        return [*events, {"type": "message", "value": message}]

    return parser.feed, finish


def batch_message(text: str) -> list[dict[str, Any]]:
    """transformers' own batch parse, as the one event the streamed run must end with."""
    return [{"type": "message", "value": parse_response(text, TEMPLATE, prefix="")}]


def messages_only(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("type") == "message"]


def main() -> int:
    tok, tok_name = tokenizer()
    n_tokens = len(tok.encode(RECORDED, add_special_tokens=False).ids)
    print(f"ResponseParser (transformers {transformers.__version__}), SmolLM template of transformers' tests")
    print(f"recorded output: {len(RECORDED)} characters, {n_tokens} tokens of {tok_name}")
    print(
        "chunkings: whole, characters, tokens, token groups (2-4), splits inside "
        f"{', '.join(DELIMITERS)}, random cuts, and hypothesis-drawn combinations"
    )
    checks = {
        "events": Parity(factory=response_parser),
        "message": Parity(factory=response_parser, reference=batch_message, normalize=messages_only),
    }
    failed = False
    for name, parity in checks.items():
        global runs
        runs = 0
        try:
            parity.check(
                RECORDED,
                tokenizer=tok,
                delimiters=DELIMITERS,
                settings=settings(max_examples=150, derandomize=True),
            )
        except ParityError as exc:
            failed = True
            print(f"{name}: PARITY FAILURE ({exc.check}) after {runs} parser runs\n{exc}")
        else:
            print(f"{name}: ok -- parity, no retraction, flush ({runs} parser runs)")
    message = parse_response(RECORDED, TEMPLATE, prefix="")
    print(f"parsed message: {message}")
    feed, finish = response_parser()
    events = [*feed(RECORDED), *finish()]
    contents = [e["value"] for e in events if e["type"] == "region_close" and e["field"] == "content"]
    if len(contents) > 1 and message.get("content") != contents[0]:
        # not a parity issue: the batch parse and every stream agree on it
        print(
            f"note: the content region closed {len(contents)} times, with {contents!r}; the message keeps "
            "only the last value (dropped when empty), in the batch parse as in every stream"
        )
    print("parity failures found" if failed else "all parity checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
