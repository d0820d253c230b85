"""The chat page shows a reasoning model's reasoning (``reasoning_content``) above its answer
(headless Chromium; a scripted model replaying a recorded completion as SmolLM2's real ids)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from tokenizers import Tokenizer

from rxstream.server import create_app, run_in_thread
from tests.face.test_web_page import CHROMIUM, Elements, dump_dom
from tests.scripted_model import QWEN3_TEMPLATE, ScriptedModel

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"needs {CHROMIUM}"),
]

REASONING = "\nThe user asks 2 + 2. Four, surely.\n"
ANSWER = "The answer is 4."


def test_the_page_shows_the_reasoning_above_the_answer(smollm2_tokenizer: Tokenizer) -> None:
    model = ScriptedModel(
        smollm2_tokenizer, QWEN3_TEMPLATE, f"<think>{REASONING}</think>\n\n{ANSWER}", delay=0.01
    )
    with run_in_thread(create_app(model, model_name="scripted")) as url:
        dom = dump_dom(f"{url}/?{urlencode({'q': 'What is 2 + 2?', 'autorun': '1'})}")
    page = Elements()
    page.feed(dom)
    assert page.attrs["body"].get("data-state") == "done", dom[-3000:]
    assert page.text["reasoning-1"] == REASONING
    assert page.text["answer-1"] == ANSWER
    assert dom.index('id="reasoning-1"') < dom.index('id="answer-1"')
    assert "msg reasoning" in (page.attrs["reasoning-1"].get("class") or "")
