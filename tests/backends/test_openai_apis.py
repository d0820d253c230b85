"""``OpenAIBackend`` speaking the Responses and Messages APIs (and Chat Completions, for the same
outputs): recorded event streams, served by a wire-format double on a real socket in chunks cut
anywhere, give the same text, reasoning, tool calls, finish and usage."""

from __future__ import annotations

import json
import random
import threading
import time
from typing import Any

import pytest
import reactivex

from rxstream import FinishReason, FinishRecorder
from rxstream.backends.openai import OpenAIBackend, OpenAIBackendError, RemoteUsage
from rxstream.channels import Segment, ToolCallDelta, ToolCallEnd, ToolCallStart
from tests.backends.remote_server import recorded, remote_server, split

USER = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Zürich?"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ARGS = '{"city": "Zürich", "unit": "c"}'
CHANNELS = [
    Segment("reasoning", "chunk", "The user wants "),
    Segment("reasoning", "chunk", "Zürich’s weather."),
    Segment("content", "chunk", "Let me check"),
    Segment("content", "chunk", " — ☀️"),
    Segment("content", "chunk", " or 🌧?"),
    ToolCallStart(0, "call_abc", "get_weather"),
    ToolCallDelta(0, '{"city": '),
    ToolCallDelta(0, '"Zürich", '),
    ToolCallDelta(0, '"unit": "c"}'),
    ToolCallEnd(0, "call_abc", "get_weather", {"city": "Zürich", "unit": "c"}, ARGS),
]
USAGE = RemoteUsage(input_tokens=41, output_tokens=57, reasoning_tokens=12, cached_tokens=16)
RECORDINGS = {"chat": "chat_tool_calls", "responses": "responses_tool_call", "messages": "messages_tool_use"}


def run(obs: reactivex.Observable[Any], timeout: float = 10.0) -> tuple[list[Any], Exception | None]:
    items: list[Any] = []
    errors: list[Exception] = []
    done = threading.Event()
    obs.subscribe(items.append, lambda e: (errors.append(e), done.set()), done.set)
    assert done.wait(timeout), "the stream did not terminate"
    return items, errors[0] if errors else None


def chat(
    url: str, api: Any, **kw: Any
) -> tuple[list[Any], Exception | None, FinishRecorder, list[RemoteUsage]]:
    rec = FinishRecorder()
    usages: list[RemoteUsage] = []
    with OpenAIBackend(url, api=api, api_key="sk-test") as backend:
        obs = backend.chat(USER, on_finish=rec, usage=usages.append, max_tokens=100, tools=[WEATHER], **kw)
        items, err = run(obs)
    return items, err, rec, usages


def coalesced(items: list[Any]) -> list[Any]:
    """Adjacent text chunks of one channel joined (a chunking may cut text differently only at
    its items' boundaries, never inside an event)."""
    out: list[Any] = []
    for item in items:
        if (
            isinstance(item, Segment)
            and out
            and isinstance(out[-1], Segment)
            and out[-1].channel == item.channel
        ):
            out[-1] = out[-1]._replace(text=out[-1].text + item.text)
        else:
            out.append(item)
    return out


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_every_api_gives_the_same_channels_finish_and_usage(api: str) -> None:
    with remote_server() as (url, double):
        double.chunks = [recorded(RECORDINGS[api])]
        items, err, rec, usages = chat(url, api, channels=True)
    assert err is None
    assert items == CHANNELS
    assert rec.finish is not None and rec.finish.reason is FinishReason.EOS
    assert usages == [USAGE]


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_without_channels_the_items_are_the_answer_text(api: str) -> None:
    with remote_server() as (url, double):
        double.chunks = [recorded(RECORDINGS[api])]
        items, err, _rec, _usages = chat(url, api)
    assert err is None and items == ["Let me check", " — ☀️", " or 🌧?"]


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_every_chunking_of_the_bytes_gives_the_same_outputs(api: str) -> None:
    data = recorded(RECORDINGS[api])
    rng = random.Random(f"chunkings-{api}")
    chunkings = [split(data, list(range(1, len(data))))]  # one byte at a time
    chunkings += [split(data, rng.sample(range(1, len(data)), rng.randint(1, 60))) for _ in range(25)]
    assert any(
        b"\xc3\xbc" not in c and (b"\xc3" in c) for chunks in chunkings for c in chunks
    )  # ü cut in two
    with remote_server() as (url, double):
        for chunks in chunkings:
            assert b"".join(chunks) == data
            double.chunks = chunks
            items, err, rec, usages = chat(url, api, channels=True)
            assert err is None, err
            assert coalesced(items) == coalesced(CHANNELS) and items == CHANNELS
            assert rec.finish is not None and rec.finish.reason is FinishReason.EOS and usages == [USAGE]


@pytest.mark.parametrize(
    ("api", "name"), [("responses", "responses_incomplete"), ("messages", "messages_max_tokens")]
)
def test_the_token_budget_is_length(api: str, name: str) -> None:
    with remote_server() as (url, double):
        double.chunks = split(recorded(name), [7, 100, 333, 500])
        items, err, rec, usages = chat(url, api)
    assert err is None and items == ["Once upon a ", "time"]
    assert rec.finish is not None and rec.finish.reason is FinishReason.LENGTH
    assert usages[0].input_tokens == 9 and usages[0].output_tokens == 4


def test_a_messages_stop_sequence_is_stop() -> None:
    data = recorded("messages_max_tokens").replace(
        b'"stop_reason":"max_tokens","stop_sequence":null',
        b'"stop_reason":"stop_sequence","stop_sequence":"\\n\\n"',
    )
    with remote_server() as (url, double):
        double.chunks = [data]
        _items, err, rec, _usages = chat(url, "messages")
    assert err is None and rec.finish is not None
    assert rec.finish.reason is FinishReason.STOP and rec.finish.stop == "\n\n"


def test_the_requests_take_each_apis_shape() -> None:
    with remote_server() as (url, double):
        double.chunks = [recorded("responses_tool_call")]
        chat(url, "responses", tool_choice="required", temperature=0.2)
        double.chunks = [recorded("messages_tool_use")]
        chat(
            url,
            "messages",
            stop=["END"],
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
        )
        double.chunks = [recorded("chat_tool_calls")]
        chat(url, "chat")
    (r_path, r_body, r_headers), (m_path, m_body, m_headers), (c_path, c_body, c_headers) = double.requests
    user = [USER[1]]
    schema = WEATHER["function"]["parameters"]  # type: ignore[index]
    assert r_path == "/v1/responses" and r_body == {
        "input": user,
        "instructions": "Be brief.",
        "max_output_tokens": 100,
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "The weather in a city.",
                "parameters": schema,
            }
        ],
        "tool_choice": "required",
        "temperature": 0.2,
        "stream": True,
    }
    assert r_headers["authorization"] == "Bearer sk-test"
    assert m_path == "/v1/messages" and m_body == {
        "messages": user,
        "system": "Be brief.",
        "max_tokens": 100,
        "stop_sequences": ["END"],
        "tools": [{"name": "get_weather", "description": "The weather in a city.", "input_schema": schema}],
        "tool_choice": {"type": "tool", "name": "get_weather"},
        "stream": True,
    }
    assert m_headers["x-api-key"] == "sk-test" and m_headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in m_headers
    assert c_path == "/v1/chat/completions" and c_body["messages"] == USER and c_body["tools"] == [WEATHER]
    assert (
        c_body["stream_options"] == {"include_usage": True} and c_headers["authorization"] == "Bearer sk-test"
    )


ERROR_EVENTS = {
    "responses": (
        b'event: error\ndata: {"type":"error","code":"server_error","message":"The model crashed.",'
        b'"param":null,"sequence_number":3}\n\n',
        "server_error: The model crashed.",
    ),
    "messages": (
        b'event: error\ndata: {"type":"error",'
        b'"error":{"type":"overloaded_error","message":"Overloaded"}}\n\n',
        "overloaded_error: Overloaded",
    ),
}


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_an_error_event_after_some_text_is_a_one_line_error(api: str) -> None:
    data = recorded(RECORDINGS[api])
    head = data[: data.index(b" or ")]
    head = head[: head.rindex(b"\n\n") + 2]  # up to the event with " — ☀️"
    event, line = ERROR_EVENTS[api]
    with remote_server() as (url, double):
        double.chunks = split(head + event, [5, 900, len(head) + 3])
        items, err, rec, usages = chat(url, api)
    assert items == ["Let me check", " — ☀️"] and usages == []
    assert isinstance(err, OpenAIBackendError) and "\n" not in str(err)
    assert str(err) == f"OpenAIBackend: {url}/{api} sent an error event: {line}"
    assert rec.finish is not None and rec.finish.reason is FinishReason.ERROR and rec.finish.error is err


def test_a_failed_response_is_an_error_with_its_message() -> None:
    failed = (
        b'event: response.failed\ndata: {"type":"response.failed","sequence_number":2,'
        b'"response":{"id":"resp_01","status":"failed",'
        b'"error":{"code":"rate_limit_exceeded","message":"Slow down,\\nplease."},"output":[]}}\n\n'
    )
    with remote_server() as (url, double):
        double.chunks = [failed]
        _items, err, _rec, _usages = chat(url, "responses")
    assert isinstance(err, OpenAIBackendError) and str(err).endswith(
        "rate_limit_exceeded: Slow down, please."
    )


HTTP_ERRORS = {
    "responses": (
        429,
        {
            "error": {
                "message": "Rate limit reached.",
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
        "rate_limit_exceeded: Rate limit reached.",
    ),
    "messages": (
        400,
        {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"},
        },
        "invalid_request_error: max_tokens: Field required",
    ),
}


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_http_errors_in_each_apis_shape(api: str) -> None:
    status, body, line = HTTP_ERRORS[api]
    with remote_server() as (url, double):
        double.status, double.error_body = status, body
        items, err, rec, _usages = chat(url, api)
    assert items == [] and isinstance(err, OpenAIBackendError) and err.status == status
    assert str(err) == f"OpenAIBackend: POST {url}/{api} returned HTTP {status}: {line}"
    assert rec.finish is not None and rec.finish.reason is FinishReason.ERROR


@pytest.mark.parametrize(("api", "end"), [("responses", "response.completed"), ("messages", "message_stop")])
def test_a_stream_cut_before_its_end_is_an_error(api: str, end: str) -> None:
    data = recorded(RECORDINGS[api])
    with remote_server() as (url, double):
        double.chunks = [
            data[
                : data.index(
                    b"event: " + ("response.completed" if api == "responses" else "message_delta").encode()
                )
            ]
        ]
        items, err, _rec, usages = chat(url, api, channels=True)
    assert isinstance(err, OpenAIBackendError) and f"ended before {end}" in str(err) and usages == []
    assert items[:5] == CHANNELS[:5]


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_malformed_events_name_the_event(api: str) -> None:
    bad = (
        b'event: x\ndata: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":7}}\n\n'
    )
    if api == "responses":
        bad = b'event: x\ndata: {"type":"response.output_text.delta","delta":null}\n\n'
    with remote_server() as (url, double):
        double.chunks = [bad]
        _items, err, _rec, _usages = chat(url, api)
    assert isinstance(err, OpenAIBackendError) and "malformed event" in str(err) and err.event is not None


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_dispose_closes_the_connection_and_the_server_sees_it(api: str) -> None:
    blocks = recorded(RECORDINGS[api]).split(b"\n\n")
    first = next(i for i, b in enumerate(blocks) if b"Let me check" in b)
    start, delta = b"".join(b + b"\n\n" for b in blocks[:first]), blocks[first] + b"\n\n"
    rec = FinishRecorder()
    items: list[Any] = []
    three = threading.Event()

    def on_next(item: Any) -> None:
        items.append(item)
        if len(items) >= 3:
            three.set()

    with remote_server() as (url, double), OpenAIBackend(url, api=api) as backend:  # type: ignore[arg-type]
        double.chunks, double.forever = [start], delta
        sub = backend.chat(USER, on_finish=rec, max_tokens=10).subscribe(on_next)
        assert three.wait(5)
        sub.dispose()
        assert double.disconnected.wait(5), "the server kept streaming to a closed connection"
        t0 = time.monotonic()
        while any(t.name == "rxstream-openai" for t in threading.enumerate()) and time.monotonic() - t0 < 3:
            time.sleep(0.005)
        assert not any(t.name == "rxstream-openai" for t in threading.enumerate()), "worker thread leaked"
        count = len(items)
        time.sleep(0.05)
        assert len(items) == count and set(items) == {"Let me check"}
    assert rec.finish is not None and rec.finish.reason is FinishReason.CANCELLED


def test_argument_errors() -> None:
    with pytest.raises(ValueError, match="api"):
        OpenAIBackend("http://x/v1", api="completions")  # type: ignore[arg-type]
    messages = OpenAIBackend("http://x/v1", api="messages")
    with pytest.raises(ValueError, match="max_tokens"):
        messages.chat(USER)
    with pytest.raises(ValueError, match="pieces"):
        messages.chat(USER, pieces=True, max_tokens=5)
    with pytest.raises(ValueError, match="completions"):
        messages.completions("x")
    with pytest.raises(TypeError, match="usage"):
        OpenAIBackend("http://x/v1").chat(USER, usage=3)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "name", ["responses_tool_call", "responses_incomplete", "messages_tool_use", "messages_max_tokens"]
)
def test_the_recordings_are_events_of_the_official_sdks_types(name: str) -> None:
    pydantic = pytest.importorskip("pydantic")
    if name.startswith("responses"):
        from openai.types.responses import ResponseStreamEvent as Event
    else:
        from anthropic.types import RawMessageStreamEvent as Event
    adapter = pydantic.TypeAdapter(Event)
    pings = 'event: ping\ndata: {"type":"ping"}'  # documented, and skipped by the SDK's stream reader
    blocks = [b for b in recorded(name).decode().split("\n\n") if b and b != pings]
    for block in blocks:
        head, data = block.split("\n")
        event = adapter.validate_json(data.removeprefix("data: "))
        assert head == f"event: {event.type}"


def test_responses_logprobs_give_pieces_and_broken_arguments_an_invalid_call() -> None:
    from rxstream import Piece
    from rxstream.channels import ToolCallInvalid

    lp = [{"token": "Hi", "logprob": -0.25, "top_logprobs": [{"token": "Hi", "logprob": -0.25}]}]
    text = b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":"m",'
    text += b'"output_index":0,"content_index":0,"delta":"Hi","sequence_number":1,"logprobs":'
    text += json.dumps(lp).encode() + b"}\n\n"
    call = (
        b'event: response.output_item.added\ndata: {"type":"response.output_item.added","output_index":1,'
        b'"sequence_number":2,"item":{"type":"function_call","id":"fc","call_id":"c1","name":"f",'
        b'"arguments":""}}\n\n'
        b"event: response.function_call_arguments.delta\n"
        b'data: {"type":"response.function_call_arguments.delta",'
        b'"item_id":"fc","output_index":1,"delta":"{\\"a\\": ","sequence_number":3}\n\n'
    )
    end = b'event: response.completed\ndata: {"type":"response.completed","sequence_number":4,'
    end += b'"response":{}}\n\n'
    with remote_server() as (url, double), OpenAIBackend(url, api="responses") as backend:
        double.chunks = [text, end]
        pieces, err = run(backend.chat(USER, pieces=True))
        assert err is None and pieces == [Piece("Hi", (), (-0.25,), (((("Hi", -0.25),),)), ("Hi",))]
        double.chunks = [call, end]
        items, err = run(backend.chat(USER, channels=True))
    assert err is None and items[:2] == [ToolCallStart(0, "c1", "f"), ToolCallDelta(0, '{"a": ')]
    assert (
        isinstance(items[2], ToolCallInvalid)
        and items[2].raw == '{"a": '
        and "invalid JSON" in items[2].error
    )


def test_the_connection_pool_holds_a_stream_per_client() -> None:
    """httpx's default pool (100 connections) would make the 101st stream wait for a whole
    generation: a gateway in front of an engine holds one connection per client."""
    from rxstream.backends import OpenAIBackend

    backend = OpenAIBackend("http://127.0.0.1:9")
    pool = backend._client._transport._pool  # type: ignore[attr-defined]
    assert pool._max_connections == 1024
    backend.close()
    with pytest.raises(ValueError, match="max_connections"):
        OpenAIBackend("http://127.0.0.1:9", max_connections=0)
