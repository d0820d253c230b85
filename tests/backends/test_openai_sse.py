"""The event-stream framing the remote backend reads (``sse_data``): events split anywhere
across reads, every line ending, comments and other fields ignored."""

from __future__ import annotations

import itertools

from rxstream.backends.openai._events import sse_data

STREAM = (
    b": a comment\n"
    b'data: {"a": 1}\n\n'
    b"event: ping\nid: 7\n\n"
    b"data:first\r\ndata: second\r\n\r\n"
    b"data\rdata:  two spaces\r\r"
    b'data: {"t": "caf\xc3\xa9 \xe2\x80\xa8 line"}\n\n'
    b"datax: not data\n\n"
    b"data: [DONE]\n\n"
)
EVENTS = ['{"a": 1}', "first\nsecond", "\n two spaces", '{"t": "café \u2028 line"}', "[DONE]"]


def test_events_whole_and_in_one_byte_reads() -> None:
    assert list(sse_data([STREAM])) == EVENTS
    assert list(sse_data([STREAM[i : i + 1] for i in range(len(STREAM))])) == EVENTS


def test_events_split_at_any_two_points() -> None:
    for a, b in itertools.combinations(range(0, len(STREAM) + 1, 3), 2):
        assert list(sse_data([STREAM[:a], STREAM[a:b], STREAM[b:]])) == EVENTS


def test_an_unterminated_last_event_and_invalid_utf8() -> None:
    assert list(sse_data([b"data: a\n\ndata: tail\r"])) == ["a", "tail"]
    assert list(sse_data([b"data: \xff\n\n"])) == ["\ufffd"]
    assert list(sse_data([b""])) == []
