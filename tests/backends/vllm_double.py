"""A wire-format double of vLLM's OpenAI server, for the gateway's tests: Starlette and uvicorn on a
real socket, answering ``/health``, ``/v1/models`` and streamed ``/v1/completions`` by replaying
the recorded streams of ``data/vllm`` (the one whose ``match`` is in the decoded prompt), and the
same streams on its tokens-only endpoint (``/inference/v1/generate``).

What it sends follows vLLM's protocol for the fields the request sets: ``token_ids`` per choice
(and ``prompt_token_ids`` in the first chunk) with ``return_token_ids``; ``logprobs`` with ``k``
alternatives (plus the sampled token when it is not among them) with ``logprobs: k``, tokens
spelled ``token_id:N`` with ``return_tokens_as_token_ids``, else as each id's decoded text;
``max_tokens`` cuts the recording (``finish_reason: "length"``); with
``stream_options.include_usage`` a last chunk with no choices and the ``usage``. ``old=True``
is an engine from before ``return_token_ids``: it ignores the field (as vLLM ignores fields it
does not know) and sends text and logprobs only.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from tokenizers import Tokenizer

from rxstream.server import run_in_thread

DATA = Path(__file__).parent / "data" / "vllm"
MODEL = "smollm2-qwen3-style"


def recording(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    return data


class VllmDouble:
    """The double's recordings, options and what it saw."""

    def __init__(self, tokenizer: Tokenizer, *, old: bool = False, delay: float = 0.0) -> None:
        self.tokenizer = tokenizer
        self.old = old
        self.delay = delay
        self.recordings = [recording(p.stem) for p in sorted(DATA.glob("*.json"))]
        self.requests: list[dict[str, Any]] = []
        self.active = 0
        self.cancelled = 0
        self._lock = threading.Lock()

    def find(self, prompt_text: str) -> dict[str, Any] | None:
        return next((r for r in self.recordings if r["match"] in prompt_text), None)

    def choice(self, recorded: dict[str, Any], body: dict[str, Any], ids: list[int]) -> dict[str, Any]:
        """One recorded choice as this request's fields ask for it."""
        out: dict[str, Any] = {"index": 0, "text": recorded["text"], "logprobs": None}
        k = body.get("logprobs")
        if isinstance(k, int) and not isinstance(k, bool):
            as_ids = bool(body.get("return_tokens_as_token_ids"))
            lp = recorded["logprobs"]

            def name(token: str) -> str:
                return token if as_ids else self.tokenizer.decode([int(token[9:])], skip_special_tokens=False)

            tops = []
            for sampled, alternatives in zip(lp["tokens"], lp["top_logprobs"], strict=True):
                best = sorted(alternatives.items(), key=lambda kv: -kv[1])[:k]
                if sampled not in dict(best):
                    best.append((sampled, alternatives[sampled]))
                tops.append({name(t): v for t, v in best})
            out["logprobs"] = {
                "text_offset": lp["text_offset"],
                "token_logprobs": lp["token_logprobs"],
                "tokens": [name(t) for t in lp["tokens"]],
                "top_logprobs": tops,
            }
        out["finish_reason"] = recorded["finish_reason"]
        out["stop_reason"] = recorded["stop_reason"]
        if body.get("return_token_ids") and not self.old:
            out["token_ids"] = ids
        return out

    def chunks(
        self, rec: dict[str, Any], body: dict[str, Any], prompt: list[int]
    ) -> Iterator[dict[str, Any]]:
        """The chunks of a request, cut at ``max_tokens``; the usage chunk last when asked."""
        budget = int(body.get("max_tokens") or 16)
        head = {"id": "cmpl-0f3e", "object": "text_completion", "created": int(time.time()), "model": MODEL}
        sent = 0
        for i, recorded in enumerate(rec["choices"]):
            ids = recorded["token_ids"][: budget - sent]
            if len(ids) < len(recorded["token_ids"]):  # the budget ends inside this chunk
                recorded = {**recorded, "finish_reason": "length"}
                recorded["logprobs"] = {key: v[: len(ids)] for key, v in recorded["logprobs"].items()}
                recorded["text"] = self.tokenizer.decode(
                    [t for c in rec["choices"][:i] for t in c["token_ids"]] + ids
                )[sum(len(c["text"]) for c in rec["choices"][:i]) :].rstrip("\ufffd")
            elif sent + len(ids) == budget and recorded["finish_reason"] is None:
                recorded = {**recorded, "finish_reason": "length"}
            choice = self.choice(recorded, body, ids)
            if i == 0 and body.get("return_token_ids") and not self.old:
                choice["prompt_token_ids"] = prompt
            sent += len(ids)
            yield {**head, "choices": [choice], "usage": None}
            if choice["finish_reason"] is not None:
                break
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {
                "prompt_tokens": len(prompt),
                "total_tokens": len(prompt) + sent,
                "completion_tokens": sent,
            }
            yield {**head, "choices": [], "usage": usage}

    async def completions(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        prompt = body.get("prompt")
        if not isinstance(prompt, list):
            prompt = self.tokenizer.encode(str(prompt), add_special_tokens=False).ids
        rec = self.find(self.tokenizer.decode(prompt, skip_special_tokens=False))
        if rec is None:
            error = {"object": "error", "message": "no recording for this prompt", "type": "BadRequestError"}
            return JSONResponse({**error, "param": None, "code": 400}, status_code=400)

        return self._stream(list(self.chunks(rec, body, list(prompt))))

    async def generate(self, request: Request) -> Response:
        """vLLM's tokens-only endpoint (``/inference/v1/generate``, its ``serve_tokens``): ``token_ids``
        and ``sampling_params`` in; chunks of ``request_id`` and ``choices`` with each delta's
        ``token_ids`` (no text), ``logprobs`` in the chat format with tokens spelled
        ``token_id:N`` when ``sampling_params.logprobs`` is set, the usage chunk (``choices: []``)
        with ``stream_options.include_usage``, then ``[DONE]``."""
        body = await request.json()
        self.requests.append(body)
        ids = body.get("token_ids")
        params = body.get("sampling_params")
        if not isinstance(ids, list) or not isinstance(params, dict) or not body.get("stream"):
            error = {"object": "error", "message": "token_ids, sampling_params and stream are needed"}
            return JSONResponse(
                {**error, "type": "BadRequestError", "param": None, "code": 400}, status_code=400
            )
        rec = self.find(self.tokenizer.decode(ids, skip_special_tokens=False))
        if rec is None:
            error = {"object": "error", "message": "no recording for this prompt", "type": "BadRequestError"}
            return JSONResponse({**error, "param": None, "code": 400}, status_code=400)
        asked = {
            "max_tokens": params.get("max_tokens", 16),
            "logprobs": params.get("logprobs"),
            "return_tokens_as_token_ids": True,
            "return_token_ids": True,
            "stream_options": body.get("stream_options"),
        }
        chunks = [_tokens_only(chunk) for chunk in self.chunks(rec, asked, list(ids))]
        return self._stream(chunks)

    def _stream(self, chunks: list[dict[str, Any]]) -> Response:
        async def stream() -> AsyncIterator[bytes]:
            with self._lock:
                self.active += 1
            try:
                for chunk in chunks:
                    if self.delay:
                        await asyncio.sleep(self.delay)
                    yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()
                yield b"data: [DONE]\n\n"
            except (asyncio.CancelledError, GeneratorExit):
                with self._lock:
                    self.cancelled += 1
                raise
            finally:
                with self._lock:
                    self.active -= 1

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def models(self, _request: Request) -> Response:
        entry = {"id": MODEL, "object": "model", "owned_by": "vllm", "max_model_len": 4096}
        return JSONResponse({"object": "list", "data": [entry]})

    async def health(self, _request: Request) -> Response:
        return Response(status_code=200)


def _tokens_only(chunk: dict[str, Any]) -> dict[str, Any]:
    """A completions chunk as the tokens-only endpoint sends it: no text, chat-format logprobs."""
    out: dict[str, Any] = {"request_id": "generate-tokens-0f3e", "choices": []}
    if not chunk["choices"]:
        out["usage"] = chunk["usage"]
        return out
    choice = chunk["choices"][0]
    logprobs = None
    if choice["logprobs"] is not None:
        lp = choice["logprobs"]
        logprobs = {
            "content": [
                {
                    "token": token,
                    "logprob": value,
                    "top_logprobs": [{"token": t, "logprob": v} for t, v in top.items()],
                }
                for token, value, top in zip(
                    lp["tokens"], lp["token_logprobs"], lp["top_logprobs"], strict=True
                )
            ]
        }
    out["choices"] = [
        {
            "index": 0,
            "logprobs": logprobs,
            "finish_reason": choice["finish_reason"],
            "token_ids": choice["token_ids"],
        }
    ]
    return out


@contextmanager
def vllm_double(tokenizer: Tokenizer, **options: Any) -> Iterator[tuple[str, VllmDouble]]:
    double = VllmDouble(tokenizer, **options)
    app = Starlette(
        routes=[
            Route("/v1/completions", double.completions, methods=["POST"]),
            Route("/inference/v1/generate", double.generate, methods=["POST"]),
            Route("/v1/models", double.models),
            Route("/health", double.health),
        ]
    )
    with run_in_thread(app) as url:
        yield url, double
