"""The text side of :class:`~._model.OnnxModel`: :class:`ModelText` -- encoding, and the chat
template (its source, rendering, the prompt ids of a chat)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from rxstream.chat import ChatTemplate

__all__ = ["ModelText"]


class ModelText:
    """Text methods of a model with a ``tokenizers.Tokenizer`` and an optional chat template."""

    _tokenizer: Tokenizer
    _chat_template: ChatTemplate | None
    directory: Path

    @property
    def has_chat_template(self) -> bool:
        """Whether :meth:`encode_chat` can work."""
        return self._chat_template is not None

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added)."""
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)

    @property
    def chat_template(self) -> str | None:
        """The source of the model's chat template (Jinja2), or None when it has none."""
        return None if self._chat_template is None else self._chat_template.source

    def render_chat(
        self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True, **template_vars: Any
    ) -> str:
        """The prompt text of ``messages`` under the model's chat template.

        ``template_vars`` are passed to the template as they are (``tools=[...]`` for a template that
        renders tools, ``enable_thinking=False``, ...), as transformers' ``apply_chat_template`` does.
        """
        if self._chat_template is None:
            raise ValueError(
                f"OnnxModel: {self.directory} has no chat template (tokenizer_config.json chat_template)"
            )
        return self._chat_template.render(
            messages, add_generation_prompt=add_generation_prompt, **template_vars
        )

    def encode_chat(
        self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True, **template_vars: Any
    ) -> list[int]:
        """Token ids of ``messages`` rendered with the model's chat template (``template_vars`` as in
        :meth:`render_chat`)."""
        return self.encode(self.render_chat(messages, add_generation_prompt, **template_vars))
