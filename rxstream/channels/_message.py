"""``MessageBuilder``: the assistant message of a response template, built from routed segments.

The :class:`~rxstream.channels.Router` splits the text into regions (one per template field);
the builder gives each region's text to its field's rules (:class:`~._template.FieldRule`) when
the region closes, and keeps the message as ``transformers.utils.chat_parsing.parse_response``
builds it:

- a field's value is its content parser's value, transformed; with ``repeats`` the values of its
  regions make a list (with ``join``, one string joined by it), otherwise the last region wins;
- the text outside every region is the implicit field's (the field without an opening
  delimiter): a run of it, ended by one of that field's closing delimiters or by a region
  opening, is one region of that field -- when it has any text at all; without an implicit
  field that text is dropped;
- a closing delimiter with no region open (a ``malformed`` segment) is text;
- with ``tools``, string arguments of tool calls are cast by the tool's JSON schema;
- at the end, a field that is not ``optional`` and missing is an error, and fields with empty
  values (``""``, ``[]``, ``{}``, None) are left out (the ``defaults`` keys stay).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from copy import deepcopy
from typing import Any

from ._content import ToolSchemas, apply_transform, parse_content
from ._router import Router
from ._segment import Segment
from ._template import FieldRule, ResponseTemplate, load_response_template

__all__ = ["MessageBuilder", "parse_message"]


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, list | dict | str) and not value)


class MessageBuilder:
    """Builds the message dict of a response template from :class:`Segment` items.

    Args:
        template: a :class:`ResponseTemplate`, or what :func:`load_response_template` takes.
        tools: tool definitions (as a chat template takes them, or Python functions) whose
            parameter schemas cast the string arguments of tool calls.

    ``feed(segments)`` returns the ``(field, value)`` of each region it closed;
    :attr:`message` is the message so far; ``finish()`` closes what is open and returns the
    final message. The segments must be those of a router on ``template.spec`` (the prompt's
    tail -- :meth:`ResponseTemplate.prompt_tail` -- routed first when the chat template writes
    the start of the message).
    """

    def __init__(self, template: ResponseTemplate | Any, tools: Iterable[Any] | None = None) -> None:
        self.template = load_response_template(template)
        self._tools = ToolSchemas(tools)
        self._message: dict[str, Any] = deepcopy(dict(self.template.defaults))
        self._default = self.template.spec.default
        self._implicit = self.template.implicit
        self._field: str | None = self._implicit  # the field whose region is open (or None)
        self._open = False  # an explicit region opened, or the implicit one got text
        self._body: list[str] = []
        self._captures: dict[str, str] = {}
        self._finished = False

    @property
    def message(self) -> dict[str, Any]:
        """The message so far (the values of the regions closed so far)."""
        return self._message

    @property
    def field(self) -> str | None:
        """The field whose region is open now (the implicit field outside regions), or None."""
        return self._field

    def feed(self, segments: Iterable[Segment]) -> list[tuple[str, Any]]:
        """Consume segments; return the ``(field, value)`` of each region closed by them."""
        if self._finished:
            raise ValueError("response_template: the message is finished")
        closed: list[tuple[str, Any]] = []
        fields = self.template.fields
        for seg in segments:
            event = seg.event
            if event == "chunk":
                self._text(seg.text)
            elif event == "open":
                self._close(closed)
                if seg.channel not in fields:
                    raise ValueError(f"response_template: a region of unknown field {seg.channel!r}")
                self._field = seg.channel
                self._captures = _groups(seg.captures)
                self._open = True
            elif event == "close":
                if seg.channel == self._field or seg.channel == self._default:
                    self._captures.update(_groups(seg.captures))
                    self._close(closed)
            elif seg.text:  # a stray closing delimiter: text, as transformers reads it
                self._text(seg.text)
        return closed

    def finish(self) -> dict[str, Any]:
        """Close the open region; check required fields; return the message."""
        if self._finished:
            raise ValueError("response_template: the message is finished")
        self._close([])
        self._finished = True
        fields = self.template.fields
        missing = [n for n, f in fields.items() if not f.optional and n not in self._message]
        if missing:
            raise ValueError(f"response_template: required field(s) missing from the message: {missing}")
        defaults = self.template.defaults
        self._message = {k: v for k, v in self._message.items() if k in defaults or not _empty(v)}
        return self._message

    def _text(self, text: str) -> None:
        if text and self._field is not None:
            self._body.append(text)
            self._open = True

    def _close(self, closed: list[tuple[str, Any]]) -> None:
        name = self._field
        if name is not None and self._open:
            rule = self.template.fields[name]
            value = self._value(rule, "".join(self._body))
            if rule.join is not None:
                if not isinstance(value, str):
                    raise ValueError(
                        f"response_template: field {name!r}: 'join' needs each region to parse to a "
                        f"string, got {type(value).__name__}"
                    )
                before = self._message.get(name)
                self._message[name] = value if before is None else before + rule.join + value
            elif rule.repeats:
                self._message.setdefault(name, []).append(value)
            else:
                self._message[name] = value
            closed.append((name, value))
        self._field = self._implicit
        self._open = False
        self._body = []
        self._captures = {}

    def _value(self, rule: FieldRule, body: str) -> Any:
        value = parse_content(body, rule.content, rule.content_args)
        if rule.transform is not None:
            if rule.transform_each:
                if not isinstance(value, list):
                    raise ValueError(
                        f"response_template: field {rule.name!r}: transform_each needs a list, "
                        f"got {type(value).__name__}"
                    )
                items = []
                for item in value:
                    if not isinstance(item, dict):
                        raise ValueError(
                            f"response_template: field {rule.name!r}: transform_each needs a list "
                            f"of objects, got an element of type {type(item).__name__}"
                        )
                    items.append(apply_transform(rule.transform, {**self._captures, **item}))
                value = items
            else:
                value = apply_transform(rule.transform, {**self._captures, "content": value})
        if self._tools:
            value = self._tools.coerce(value)
        return value


def _groups(captures: Mapping[str, Any]) -> dict[str, str]:
    return {k: v for k, v in captures.items() if v is not None}


def parse_message(
    text: str,
    template: ResponseTemplate | Any,
    *,
    prefix: str = "",
    tools: Iterable[Any] | None = None,
) -> dict[str, Any]:
    """The message of a whole response: ``parse_response`` of transformers, on this engine.

    Args:
        text: the generated text.
        template: a :class:`ResponseTemplate`, or what :func:`load_response_template` takes.
        prefix: the prompt the generation continues: its part after the last start anchor
            (what the chat template already wrote of the message, such as ``<think>\\n``) is
            parsed before ``text``.
        tools: tool definitions whose schemas cast string arguments of tool calls.
    """
    loaded = load_response_template(template)
    router = Router(loaded.compiled)
    builder = MessageBuilder(loaded, tools)
    builder.feed(router.feed(loaded.prompt_tail(prefix) + text))
    builder.feed(router.finish())
    return builder.finish()
