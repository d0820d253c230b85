"""The gateway in front of llama.cpp's ``llama-server``, where one is installed: set
``RXSTREAM_LLAMA_SERVER`` to its binary (docs/benchmarks.md says how to build it from the
llama-cpp-python sdist) and, optionally, ``RXSTREAM_LLAMA_GGUF`` to a model (default: the SmolLM2
Q4_1 GGUF in rxstream's cache, with SmolLM2's tokenizer from the cache for the gateway).

llama.cpp ignores ``return_token_ids``: the gateway learns so from the first text without ids
and asks for ``logprobs``, whose entries carry each token's ``id``. Greedy output through the
gateway must equal the engine's own."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rxstream.backends import GatewayModel, default_cache_dir
from rxstream.server import create_app, run_in_thread

SERVER = os.environ.get("RXSTREAM_LLAMA_SERVER")
GGUF = Path(
    os.environ.get("RXSTREAM_LLAMA_GGUF")
    or default_cache_dir() / "downloads" / "SmolLM2-135M-Instruct.Q4_1.gguf"
)
TOKENIZER = default_cache_dir() / "models" / "smollm2-135m-instruct-fp32"

pytestmark = pytest.mark.skipif(
    not SERVER
    or not Path(SERVER).is_file()
    or not GGUF.is_file()
    or not (TOKENIZER / "tokenizer.json").is_file(),
    reason="no llama-server (RXSTREAM_LLAMA_SERVER), GGUF or SmolLM2 tokenizer here",
)


@pytest.fixture(scope="module")
def llama() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert SERVER is not None
    cmd = [
        SERVER,
        "-m",
        str(GGUF),
        "--port",
        str(port),
        "-np",
        "4",
        "-c",
        "4096",
        "-cb",
        "--no-webui",
        "-t",
        "1",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "llama-server did not start"
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def test_greedy_output_through_the_gateway_is_llama_cpps(llama: str) -> None:
    gateway = GatewayModel(llama, TOKENIZER, health_interval=None)
    with run_in_thread(create_app(gateway, model_name="gw")) as url:
        for prompt in ("Once upon a time", "The capital of France is"):
            body = {"prompt": prompt, "max_tokens": 24, "temperature": 0}
            direct = httpx.post(f"{llama}/v1/completions", json=body, timeout=60).json()["choices"][0]
            through = httpx.post(f"{url}/v1/completions", json=body, timeout=60).json()["choices"][0]
            assert through["text"] == direct["text"] and through["finish_reason"] == direct["finish_reason"]
        chat = {"messages": [{"role": "user", "content": "What is 2+2?"}], "max_tokens": 30, "temperature": 0}
        direct_chat = httpx.post(f"{llama}/v1/chat/completions", json=chat, timeout=60).json()
        through_chat = httpx.post(f"{url}/v1/chat/completions", json=chat, timeout=60).json()
        assert (
            through_chat["choices"][0]["message"]["content"]
            == direct_chat["choices"][0]["message"]["content"]
        )
        # the gateway's own stop strings, cut where the engine's text has them
        text = direct_chat["choices"][0]["message"]["content"]
        stop = text[5:8]
        cut = httpx.post(f"{url}/v1/chat/completions", json={**chat, "stop": [stop]}, timeout=60).json()
        assert cut["choices"][0]["message"]["content"] == text[: text.index(stop)]
        assert cut["choices"][0]["finish_reason"] == "stop"
        assert gateway.replicas[0].ids_in_logprobs  # learned: llama.cpp sends ids in its logprobs
    gateway.close()
