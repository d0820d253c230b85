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


@pytest.mark.slow
def test_clients_that_disconnect_leave_no_upstream_request(tiny_dir: Path) -> None:
    """32 clients at once through a gateway process in front of an engine process, most of them
    leaving mid-stream at a random point: the engine's generations all end, the gateway answers."""
    import random
    import socket

    rng = random.Random(7)
    plans = [(rng.random() < 0.75, rng.randint(0, 12), rng.random() < 0.5) for _ in range(32)]
    with serve_process(tiny_dir) as engine:
        expected = complete(engine.url, "Once upon a time")["choices"][0]["text"]
        # no grace period: a client that leaves the gateway ends its upstream request at once
        with serve_process(tiny_dir, "--upstream", engine.url, "--resume-grace", "0") as gw:
            host, port = gw.address
            errors: list[str] = []

            def client(i: int, leave: bool, after: int, chat: bool) -> None:
                path = "/v1/chat/completions" if chat else "/v1/completions"
                ask: dict[str, Any] = (
                    {"messages": [{"role": "user", "content": f"Story {i}"}]} if chat else {}
                )
                body = {**(ask or {"prompt": f"Story number {i}:"}), "max_tokens": 300, "stream": True}
                try:
                    if leave:  # a raw socket, closed after `after` events: no polite end
                        data = json.dumps(body).encode()
                        head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                        with socket.create_connection((host, port), timeout=30) as sock:
                            sock.sendall(f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data)
                            seen = b""
                            while seen.count(b"data: ") < after:
                                chunk = sock.recv(4096)
                                if not chunk:
                                    break
                                seen += chunk
                        return
                    with httpx.stream("POST", f"{gw.url}{path}", json=body, timeout=60) as r:
                        if r.status_code != 200:
                            errors.append(f"client {i}: HTTP {r.status_code}: {r.read()[:300]!r}")
                            return
                        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
                    if lines[-1] != "data: [DONE]":
                        errors.append(f"client {i}: {lines[-1][:200]}")
                except Exception as exc:
                    errors.append(f"client {i}: {type(exc).__name__}: {exc}")

            threads = [threading.Thread(target=client, args=(i, *plan)) for i, plan in enumerate(plans)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            assert not errors, errors
            health = engine.wait_idle(timeout=10)  # no request left open upstream
            assert health["active"] == 0 and health["waiting"] == 0, health
            # the disconnects reached the engine as cancellations (not all of them: the tiny model
            # may finish a 300-token story before a client's departure gets there, more often on a
            # busy machine), and every request it began ended
            assert health["finished"].get("cancelled", 0) >= 4, health
            assert sum(health["finished"].values()) == health["started"], health
            assert gw.wait_idle(timeout=5)["active"] == 0
            assert complete(gw.url, "Once upon a time")["choices"][0]["text"] == expected


@pytest.mark.slow
def test_chat_through_an_upstream_engine_answers_as_the_engine(tiny_dir: Path) -> None:
    """``rxstream chat --upstream URL``: the prompt rendered and tokenized here, the engine's ids
    detokenized here: the same answer as the engine's own chat endpoint."""
    import subprocess
    import sys

    rxstream = str(Path(sys.executable).with_name("rxstream"))
    with serve_process(tiny_dir) as engine:
        body = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 12, "temperature": 0}
        reply = httpx.post(f"{engine.url}/v1/chat/completions", json=body, timeout=60).json()
        direct = reply["choices"][0]["message"]["content"]
        args = [
            "--upstream",
            engine.url,
            "--model",
            str(tiny_dir),
            "--temperature",
            "0",
            "--max-tokens",
            "12",
        ]
        r = subprocess.run(
            [rxstream, "chat", *args, "Hello"], capture_output=True, text=True, timeout=120, check=False
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout == direct + "\n"
        assert "[finish: length | 12 tokens" in r.stderr and "remote" in r.stderr


def test_the_upstream_flags_as_a_user_gives_them(tiny_dir: Path) -> None:
    """``--upstream-mode text`` and ``--upstream-endpoint`` on real processes: the text gateway
    answers as the engine; its stop strings are its own."""
    with serve_process(tiny_dir) as engine:
        expected = complete(engine.url, PROMPTS[0])["choices"][0]
        with serve_process(tiny_dir, "--upstream", engine.url, "--upstream-mode", "text") as gw:
            got = complete(gw.url, PROMPTS[0])["choices"][0]
            assert (got["text"], got["finish_reason"]) == (expected["text"], expected["finish_reason"])
            body = {"prompt": PROMPTS[0], "max_tokens": 20, "temperature": 0, "logprobs": 1}
            refused = httpx.post(f"{gw.url}/v1/completions", json=body, timeout=60)
            assert refused.status_code == 400 and "--upstream-mode ids" in refused.json()["error"]["message"]
    with pytest.raises(
        RuntimeError, match=r"invalid choice: 'tokens' \(choose from 'completions', 'generate'\)"
    ):
        with serve_process(tiny_dir, "--upstream", "http://127.0.0.1:9", "--upstream-endpoint", "tokens"):
            pass  # pragma: no cover - it never starts
