"""Stream from any OpenAI-compatible server through rxstream operators, from asyncio.

    rxstream serve --port 8000 &                     # or vLLM, TGI, llama.cpp server...
    python examples/openai_client.py "What is the capital of France?" --base-url http://127.0.0.1:8000/v1
    python examples/openai_client.py "List three facts about Paris, one per line." --demo --stop "\n3."

``--demo`` starts an in-process server over the default model (SmolLM2-135M-Instruct, downloaded
and converted on first use); ``--demo --tiny`` uses a random-weight test model instead, whose
answers are gibberish by design. ``--stop`` understands backslash escapes (``\n``), as
``rxstream chat --stop`` does.

The remote text deltas go through ``replace`` and ``stop`` on the client side (the same operators
that run on local models), then into an ``async for`` loop via :func:`rxstream.aio.to_async_iterable`;
leaving the loop early disposes the subscription, which closes the HTTP stream and makes the server
cancel the generation.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from collections.abc import Iterator

from rxstream import FinishRecorder
from rxstream.aio import to_async_iterable
from rxstream.backends.openai import OpenAIBackend
from rxstream.operators import replace, stop


@contextlib.contextmanager
def demo_server(tiny: bool) -> Iterator[str]:
    """An in-process ``rxstream serve`` over the default model, or the tiny random-weight one."""
    from rxstream.backends import OnnxModel, build_tiny_model
    from rxstream.server import create_app, run_in_thread

    with tempfile.TemporaryDirectory() as tmp:
        if tiny:
            print("[demo: a RANDOM-WEIGHT test model; its answers are gibberish by design]", file=sys.stderr)
            model = OnnxModel.load(build_tiny_model(tmp), provider="cpu")
        else:
            model = OnnxModel.from_pretrained("smollm2", progress=True)
        with run_in_thread(create_app(model, model_name="demo")) as url:
            yield f"{url}/v1"


def unescape(text: str) -> str:
    """Backslash escapes in a command-line value (``\\n`` -> newline); other text as is."""
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape")


async def ask(base_url: str, question: str, max_tokens: int, stops: list[str]) -> None:
    finish = FinishRecorder()
    with OpenAIBackend(base_url) as backend:
        text = backend.chat(
            [{"role": "user", "content": question}], max_tokens=max_tokens, temperature=0, on_finish=finish
        ).pipe(replace({"\r\n": "\n"}), stop(stops, on_finish=finish) if stops else (lambda obs: obs))
        async for delta in to_async_iterable(text):
            sys.stdout.write(delta)
            sys.stdout.flush()
    print(f"\n[finished: {finish.finish}]")


def main() -> int:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("question")
    parser.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    parser.add_argument(
        "--demo", action="store_true", help="start an in-process server with the default model"
    )
    parser.add_argument("--tiny", action="store_true", help="with --demo: a random-weight test model instead")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--stop", action="append", default=[], help="stop string (repeatable; \\n works)")
    args = parser.parse_args()
    stops = [unescape(s) for s in args.stop]
    with demo_server(args.tiny) if args.demo else contextlib.nullcontext(args.base_url) as base_url:
        asyncio.run(ask(base_url, args.question, args.max_tokens, stops))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
