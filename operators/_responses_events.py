"""The ``responses_events`` operator: a routed chat's items (:func:`chat_pipeline`'s) as the
streaming events of OpenAI's Responses API, JSON-ready dicts (SEMANTICS §11)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reactivex import Observable, abc

from rxstream._finish import Finish, FinishReason, FinishRecorder
from rxstream.channels import ToolCallDelta, ToolCallEnd, ToolCallInvalid, ToolCallStart
from rxstream.chat import TextDelta, TokenUsage

from ._sink import OperatorSink, operator

__all__ = ["responses_events"]

Event = dict[str, Any]

_PREFIX = {"message": "msg", "reasoning": "rs", "function_call": "fc"}


class _Item:
    """One output item as it streams: a message, a reasoning item or a function call."""

    __slots__ = ("call_id", "id", "index", "kind", "name", "parts")

    def __init__(self, kind: str, index: int, stem: str, call_id: str = "", name: str = "") -> None:
        self.kind = kind
        self.index = index
        self.id = f"{_PREFIX[kind]}_{stem}_{index}"
        self.call_id = call_id
        self.name = name
        self.parts: list[str] = []

    def text(self) -> str:
        return "".join(self.parts)

    def part(self, text: str) -> dict[str, Any]:
        """The item's one content part (``content_index`` 0) with ``text``."""
        if self.kind == "message":
            return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        return {"type": "reasoning_text", "text": text}

    def shape(self, status: str) -> dict[str, Any]:
        """The item as the API shows it, with ``status`` (``in_progress``: no content yet)."""
        done = status != "in_progress"
        if self.kind == "function_call":
            arguments = self.text() if done else ""
            return {
                "id": self.id,
                "type": "function_call",
                "call_id": self.call_id,
                "name": self.name,
                "arguments": arguments,
                "status": status,
            }
        content = [self.part(self.text())] if done else []
        if self.kind == "message":
            return {
                "id": self.id,
                "type": "message",
                "role": "assistant",
                "status": status,
                "content": content,
            }
        return {"id": self.id, "type": "reasoning", "summary": [], "content": content, "status": status}


class _ResponsesSink(OperatorSink[Any, Event]):
    """One subscription: the events so far, the open items and the finished ones."""

    __slots__ = (
        "called",
        "calls",
        "fields",
        "finish",
        "input_tokens",
        "invalid",
        "items",
        "output",
        "seq",
        "stem",
        "text",
        "usage",
    )

    def __init__(
        self,
        observer: abc.ObserverBase[Event],
        fields: dict[str, Any],
        finish: Callable[[], Finish | None] | None,
        usage: Callable[[], TokenUsage | None] | None,
        input_tokens: int,
    ) -> None:
        super().__init__("responses_events", observer)
        self.fields = fields
        self.stem = str(fields["id"]).removeprefix("resp_")
        self.finish = finish
        self.usage = usage
        self.input_tokens = input_tokens
        self.seq = 0
        self.items = 0  # output items started
        self.called = False  # a function call completed
        self.output: dict[int, dict[str, Any]] = {}  # finished items by output index
        self.text: _Item | None = None  # the open message or reasoning item
        self.calls: dict[int, _Item] = {}  # open function calls by the pipeline's call index
        self.invalid: list[dict[str, Any]] = []

    def run(self, source: Observable[Any], scheduler: abc.SchedulerBase | None) -> abc.DisposableBase:
        self.send("response.created", response=self.response("in_progress"))
        self.send("response.in_progress", response=self.response("in_progress"))
        return super().run(source, scheduler)

    # -- events -------------------------------------------------------------------------------
    def send(self, kind: str, **fields: Any) -> None:
        self.emit({"type": kind, "sequence_number": self.seq, **fields})
        self.seq += 1

    def response(
        self, status: str, *, error: dict[str, Any] | None = None, incomplete: str | None = None
    ) -> dict[str, Any]:
        done = status != "in_progress"
        body: dict[str, Any] = {
            **self.fields,
            "object": "response",
            "status": status,
            "error": error,
            "incomplete_details": {"reason": incomplete} if status == "incomplete" else None,
            "output": [self.output[k] for k in sorted(self.output)] if done else [],
            "usage": self.usage_body() if done else None,
        }
        if done and self.invalid:
            body["rxstream"] = {"invalid_tool_calls": self.invalid}
        return body

    def usage_body(self) -> dict[str, Any] | None:
        used = self.usage() if self.usage is not None else None
        if used is None:
            return None
        return {
            "input_tokens": self.input_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": used.total,
            "output_tokens_details": {"reasoning_tokens": used.reasoning},
            "total_tokens": self.input_tokens + used.total,
            "rxstream": used.as_dict(),
        }

    def added(self, kind: str, call_id: str = "", name: str = "") -> _Item:
        item = _Item(kind, self.items, self.stem, call_id, name)
        self.items += 1
        self.send("response.output_item.added", output_index=item.index, item=item.shape("in_progress"))
        if kind != "function_call":
            where = {"item_id": item.id, "output_index": item.index, "content_index": 0}
            self.send("response.content_part.added", **where, part=item.part(""))
        return item

    def item_done(self, item: _Item, status: str) -> None:
        where = {"item_id": item.id, "output_index": item.index}
        text = item.text()
        if item.kind == "function_call":
            self.send("response.function_call_arguments.done", **where, arguments=text)
        else:
            if item.kind == "message":
                self.send("response.output_text.done", **where, content_index=0, text=text, logprobs=[])
            else:
                self.send("response.reasoning_text.done", **where, content_index=0, text=text)
            self.send("response.content_part.done", **where, content_index=0, part=item.part(text))
        shape = item.shape(status)
        self.output[item.index] = shape
        self.send("response.output_item.done", output_index=item.index, item=shape)

    def close_text(self, status: str = "completed") -> None:
        if self.text is not None:
            item, self.text = self.text, None
            self.item_done(item, status)

    # -- items --------------------------------------------------------------------------------
    def on_next(self, value: Any) -> None:
        if isinstance(value, TextDelta):
            self.on_text(value)
        elif isinstance(value, ToolCallStart):
            self.close_text()
            self.calls[value.index] = self.added("function_call", value.id, value.name)
        elif isinstance(value, ToolCallDelta):
            call = self.calls.get(value.index)
            if call is not None and value.text:
                call.parts.append(value.text)
                self.send(
                    "response.function_call_arguments.delta",
                    item_id=call.id,
                    output_index=call.index,
                    delta=value.text,
                )
        elif isinstance(value, ToolCallEnd):
            call = self.calls.pop(value.index, None)
            if call is not None:
                call.parts = [value.arguments_text]  # the deltas' join; the final text is authoritative
                self.called = True
                self.item_done(call, "completed")
        elif isinstance(value, ToolCallInvalid):
            call = self.calls.pop(value.index, None)
            report = {"output_index": None if call is None else call.index, "error": value.error}
            self.invalid.append({**report, "position": value.position, "raw": value.raw})
            if call is not None:
                self.item_done(call, "incomplete")

    def on_text(self, delta: TextDelta) -> None:
        if not delta.text:
            return
        kind = "message" if delta.kind == "content" else "reasoning"
        if self.text is not None and self.text.kind != kind:
            self.close_text()
        if self.text is None:
            self.text = self.added(kind)
        item = self.text
        item.parts.append(delta.text)
        where = {"item_id": item.id, "output_index": item.index, "content_index": 0}
        if kind == "message":
            self.send("response.output_text.delta", **where, delta=delta.text, logprobs=[])
        else:
            self.send("response.reasoning_text.delta", **where, delta=delta.text)

    # -- the end ------------------------------------------------------------------------------
    def close_all(self, status: str) -> None:
        self.close_text(status)
        for index in sorted(self.calls, key=lambda k: self.calls[k].index):
            self.item_done(self.calls.pop(index), status)

    def on_completed(self) -> None:
        finish = self.finish() if self.finish is not None else None
        reason = finish.reason if finish is not None else FinishReason.EOS
        if reason is FinishReason.LENGTH:
            self.close_all("incomplete")
            self.send(
                "response.incomplete", response=self.response("incomplete", incomplete="max_output_tokens")
            )
        elif reason is FinishReason.CANCELLED and not self.called:
            self.close_all("incomplete")
            self.send("response.incomplete", response=self.response("incomplete"))
        else:
            self.close_all("completed")
            self.send("response.completed", response=self.response("completed"))
        self.end(Finish(FinishReason.EOS), dispose=False)

    def on_error(self, error: Exception) -> None:
        if self.done:
            return
        self.close_all("incomplete")
        code = getattr(error, "code", None)  # an error may name its own (a server's shutdown)
        kind = code if isinstance(code, str) and code else "server_error"
        failure = {"code": kind, "message": f"{type(error).__name__}: {error}"}
        self.send("response.failed", response=self.response("failed", error=failure))
        self.end(Finish(FinishReason.EOS), dispose=False)


def _finish_getter(finish: Any) -> Callable[[], Finish | None] | None:
    if finish is None:
        return None
    if isinstance(finish, FinishRecorder):
        recorder = finish
        return lambda: recorder.finish
    if callable(finish):
        getter: Callable[[], Finish | None] = finish
        return getter
    raise TypeError(
        f"responses_events: finish must be a FinishRecorder or callable, got {type(finish).__name__}"
    )


def responses_events(
    response_id: str,
    *,
    created_at: int,
    model: str,
    fields: Mapping[str, Any] | None = None,
    finish: FinishRecorder | Callable[[], Finish | None] | None = None,
    usage: Callable[[], TokenUsage | None] | None = None,
    input_tokens: int = 0,
) -> Callable[[Observable[Any]], Observable[Event]]:
    """A routed chat's items (:func:`chat_pipeline`: :class:`~rxstream.chat.TextDelta` and the
    tool-call events) as the events of one streamed OpenAI Responses API response: dicts shaped as
    the API's (the official ``openai`` SDK parses them), ``sequence_number`` counting from 0.

    ``response.created`` and ``response.in_progress`` go out at subscription. Each run of answer
    text is a ``message`` item (``response.output_item.added``, ``response.content_part.added``,
    ``response.output_text.delta`` ..., ``response.output_text.done``,
    ``response.content_part.done``, ``response.output_item.done``), each run of reasoning a
    ``reasoning`` item with one ``reasoning_text`` part (``response.reasoning_text.delta`` /
    ``.done``), each tool call a ``function_call`` item (``call_id`` the call's id; its
    ``response.function_call_arguments.delta`` events join to exactly its ``arguments``). An
    item is done when an item of another kind starts or the stream ends. An invalid tool call's
    item ends ``incomplete`` (its report, and that of a call never started, goes in the final
    response's ``rxstream.invalid_tool_calls``). Empty deltas make no event.

    Item ids are ``msg_``, ``rs_`` or ``fc_`` + the response id (less ``resp_``) + ``_`` + the
    item's ``output_index``: the events depend only on the items' text, not on how it is cut.

    At the end, ``finish`` (a :class:`~rxstream.FinishRecorder`, or a callable giving the
    :class:`~rxstream.Finish`) says how the generation ended: ``length`` gives
    ``response.incomplete`` with ``incomplete_details.reason`` ``"max_output_tokens"`` (open
    items end ``incomplete``), ``cancelled`` ``response.incomplete`` with reason null (unless a
    function call completed: a generation that ends after its one call,
    ``parallel_tool_calls=False``), anything
    else (or no ``finish``) ``response.completed``. ``usage`` (called once then; e.g. what
    ``chat_pipeline(usage=...)`` reported, which it does before its completion) gives the
    output tokens, ``input_tokens`` the prompt's: the response's ``usage`` (None without
    ``usage``). An upstream error becomes ``response.failed`` (``error.code`` the error's own ``code``
    attribute when it has a string one, else ``server_error``)
    and the stream completes. ``fields`` are more fields of the response object (what a request
    echoes: ``instructions``, ``tools``, ``metadata``, ...).

    Marble diagram (a response ``resp_1``; the created, in-progress and completed responses
    are ``c``, ``p`` and ``z``)::

        source:   -a-|           a=TextDelta("content", "Hi")
        operator: responses_events("resp_1", created_at=0, model="m")
        result:   (cp)(ABD)-(EFGz|)
        ...   c=dict(type="response.created", sequence_number=0, response=dict(id="resp_1"
        ...       created_at=0, model="m", object="response", status="in_progress", error=None
        ...       incomplete_details=None, output=[], usage=None))
        ...   p=dict(type="response.in_progress", sequence_number=1, response=dict(id="resp_1"
        ...       created_at=0, model="m", object="response", status="in_progress", error=None
        ...       incomplete_details=None, output=[], usage=None))
        ...   A=dict(type="response.output_item.added", sequence_number=2, output_index=0
        ...       item=dict(id="msg_1_0", type="message", role="assistant", status="in_progress"
        ...       content=[]))
        ...   B=dict(type="response.content_part.added", sequence_number=3, item_id="msg_1_0"
        ...       output_index=0, content_index=0, part=dict(type="output_text", text=""
        ...       annotations=[], logprobs=[]))
        ...   D=dict(type="response.output_text.delta", sequence_number=4, item_id="msg_1_0"
        ...       output_index=0, content_index=0, delta="Hi", logprobs=[])
        ...   E=dict(type="response.output_text.done", sequence_number=5, item_id="msg_1_0"
        ...       output_index=0, content_index=0, text="Hi", logprobs=[])
        ...   F=dict(type="response.content_part.done", sequence_number=6, item_id="msg_1_0"
        ...       output_index=0, content_index=0, part=dict(type="output_text", text="Hi"
        ...       annotations=[], logprobs=[]))
        ...   G=dict(type="response.output_item.done", sequence_number=7, output_index=0
        ...       item=dict(id="msg_1_0", type="message", role="assistant", status="completed"
        ...       content=[dict(type="output_text", text="Hi", annotations=[], logprobs=[])]))
        ...   z=dict(type="response.completed", sequence_number=8, response=dict(id="resp_1"
        ...       created_at=0, model="m", object="response", status="completed", error=None
        ...       incomplete_details=None, usage=None, output=[dict(id="msg_1_0", type="message"
        ...       role="assistant", status="completed", content=[dict(type="output_text"
        ...       text="Hi", annotations=[], logprobs=[])])]))

    Raises:
        TypeError: ``finish`` or ``usage`` is neither None nor callable; ``fields`` is not a mapping.
        ValueError: ``response_id`` is empty.
    """
    if not isinstance(response_id, str) or not response_id:
        raise ValueError(f"responses_events: response_id must be a non-empty string, got {response_id!r}")
    if fields is not None and not isinstance(fields, Mapping):
        raise TypeError(f"responses_events: fields must be a mapping, got {type(fields).__name__}")
    if usage is not None and not callable(usage):
        raise TypeError(f"responses_events: usage must be callable, got {type(usage).__name__}")
    getter = _finish_getter(finish)
    base = {**(fields or {}), "id": response_id, "created_at": created_at, "model": model}

    def make_sink(observer: abc.ObserverBase[Event]) -> _ResponsesSink:
        return _ResponsesSink(observer, base, getter, usage, input_tokens)

    return operator("responses_events", make_sink)
