"""Rendering a model's chat template (Jinja2, Hugging Face conventions): the local ONNX model and
the gateway (which renders and tokenizes here, sending the engine token ids) share it. Jinja2 comes
with the extras that render templates (``onnx``, ``gateway``); without it, building a template is a
one-line :class:`~rxstream._extras.MissingExtraError`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from .._extras import require_extra

__all__ = ["ChatTemplate"]


def _raise(message: str) -> NoReturn:
    raise ValueError(f"chat template: {message}")


class ChatTemplate:
    """A compiled chat template (sandboxed Jinja2, ``trim_blocks``/``lstrip_blocks`` like transformers)."""

    __slots__ = ("_template", "bos_token", "eos_token", "source")

    def __init__(self, source: str, *, bos_token: str = "", eos_token: str = "") -> None:
        require_extra("chat templates", "onnx", ("jinja2",))
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise
        self.source = source
        self._template = env.from_string(source)
        self.bos_token = bos_token
        self.eos_token = eos_token

    def render(
        self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True, **extra: Any
    ) -> str:
        """Render ``messages`` (``{"role": ..., "content": ...}`` mappings) to the prompt text."""
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            raise TypeError(
                f"chat: messages must be a sequence of {{'role', 'content'}} mappings, got {messages!r}"
            )
        for m in messages:
            if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
                raise ValueError(f"chat: each message needs 'role' and 'content', got {m!r}")
        return str(
            self._template.render(
                messages=[dict(m) for m in messages],
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                **extra,
            )
        )
