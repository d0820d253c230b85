"""``rxstream chat``: stream a model's answer live through the text operators."""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from .._finish import Finish, FinishReason, FinishRecorder
from .._generative_model import GenerativeModel, supports_grammar
from .._piece import Piece
from .._sampling_params import SamplingParams
from ..chat import ChatPlan, TextDelta, plan_chat, resolve_reasoning_format
from ..face import add_model_options, load_model, model_defaults, sampling_from_args
from ..text import replace_rules, stop_rules
from ._structured import add_structured_options, output_from_args, tool_choice_from_args
from ._text import replace_rule, stop_string, tools_file, valid_text

__all__ = ["add_chat_parser", "run_chat"]


def add_chat_parser(subparsers: Any) -> None:
    """Register ``rxstream chat``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "chat",
        help="ask the model and stream the answer live",
        description="Stream a chat answer through detokenize -> stop -> replace and print why it ended. "
        "The default model (SmolLM2-135M-Instruct) is downloaded and converted on first use.",
    )
    p.add_argument(
        "prompt",
        nargs="?",
        help="the user message; without one: an interactive chat on a terminal, else read from stdin",
    )
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
    add_model_options(p)
    p.add_argument(
        "--show-tokens",
        action="store_true",
        help="show the token ids behind each piece of text (the raw text: no reasoning or tool channels)",
    )
    p.add_argument("--hide-reasoning", action="store_true", help="do not show the model's reasoning")
    p.add_argument(
        "--tools",
        type=tools_file,
        default=None,
        metavar="FILE",
        help="a JSON file with a list of OpenAI function tools to offer the model; its tool calls "
        "are printed as they complete",
    )
    add_structured_options(p)
    p.set_defaults(func=run_chat, exit_on_sigpipe=True)


def _read_prompt(args: argparse.Namespace, err: TextIO) -> str | None:
    """The user message (argument or stdin), or None after printing why it is unusable."""
    try:
        prompt_text: str = args.prompt if args.prompt is not None else sys.stdin.read()
    except UnicodeDecodeError:
        print("rxstream chat: the prompt on stdin is not valid UTF-8 text", file=err)
        return None
    if not valid_text(prompt_text):
        print("rxstream chat: the prompt is not valid UTF-8 text", file=err)
        return None
    if not prompt_text.strip():
        print("rxstream chat: empty prompt", file=err)
        return None
    return prompt_text


@dataclass
class _Answer:
    """What streaming one answer produced: its text, why it ended, token times, a failure."""

    finish: Finish
    start: float
    text: list[str] = field(default_factory=list)
    token_times: list[float] = field(default_factory=list)
    failure: BaseException | None = None

    def summary(self, provider: str, loaded: float | None = None) -> str:
        """The finish line; ``loaded``: how long loading the model took (shown on the first)."""
        elapsed = time.perf_counter() - self.start
        stats = f"{len(self.token_times)} tokens"
        times = self.token_times
        if len(times) > 1:
            rate = (len(times) - 1) / max(times[-1] - times[0], 1e-9)
            stats += f", first after {times[0] - self.start:.2f} s, {rate:.1f} tokens/s"
        load = "" if loaded is None else f" | model loaded in {loaded:.1f} s"
        return f"[finish: {self.finish} | {stats} | {provider} | {elapsed:.2f} s{load}]"


def _with_ids(text: str, ids: tuple[int, ...], dim: Callable[[str], str]) -> str:
    """``text`` followed by its token ids, placed before the text's trailing line breaks (so a
    newline's id does not start the next line); nothing for a piece without ids."""
    if not ids:
        return text
    body = text.rstrip("\r\n")
    return body + dim(f"[{' '.join(map(str, ids))}]") + text[len(body) :]


class _Shown:
    """Writes a routed answer: answer text as it is, reasoning dimmed on a terminal (plain
    otherwise) or not at all, and each tool call on a line of its own once it is complete."""

    def __init__(self, out: TextIO, dim: Callable[[str], str], *, hide_reasoning: bool) -> None:
        self.out = out
        self.dim = dim
        self.hide_reasoning = hide_reasoning
        self.last: str = ""  # the kind of the last thing written ("", "content", "reasoning", "tool")
        self.at_line_start = True

    def _write(self, text: str, kind: str, styled: str | None = None) -> None:
        if not text:
            return
        if self.last and kind != self.last and not self.at_line_start:
            self.out.write("\n")  # reasoning, answer and tool calls each start on a line of their own
        self.out.write(styled if styled is not None else text)
        self.out.flush()
        self.last = kind
        self.at_line_start = text.endswith("\n")

    def show(self, item: Any) -> None:
        if isinstance(item, TextDelta):
            if item.kind == "content":
                self._write(item.text, "content")
            elif not self.hide_reasoning:
                self._write(item.text, "reasoning", self.dim(item.text))
            return
        from rxstream.channels import ToolCallEnd, ToolCallInvalid

        if isinstance(item, ToolCallEnd):
            line = f"[tool call] {item.name}({item.arguments_text})\n"
            self._write(line, "tool")
        elif isinstance(item, ToolCallInvalid):
            error = " ".join(str(item.error).split())
            self._write(f"[invalid tool call: {error}]\n", "tool")


class _ChatSession:
    """A conversation with one model: the messages so far, and one streamed answer per turn."""

    def __init__(
        self,
        model: GenerativeModel,
        args: argparse.Namespace,
        params: SamplingParams,
        out: TextIO,
        err: TextIO,
    ) -> None:
        self.model = model
        self.loaded: float | None = None
        """How long loading the model took, for the first finish line."""
        self.args = args
        self.params = params
        self.out = out
        self.err = err
        self.system = [{"role": "system", "content": args.system}] if args.system else []
        self.history: list[dict[str, str]] = []
        self.stop = stop_rules(args.stop, owner="--stop")  # compiled once for every turn
        self.replace = replace_rules(args.replace, owner="--replace")
        tty = getattr(out, "isatty", lambda: False)()
        self.dim: Callable[[str], str] = (lambda s: f"\x1b[2m{s}\x1b[0m") if tty else (lambda s: s)
        # channels (reasoning, tool calls): not with --show-tokens, which shows the raw text
        self.format = None if args.show_tokens else resolve_reasoning_format(args.reasoning_format, model)
        self.tools: tuple[dict[str, Any], ...] = tuple(args.tools or ())
        self.choice = tool_choice_from_args(args, self.tools)
        self.output = output_from_args(args)
        self.constrain = supports_grammar(model)

    def reset(self) -> None:
        self.history.clear()

    def _prompt(self, messages: list[dict[str, str]]) -> tuple[list[int], ChatPlan]:
        """The prompt ids of ``messages`` and how the answer is routed (reasoning, tool calls)."""
        if self.format is None and not self.tools and not self.output.constrained:
            return list(self.model.encode_chat(messages)), ChatPlan(None)
        return plan_chat(
            self.model,
            messages,
            reasoning_format=self.format,
            tools=self.tools,
            tool_choice=self.choice,
            parallel_tool_calls=self.choice.mode not in ("required", "named"),  # a forced call: one
            parse_tool_calls=True,
            output=self.output,
            constrain=self.constrain,
        )

    def _prompt_ids(self, user_text: str) -> tuple[list[int], ChatPlan]:
        """The prompt for the next turn; the oldest turns are dropped when it would not leave room
        for the answer in the model's context."""
        model = self.model
        if not getattr(model, "has_chat_template", True):
            return list(model.encode(user_text)), ChatPlan(None)
        context = model.context_length
        turns = [*self.history, {"role": "user", "content": user_text}]
        while True:
            ids, plan = self._prompt(self.system + turns)
            fits = context is None or len(ids) + min(self.params.max_new_tokens, 64) <= context
            if fits or len(turns) <= 1:
                return ids, plan
            turns = turns[2:]  # drop the oldest exchange
            self.history = self.history[2:]
            print(self.dim("(the oldest turn no longer fits the context: dropped)"), file=self.err)

    def turn(self, user_text: str) -> _Answer:
        """Stream the answer to ``user_text``; keep both in the history (a cancelled answer too)."""
        prompt, plan = self._prompt_ids(user_text)
        answer = self._stream(prompt, plan)
        self.history += [
            {"role": "user", "content": user_text},
            {"role": "assistant", "content": "".join(answer.text)},
        ]
        return answer

    def _stream(self, prompt: list[int], plan: ChatPlan) -> _Answer:
        """Run the generation through detokenize -> stop -> replace (with channels: route, the
        answer through stop -> replace, reasoning shown dimmed or hidden, tool calls printed as
        they complete), writing the text as it comes; Ctrl-C disposes the subscription (which
        cancels the generation)."""
        from reactivex import operators as ops

        from rxstream.operators import text_pipeline

        args, out = self.args, self.out
        recorder = FinishRecorder()
        answer = _Answer(Finish(FinishReason.CANCELLED), time.perf_counter())
        extra: dict[str, Any] = {} if plan.grammar is None else {"grammar": plan.grammar}
        source = self.model.generate(prompt, params=self.params, on_finish=recorder, **extra).pipe(
            ops.do_action(lambda _id: answer.token_times.append(time.perf_counter()))
        )
        text: Any
        if plan.spec is not None and not args.show_tokens:  # --show-tokens: the raw text
            from rxstream.operators import chat_pipeline

            text = source.pipe(
                chat_pipeline(
                    self.model.tokenizer,
                    plan,
                    prompt_ids=prompt,
                    stop=self.stop,
                    replace=self.replace,
                    on_finish=recorder,
                )
            )
        else:
            text = source.pipe(
                text_pipeline(
                    self.model.tokenizer,
                    prompt_ids=prompt,
                    stop=self.stop,
                    replace=self.replace,
                    aligned=args.show_tokens,
                    on_finish=recorder,
                )
            )
        shown = _Shown(out, self.dim, hide_reasoning=args.hide_reasoning)

        def show(item: Any) -> None:
            if isinstance(item, str | Piece):
                text = item.text if isinstance(item, Piece) else item
                answer.text.append(text)
                out.write(_with_ids(text, item.ids, self.dim) if isinstance(item, Piece) else text)
                out.flush()
                return
            if isinstance(item, TextDelta) and item.kind == "content":
                answer.text.append(item.text)
            shown.show(item)

        done = threading.Event()

        def on_error(exc: BaseException) -> None:
            answer.failure = exc
            done.set()

        subscription = text.subscribe(show, on_error=on_error, on_completed=done.set)
        try:
            while not done.wait(0.1):
                pass
        except KeyboardInterrupt:
            subscription.dispose()
        if shown.last != "tool":  # a tool call's line ends with its own line break
            out.write("\n")
        out.flush()
        answer.finish = recorder.finish or Finish(FinishReason.CANCELLED)
        return answer

    def ask(self, user_text: str) -> _Answer | None:
        """:meth:`turn`, or None after one line when the model refuses the prompt (too long for
        its context)."""
        try:
            return self.turn(user_text)
        except ValueError as exc:
            print(f"rxstream chat: {' '.join(str(exc).split())}", file=self.err)
            return None

    def report(self, answer: _Answer) -> int:
        """Print the finish line (and a failure); the exit status of a single-shot chat."""
        print(self.dim(answer.summary(self.model.provider, self.loaded)), file=self.err)
        self.loaded = None  # said once
        if answer.failure is not None:
            print(f"rxstream chat: {answer.failure}", file=self.err)
            return 1
        return 130 if answer.finish.reason is FinishReason.CANCELLED else 0


_HELP = "Type a message. /reset forgets the conversation, /exit (or Ctrl-D) leaves, Ctrl-C stops an answer."


def _repl(session: _ChatSession, read: Callable[[str], str]) -> int:
    """The interactive chat: one turn per line until /exit or end of input."""
    model = session.model
    print(
        f"rxstream chat with {getattr(model, 'name', None) or session.args.model or 'smollm2'} "
        f"on {model.provider}.",
        file=session.err,
    )
    print(session.dim(_HELP), file=session.err)
    while True:
        try:
            line = read(">>> ")
        except EOFError:  # Ctrl-D
            print(file=session.err)
            return 0
        except KeyboardInterrupt:  # Ctrl-C at the prompt: a fresh line, as shells do
            print(session.dim("\n(Ctrl-D or /exit leaves)"), file=session.err)
            continue
        text = line.strip()
        if not text:
            continue
        if text in ("/exit", "/quit", "/bye"):
            return 0
        if text == "/reset":
            session.reset()
            print(session.dim("(conversation forgotten)"), file=session.err)
            continue
        if text in ("/help", "/?"):
            print(_HELP, file=session.err)
            continue
        if text.startswith("/"):
            print(f"unknown command {text.split()[0]!r}; {_HELP}", file=session.err)
            continue
        if not valid_text(line):
            print("that line is not valid UTF-8 text", file=session.err)
            continue
        answer = session.ask(line)
        if answer is not None:
            session.report(answer)


def run_chat(
    args: argparse.Namespace,
    out: TextIO | None = None,
    err: TextIO | None = None,
    read: Callable[[str], str] | None = None,
) -> int:
    """Run ``rxstream chat``: stream the answer to ``out``; the finish line goes to ``err``.

    With no prompt and a terminal on stdin, an interactive chat (``read`` reads a line, default
    :func:`input`); otherwise one answer to the prompt (or to all of stdin).
    """
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        sampling = sampling_from_args(args)
        output = output_from_args(args)
        tool_choice_from_args(args, tuple(args.tools or ()))
    except ValueError as exc:
        print(f"rxstream chat: {exc}", file=err)
        return 2
    if args.system is not None and not valid_text(args.system):
        print("rxstream chat: --system is not valid UTF-8 text", file=err)
        return 2
    interactive = args.prompt is None and (read is not None or sys.stdin.isatty())
    prompt_text = None if interactive else _read_prompt(args, err)
    if not interactive and prompt_text is None:
        return 2
    if args.upstream_mode == "text":
        print(
            "rxstream chat: --upstream-mode text is not for the chat yet (it routes the model's own "
            "text from token ids); serve the engine with rxstream serve --upstream URL "
            "--upstream-mode text, or chat with an engine that returns ids",
            file=err,
        )
        return 2
    loading = time.perf_counter()
    try:
        model = load_model(
            args.model,
            args.provider,
            args.quantization,
            progress=True,
            upstream=args.upstream,
            upstream_endpoint=args.upstream_endpoint,
        )
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"rxstream chat: {exc}", file=err)
        return 1
    if (output.constrained or args.tool_choice in ("required",)) and not supports_grammar(model):
        what = "--tool-choice required" if not output.constrained else "--json-schema, --regex and --grammar"
        print(f"rxstream chat: {what} need a model that constrains decoding (not {model.provider})", file=err)
        return 2
    params = model_defaults(model).replace(**sampling)
    context = model.context_length
    default_budget = SamplingParams().max_new_tokens  # the option's default: a small context ends it
    if context is not None and params.max_new_tokens >= context and params.max_new_tokens != default_budget:
        print(
            f"rxstream chat: --max-tokens {params.max_new_tokens} is not below the model's context of "
            f"{context} tokens (the prompt needs room too)",
            file=err,
        )
        return 2
    session = _ChatSession(model, args, params, out, err)
    session.loaded = time.perf_counter() - loading
    if interactive:
        if read is None:
            with contextlib.suppress(ImportError):
                import readline  # noqa: F401  (line editing and history for input())
        return _repl(session, read or input)
    assert prompt_text is not None
    answer = session.ask(prompt_text)
    return 1 if answer is None else session.report(answer)
