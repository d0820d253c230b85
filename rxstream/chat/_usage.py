"""Where a chat generation's tokens went: :class:`TokenUsage` (SEMANTICS §10, "Usage adds up")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = ["BUCKETS", "Bucket", "TokenUsage"]

Bucket: TypeAlias = Literal["content", "reasoning", "tool_calls", "delimiters"]
"""One of the four buckets every generated token is counted in."""

BUCKETS: tuple[Bucket, ...] = ("content", "reasoning", "tool_calls", "delimiters")
"""The buckets, in the order :class:`TokenUsage` lists them."""


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """The tokens of one generation (or the sum of several: ``a + b``), each in exactly one
    bucket, so the buckets add up to :attr:`total`, the tokens the pipeline received.

    A token counts in the bucket of the routed text its first character belongs to: ``content``
    (the answer's text, before ``stop`` and ``replace``), ``reasoning``, ``tool_calls`` (the text
    of tool-call regions) or ``delimiters`` (``<think>``, ``</tool_call>``, end-of-turn markers,
    a stray closing delimiter, the whitespace dropped after a region, text of a channel no face
    shows). A token without text counts with the next character's text (at the end, with the
    last). Tokens still held when the stream ended early (a stop, a tool call that ends the
    generation, a cancellation, an error) count in the channel the stream was in: their text was
    never a delimiter.

    Attributes:
        content: tokens of the answer's text.
        reasoning: tokens of the reasoning's text (OpenAI's ``reasoning_tokens``).
        tool_calls: tokens of the tool calls' text.
        delimiters: tokens of delimiters and framing.
    """

    content: int = 0
    reasoning: int = 0
    tool_calls: int = 0
    delimiters: int = 0

    @property
    def total(self) -> int:
        """All the tokens: the sum of the buckets."""
        return self.content + self.reasoning + self.tool_calls + self.delimiters

    def __add__(self, other: TokenUsage) -> TokenUsage:
        if not isinstance(other, TokenUsage):
            return NotImplemented
        return TokenUsage(
            self.content + other.content,
            self.reasoning + other.reasoning,
            self.tool_calls + other.tool_calls,
            self.delimiters + other.delimiters,
        )

    def as_dict(self) -> dict[str, int]:
        """The buckets by name (``{"content": .., "reasoning": .., "tool_calls": ..,
        "delimiters": ..}``)."""
        return {
            "content": self.content,
            "reasoning": self.reasoning,
            "tool_calls": self.tool_calls,
            "delimiters": self.delimiters,
        }
