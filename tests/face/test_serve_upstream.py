"""``rxstream serve --upstream``: real processes: a gateway ``rxstream serve`` in front of two
engine ``rxstream serve`` processes, one of them killed mid-run."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve_process import serve_process

PROMPTS = ["Once upon a time", "The weather", "In a galaxy far away", "Lists:"]


def complete(url: str, prompt: str) -> dict[str, Any]:
    body = {"prompt": prompt, "max_tokens": 20, "temperature": 0}
    result: dict[str, Any] = httpx.post(f"{url}/v1/completions", json=body, timeout=60).json()
    return result


@pytest.mark.slow
def test_killed_replica_requests_not_yet_streaming_go_to_the_other(tiny_dir: Path) -> None:
    with serve_process(tiny_dir) as a, serve_process(tiny_dir) as b:
        expected = {p: complete(b.url, p)["choices"][0]["text"] for p in PROMPTS}
        with serve_process(tiny_dir, "--upstream", a.url, "--upstream", b.url) as gw:
            assert "upstream engines:" in gw.text()
            assert {p: complete(gw.url, p)["choices"][0]["text"] for p in PROMPTS} == expected
            # a stream in flight on the first replica (both idle: the first is picked)
            body = {"prompt": "Go on", "max_tokens": 400, "temperature": 0, "stream": True}
            events: list[str] = []
            with httpx.stream("POST", f"{gw.url}/v1/completions", json=body, timeout=60) as r:
                lines = r.iter_lines()
                events.append(next(line for line in lines if line.startswith("data: ")))
                a.proc.send_signal(signal.SIGKILL)
                a.proc.wait(10)
                events += [line for line in lines if line.startswith("data: ")]
            last = json.loads(events[-1][6:]) if events[-1] != "data: [DONE]" else {}
            # it ended (had it not finished before the kill: with a one-line error, never a hang)
            assert events[-1] == "data: [DONE]" or "gateway: the engine at" in last["error"]["message"]
            # requests that had not started streaming: all answered by the other replica
            got: dict[str, str] = {}

            def one(prompt: str) -> None:
                got[prompt] = complete(gw.url, prompt)["choices"][0]["text"]

            threads = [threading.Thread(target=one, args=(p,)) for p in PROMPTS]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert got == expected
