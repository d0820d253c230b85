"""How error messages show a bad value: its type and a shortened repr."""

from __future__ import annotations

__all__ = ["describe"]


def describe(value: object) -> str:
    """``type: repr`` of a value, shortened to about 80 characters, for error messages."""
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{type(value).__name__}: {text}"
