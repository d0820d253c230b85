"""``rxstream chat``: stream a model's answer live through the text operators."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from .._finish import Finish, FinishReason, FinishRecorder
from .._piece import Piece
from ._text import replace_rule, stop_string, valid_text

__all__ = ["add_chat_parser", "run_chat"]


def add_chat_parser(subparsers: Any) -> None:
    """Register ``rxstream chat``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "chat",
        help="ask the model and stream the answer live",
        description="Stream a chat answer through detokenize -> replace -> stop and print why it ended. "
        "The default model (SmolLM2-135M-Instruct) is downloaded and converted on first use.",
    )
    p.add_argument("prompt", nargs="?", help="the user message (read from stdin when omitted)")
    p.add_argument("--system", help="a system message")
    p.add_argument(
        "--stop",
        action="append",
        type=stop_string,
        default=[],
        metavar="TEXT",
        help="stop before TEXT (repeatable; backslash escapes like \\n work)",
    )
    p.add_argument(
        "--replace",
        action="append",
        type=replace_rule,
        default=[],
        metavar="OLD=NEW",
        help="replace OLD by NEW in the streamed text (repeatable)",
    )
    p.add_argument("--max-tokens", type=int, default=256, help="token budget (default 256)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-k", type=int, default=0, help="sample from the k best ids (0 = off)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (default 1.0 = off)")
    p.add_argument("--repetition-penalty", type=float, default=1.0, help="default 1.0 = off")
    p.add_argument("--seed", type=int, default=None, help="random seed for reproducible sampling")
    p.add_argument(
        "--provider",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="ONNX Runtime execution provider (default auto: CUDA when it works, else CPU)",
    )
    p.add_argument(
        "--model",
        default="smollm2",
        metavar="DIR",
        help="a model directory (Optimum or onnxruntime-genai layout) or a known name (smollm2)",
    )
    p.add_argument("--int4", action="store_true", help="use the int4 build of the default model")
    p.add_argument("--show-tokens", action="store_true", help="show the token ids behind each piece of text")
    p.set_defaults(func=run_chat, exit_on_sigpipe=True)


def _load_model(name: str, provider: str, int4: bool) -> Any:
    from rxstream.backends import OnnxModel

    return OnnxModel.from_pretrained(
        name,
        provider=provider,  # type: ignore[arg-type]
        quantization="int4" if int4 else "fp32",
        progress=True,
    )


def _read_prompt(args: argparse.Namespace, err: TextIO) -> str | None:
    """The user message (argument or stdin), or None after printing why it is unusable."""
    try:
        prompt_text: str = args.prompt if args.prompt is not None else sys.stdin.read()
    except UnicodeDecodeError:
        print("rxstream chat: the prompt on stdin is not valid UTF-8 text", file=err)
        return None
    for name, text in (("the prompt", prompt_text), ("--system", args.system or "")):
        if not valid_text(text):
            print(f"rxstream chat: {name} is not valid UTF-8 text", file=err)
            return None
    if not prompt_text.strip():
        print("rxstream chat: empty prompt", file=err)
        return None
    return prompt_text


@dataclass
class _Answer:
    """What streaming one answer produced: why it ended, token arrival times, a failure."""

    finish: Finish
    start: float
    token_times: list[float] = field(default_factory=list)
    failure: BaseException | None = None

    def summary(self, provider: str) -> str:
        elapsed = time.perf_counter() - self.start
        stats = f"{len(self.token_times)} tokens"
        times = self.token_times
        if len(times) > 1:
            rate = (len(times) - 1) / max(times[-1] - times[0], 1e-9)
            stats += f", first after {times[0] - self.start:.2f} s, {rate:.1f} tokens/s"
        return f"[finish: {self.finish} | {stats} | {provider} | {elapsed:.2f} s]"


def _stream_answer(
    model: Any,
    source: Any,
    prompt: list[int],
    args: argparse.Namespace,
    out: TextIO,
    recorder: FinishRecorder,
) -> _Answer:
    """Run ``source`` through detokenize -> replace -> stop, writing the text to ``out`` as it
    comes; Ctrl-C disposes the subscription (which cancels the generation)."""
    from reactivex import operators as ops

    from rxstream.operators import detokenize, replace, stop

    answer = _Answer(Finish(FinishReason.CANCELLED), time.perf_counter())
    stages: list[Callable[[Any], Any]] = [
        ops.do_action(lambda _id: answer.token_times.append(time.perf_counter())),
        detokenize(model.tokenizer, prompt_ids=prompt, aligned=args.show_tokens),
    ]
    if args.replace:
        stages.append(replace(args.replace))
    if args.stop:
        stages.append(stop(args.stop, on_finish=recorder))
    dim = (lambda s: f"\x1b[2m{s}\x1b[0m") if getattr(out, "isatty", lambda: False)() else (lambda s: s)

    def show(item: str | Piece) -> None:
        if isinstance(item, Piece):
            out.write(item.text + dim(f"[{' '.join(map(str, item.ids))}]"))
        else:
            out.write(item)
        out.flush()

    done = threading.Event()

    def on_error(exc: BaseException) -> None:
        answer.failure = exc
        done.set()

    subscription = source.pipe(*stages).subscribe(show, on_error=on_error, on_completed=done.set)
    try:
        while not done.wait(0.1):
            pass
    except KeyboardInterrupt:
        subscription.dispose()
    out.write("\n")
    out.flush()
    answer.finish = recorder.finish or Finish(FinishReason.CANCELLED)
    return answer


def run_chat(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``rxstream chat``: stream the answer to ``out``; the finish line goes to ``err``."""
    out = out or sys.stdout
    err = err or sys.stderr
    prompt_text = _read_prompt(args, err)
    if prompt_text is None:
        return 2
    try:
        model = _load_model(args.model, args.provider, args.int4)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"rxstream chat: {exc}", file=err)
        return 1
    messages = ([{"role": "system", "content": args.system}] if args.system else []) + [
        {"role": "user", "content": prompt_text}
    ]
    prompt = model.encode_chat(messages) if model.has_chat_template else model.encode(prompt_text)
    recorder = FinishRecorder()
    try:
        source = model.generate(
            prompt,
            max_new_tokens=args.max_tokens,
            temperature=args.temperature,
            top_k=args.top_k,
            top_p=args.top_p,
            repetition_penalty=args.repetition_penalty,
            seed=args.seed,
            on_finish=recorder,
        )
    except (ValueError, TypeError) as exc:
        print(f"rxstream chat: {exc}", file=err)
        return 2
    answer = _stream_answer(model, source, prompt, args, out, recorder)
    print(answer.summary(model.provider), file=err)
    if answer.failure is not None:
        print(f"rxstream chat: {answer.failure}", file=err)
        return 1
    return 130 if answer.finish.reason is FinishReason.CANCELLED else 0
