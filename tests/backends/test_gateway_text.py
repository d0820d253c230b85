"""Text mode: ``GatewayModel(..., mode="text")`` on an engine that gives text only (``rxstream
serve``'s chat endpoint with no reasoning format: the raw completion as its content, as a plain
chat API would), the text operators run on its deltas, and what needs ids refused in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from reactivex import operators as ops
from tokenizers import Tokenizer

from rxstream import FinishReason, FinishRecorder
from rxstream.backends import GatewayModel
from rxstream.channels import Segment, ToolCallEnd
from rxstream.operators import replace, route, stop, tool_calls
from rxstream.server import create_app, run_in_thread
from tests.channels.recorded import RECORDINGS
from tests.scripted_model import QWEN3_TEMPLATE, ScriptedModel

from .test_gateway_vllm import TOOLS, WEATHER, tokenizer, tokenizer_dir

__all__ = ["tokenizer", "tokenizer_dir"]  # the fixtures, shared
QWEN3 = RECORDINGS["qwen3"]


def test_text_mode_runs_the_operators_on_the_engine_text(tokenizer: Tokenizer, tokenizer_dir: Path) -> None:
    engine = ScriptedModel(tokenizer, QWEN3_TEMPLATE, QWEN3.completion, delay=0.002)
    app = create_app(engine, model_name="chat-only", reasoning_format="none")
    with run_in_thread(app) as url, GatewayModel(url, tokenizer_dir, mode="text", health_interval=None) as gw:
        rec = FinishRecorder()
        text = gw.text(WEATHER, max_new_tokens=500, on_finish=rec).pipe(ops.to_list()).run()
        assert "".join(text) == QWEN3.completion and len(text) > 10  # deltas, as streamed
        assert rec.finish is not None and rec.finish.reason is FinishReason.EOS
        cut = QWEN3.completion.index("Tokyo")
        stopped = gw.text(WEATHER, max_new_tokens=500).pipe(stop(["Tokyo"]), replace({"Zürich": "Zurich"}))
        assert "".join(stopped.pipe(ops.to_list()).run()) == QWEN3.completion[:cut].replace(
            "Zürich", "Zurich"
        )
        items: list[Any] = (
            gw.text(WEATHER, max_new_tokens=500, request={"n": 1})
            .pipe(route("qwen3"), tool_calls(TOOLS, format="json"), ops.to_list())
            .run()
        )
        reasoning = "".join(
            i.text
            for i in items
            if isinstance(i, Segment) and i.channel == "reasoning" and i.event == "chunk"
        )
        assert reasoning == QWEN3.expected["channels"]["reasoning"]
        calls = [[e.name, e.arguments] for e in items if isinstance(e, ToolCallEnd)]
        assert calls == QWEN3.expected["calls"]
        assert gw.replica_stats()[0]["in_flight"] == 0
        prompt = engine.render_chat(WEATHER)
        assert "".join(gw.text(prompt, max_new_tokens=500).pipe(ops.to_list()).run()) == QWEN3.completion


def test_text_mode_refuses_what_needs_ids(tokenizer_dir: Path) -> None:
    with GatewayModel("http://127.0.0.1:1", tokenizer_dir, mode="text", health_interval=None) as gw:
        for call, needs in (
            (lambda: gw.generate([1, 2]), "generate"),
            (lambda: gw.generate([1, 2], logprobs=2), "log-probabilities"),
            (lambda: gw.text("Hi", logprobs=1), "log-probabilities"),
            (lambda: gw.text("Hi", stop_token_ids=[5]), "stop_token_ids"),
        ):
            with pytest.raises(ValueError, match=f"mode='text'.*{needs}") as info:
                call()
            assert "\n" not in str(info.value) and "mode='ids'" in str(info.value)
    with pytest.raises(ValueError, match="mode must be one of ids, text"):
        GatewayModel("http://127.0.0.1:1", tokenizer_dir, mode="tokens", health_interval=None)
