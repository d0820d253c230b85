"""The chat page fits the window it is in: at desktop width and at a phone's (420 px) the
question box is wide, every button is inside the window, nothing scrolls sideways -- before and
after an answer (headless Chromium)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from rxstream.backends import OnnxModel
from rxstream.server import create_app, run_in_thread
from tests.browser import chromium, screenshot, wait_until

pytestmark = pytest.mark.browser

LAYOUT = """
const view = document.documentElement.clientWidth;
const box = (id) => document.getElementById(id).getBoundingClientRect();
return {
  view: view,
  scroll: document.documentElement.scrollWidth,
  input: box("input").width,
  rights: ["send", "stop", "clear", "max_tokens", "temperature", "input"].map((id) => box(id).right),
  lefts: ["send", "stop", "clear", "input"].map((id) => box(id).left),
  cut: [...document.querySelectorAll(".msg")].filter((m) => m.scrollWidth > m.clientWidth + 1).length,
  messages: document.querySelectorAll(".msg").length,
};
"""


@pytest.fixture(scope="module")
def server(model: OnnxModel) -> Iterator[str]:
    with run_in_thread(create_app(model, model_name="tiny")) as url:
        yield url


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (420, 860), (360, 740)])
def test_the_page_fits_its_window(server: str, width: int, height: int) -> None:
    with chromium() as driver:
        driver.set_window_size(width, height)
        query = urlencode({"q": "Tell me about rivers " * 20, "autorun": "1", "max_tokens": "40"})
        driver.get(f"{server}/?{query}")
        wait_until(lambda: driver.find_element("tag name", "body").get_attribute("data-state") == "done")
        layout: dict[str, Any] = driver.execute_script(LAYOUT)
        screenshot(driver, f"web-page-{width}px")
    view = layout["view"]
    assert layout["scroll"] <= view, layout  # no horizontal scrollbar
    assert all(right <= view + 0.5 for right in layout["rights"]), layout  # every control in view
    assert all(left >= -0.5 for left in layout["lefts"]), layout
    assert layout["messages"] >= 2 and layout["cut"] == 0, layout  # long words wrap, none is cut
    assert layout["input"] >= (0.8 * view if view < 640 else 0.4 * view), layout  # not a sliver
