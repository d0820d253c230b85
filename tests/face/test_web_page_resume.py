"""The chat page keeps its answer through a reload and through a cut connection (SEMANTICS §13):
headless Chromium (Selenium), a real server, and a TCP proxy that cuts the stream mid-answer.
The page's Stop cancels the generation at once, grace period or not."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from rxstream.backends import OnnxModel
from rxstream.server import ServerLimits, create_app, run_in_thread

from .test_web_page import EndlessModel

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def _full_text(url: str, sid: str) -> tuple[str, str | None]:
    """The answer of stream ``sid`` as a follower from its start reads it, and how it ended."""
    text, finish = [], None
    with httpx.stream("GET", f"{url}/v1/chat/completions", headers={"Last-Event-ID": sid}, timeout=30) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                choice = (json.loads(line[6:]).get("choices") or [{}])[0]
                text.append((choice.get("delta") or {}).get("content") or "")
                finish = choice.get("finish_reason") or finish
    return "".join(text), finish


@contextmanager
def cutting_proxy(target: str, cut_after: int) -> Iterator[tuple[str, list[int]]]:
    """A TCP proxy to ``target`` that closes the first connection carrying an event stream
    ``cut_after`` bytes into it (a network that goes away); yields its URL and the cuts made."""
    host, port = target.removeprefix("http://").rsplit(":", 1)
    listener = socket.create_server(("127.0.0.1", 0))
    cuts: list[int] = []
    stop = threading.Event()

    def pipe(src: socket.socket, dst: socket.socket, cut: bool) -> None:
        streamed = -1  # bytes of an event stream's body passed on (-1: none began yet)
        try:
            while True:
                data = src.recv(4096)
                if not data:
                    break
                if cut and not cuts:
                    if streamed < 0 and b"text/event-stream" in data:
                        streamed = 0
                    if streamed >= 0:
                        streamed += len(data)
                        if streamed > cut_after:  # mid-stream: the network goes away
                            dst.sendall(data[: len(data) - (streamed - cut_after)])
                            cuts.append(1)
                            break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            upstream = socket.create_connection((host, int(port)))
            threading.Thread(target=pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, client, True), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", cuts
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def _serving(model: OnnxModel, delay: float, grace: float = 30) -> Any:
    return create_app(EndlessModel(model, delay), model_name="tiny", limits=ServerLimits(resume_grace=grace))


def _answer(driver: Any, n: int = 1) -> Any:
    return driver.find_element("id", f"answer-{n}")


def _deltas(driver: Any) -> int:
    return int(_answer(driver).get_attribute("data-deltas") or 0)


def _ended(driver: Any) -> bool:
    return bool(_answer(driver).get_attribute("data-finish-reason") == "length")


PENDING = "return JSON.parse(sessionStorage.getItem('rxstream-chat')).pending.stream"


def test_a_reload_picks_the_answer_up_where_it_was(model: OnnxModel) -> None:
    from tests.browser import chromium, screenshot, wait_until

    app = _serving(model, 0.03)
    with run_in_thread(app) as url, chromium() as driver:
        driver.get(f"{url}/?" + urlencode({"q": "Keep talking", "autorun": "1", "max_tokens": "80"}))
        wait_until(
            lambda: int(_answer(driver).get_attribute("data-deltas") or 0) >= 5, what="a streaming answer"
        )
        sid = driver.execute_script(
            "return JSON.parse(sessionStorage.getItem('rxstream-chat')).pending.stream"
        )
        driver.refresh()  # the tab reloads mid-answer
        wait_until(
            lambda: _answer(driver).get_attribute("data-finish-reason") == "length",
            timeout=60,
            what="the answer",
        )
        shown = _answer(driver).text
        meta = driver.find_element("id", "meta-1").text
        log = [e.text for e in driver.find_elements("css selector", "#log .msg")]
        shot = screenshot(driver, "web-page-resumed-after-reload")
        text, finish = _full_text(url, sid)
    assert log[0] == "Keep talking"  # the conversation came back with the page
    assert shown == text.strip() and finish == "length" and text  # the whole answer, once
    assert "(resumed)" in meta
    assert app.state.stats.snapshot()["started"] == 1  # no second generation
    assert shot.stat().st_size > 1000


def test_a_cut_connection_is_resumed_without_losing_a_character(model: OnnxModel) -> None:
    from tests.browser import chromium, wait_until

    app = _serving(model, 0.02)
    with run_in_thread(app) as url, cutting_proxy(url, cut_after=2500) as (proxy, cuts), chromium() as driver:
        driver.get(f"{proxy}/?" + urlencode({"q": "Keep talking", "autorun": "1", "max_tokens": "80"}))
        wait_until(
            lambda: _answer(driver).get_attribute("data-finish-reason") == "length",
            timeout=60,
            what="the answer",
        )
        shown = _answer(driver).text
        resumes = _answer(driver).get_attribute("data-resumes")
        sid = next(iter(app.state.replay.streams))
        text, _ = _full_text(url, sid)
    assert cuts == [1] and resumes == "1"  # the proxy cut the stream once; the page came back once
    assert shown == text.strip() and text
    assert app.state.stats.snapshot()["started"] == 1


def test_stop_ends_the_generation_at_once_despite_the_grace_period(model: OnnxModel) -> None:
    from tests.browser import chromium, wait_until

    app = _serving(model, 0.03, grace=30)
    stats = app.state.stats
    with run_in_thread(app) as url, chromium() as driver:
        driver.get(f"{url}/?" + urlencode({"q": "Keep talking", "autorun": "1", "max_tokens": "400"}))
        wait_until(
            lambda: int(_answer(driver).get_attribute("data-deltas") or 0) >= 3, what="a streaming answer"
        )
        driver.find_element("id", "stop").click()
        stopped = time.monotonic()
        wait_until(lambda: stats.snapshot()["active"] == 0, timeout=10, what="the generation to end")
        assert time.monotonic() - stopped < 5  # the page asked for the cancel: no 30 s of grace
        assert stats.snapshot()["finished"] == {"cancelled": 1}
