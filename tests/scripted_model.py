"""A scripted :class:`~rxstream.GenerativeModel`: it answers with recorded completions, as token ids
of a real tokenizer, through a real chat template (for the server and CLI tests of channels).

The completion is chosen by a script from the prompt text (so a test can also check what the
prompt held); its ids are the real tokenizer's encoding of the completion text, replayed one per
item on the given scheduler, with an optional pause per token. Disposal stops the replay between
two ids (``reactivex.from_iterable`` checks it), as a real generation stops.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import reactivex
from reactivex import abc
from reactivex import operators as ops

from rxstream import Finish, FinishCallback, FinishReason, SamplingParams
from rxstream.chat import ChatTemplate

__all__ = ["CHATML", "DEEPSEEK_R1_TEMPLATE", "QWEN3_TEMPLATE", "ScriptedModel"]

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""A plain ChatML template that knows nothing of tools (SmolLM2's, without its default system text)."""

QWEN3_TEMPLATE = """\
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}# Tools

You may call one or more functions to assist with the user query.

<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>

For each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) -%}
<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% elif message.role == 'assistant' %}<|im_start|>assistant
{% if message.content %}{{ message.content }}{% endif %}
{%- if message.tool_calls %}{% for call in message.tool_calls %}
<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}
</tool_call>{% endfor %}{% endif %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}{% endif %}"""
"""A Qwen3-style template: renders ``tools`` and Hermes ``<tool_call>`` calls; ``<think>``
reasoning is opened by the model itself (an empty one when ``enable_thinking`` is false), so
``auto`` detects ``qwen3``."""

DEEPSEEK_R1_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'user' %}{{ '<｜User｜>' + message['content'] }}"
    "{% elif message['role'] == 'assistant' %}"
    "{{ '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' }}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<｜Assistant｜><think>\\n' }}{% endif %}"
)
"""A DeepSeek-R1-style template whose generation prompt opens ``<think>``: the answer starts in the
reasoning (``auto`` detects ``deepseek-r1``)."""


class ScriptedModel:
    """Answers each prompt with ``script(prompt_text)``, replayed as the tokenizer's ids.

    Attributes:
        prompts: the prompt texts it was asked to continue (decoded, special tokens kept).
        active: generations running now; ``cancelled``: replays disposed before their end.
    """

    def __init__(
        self,
        tokenizer: Any,
        template: str | None,
        script: Callable[[str], str] | str,
        *,
        delay: float = 0.0,
        context_length: int = 8192,
    ) -> None:
        self.tokenizer = tokenizer
        self.chat_template = template
        self._template = ChatTemplate(template) if template is not None else None
        self.script = script if callable(script) else (lambda _prompt, text=script: text)
        self.delay = delay
        self.eos_token_ids: frozenset[int] = frozenset()
        self.context_length = context_length
        self.provider = "scripted"
        self.prompts: list[str] = []
        self.active = 0
        self.cancelled = 0
        self.emitted: list[int] = []  # ids emitted per generation, in order
        self._lock = threading.Lock()

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def render_chat(
        self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True, **template_vars: Any
    ) -> str:
        if self._template is None:
            raise ValueError("no chat template")
        return self._template.render(messages, add_generation_prompt=add_generation_prompt, **template_vars)

    def encode_chat(
        self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True, **template_vars: Any
    ) -> list[int]:
        return self.encode(self.render_chat(messages, add_generation_prompt, **template_vars))

    def completion_ids(self, prompt_text: str) -> list[int]:
        """The ids the model answers ``prompt_text`` with."""
        return self.encode(self.script(prompt_text))

    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams | None = None,
        *,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
    ) -> reactivex.Observable[int]:
        prompt_text = self.tokenizer.decode(list(prompt_ids), skip_special_tokens=False)
        ids = self.completion_ids(prompt_text)
        budget = (params or SamplingParams()).max_new_tokens
        reason = FinishReason.EOS if budget >= len(ids) else FinishReason.LENGTH
        state = {"count": 0, "ended": False}

        def start() -> None:
            with self._lock:
                self.prompts.append(prompt_text)
                self.active += 1
                self.emitted.append(0)

        def step(_id: int) -> None:
            state["count"] += 1
            with self._lock:
                self.emitted[-1] += 1
            if self.delay:
                time.sleep(self.delay)

        def report() -> None:
            state["ended"] = True
            if on_finish is not None:
                on_finish(Finish(reason))

        def end() -> None:
            with self._lock:
                self.active -= 1
                if not state["ended"]:
                    self.cancelled += 1
            if not state["ended"] and on_finish is not None:
                on_finish(Finish(FinishReason.CANCELLED))

        def subscribe(
            observer: abc.ObserverBase[int], sched: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            start()
            return (
                reactivex.from_iterable(ids[:budget], scheduler=scheduler or sched)
                .pipe(ops.do_action(on_next=step, on_completed=report), ops.finally_action(end))
                .subscribe(observer, scheduler=sched)
            )

        return reactivex.Observable(subscribe)
