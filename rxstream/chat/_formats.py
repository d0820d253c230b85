"""Which model family a chat is routed by: the ``--reasoning-format`` option (``auto``, ``none``,
or a family's name) and its detection from the chat template."""

from __future__ import annotations

from typing import Any

from ..families import detect_family, family, family_names

__all__ = [
    "REASONING_FORMATS",
    "check_reasoning_format",
    "detect_reasoning_format",
    "resolve_reasoning_format",
]


def _formats() -> tuple[str, ...]:
    return ("auto", "none", *family_names())


REASONING_FORMATS: tuple[str, ...] = _formats()
"""The values of ``--reasoning-format`` (a family's aliases are accepted too)."""


def detect_reasoning_format(template: str | None) -> str | None:
    """The name of the family a chat template's source points to (the families' signatures, in
    their detection order: :func:`rxstream.families.detect_family`), or None."""
    found = detect_family(template)
    return None if found is None else found.name


def resolve_reasoning_format(
    option: str | None, model: Any, *, owner: str = "--reasoning-format"
) -> str | None:
    """The preset name to route a chat with, or None (no channels).

    ``option``: ``"auto"`` (or None): detected from the model's ``chat_template``; ``"none"``;
    a preset name or alias.

    Raises:
        ValueError: an unknown value (a one-line message naming ``owner`` and the choices).
    """
    if option is None or option == "auto":
        template = getattr(model, "chat_template", None)
        return detect_reasoning_format(template if isinstance(template, str) else None)
    if option == "none":
        return None
    return check_reasoning_format(option, owner=owner)


def check_reasoning_format(option: str, *, owner: str = "--reasoning-format") -> str:
    """``option`` checked: ``auto``, ``none``, or a preset's canonical name.

    Raises:
        ValueError: an unknown value (one line, with the choices).
    """
    if option in ("auto", "none"):
        return option
    try:
        return family(option, owner).name
    except (ValueError, TypeError):
        raise ValueError(f"{owner} must be one of {', '.join(REASONING_FORMATS)}, got {option!r}") from None
