"""Resumable and multicast streams of ``rxstream serve`` (SEMANTICS §13): real sockets, the tiny
model, raw SSE and the official SDKs. Every event carries ``id: <stream>:<n>``; a client that
comes back with ``Last-Event-ID`` gets exactly the events after it; the generation goes on for
the grace period after the last client left; followers share one generation; cancelling is an
explicit request; the buffers are bounded and an expired cursor is refused."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx
import openai

from rxstream.backends import OnnxModel
from rxstream.server import ServerLimits, create_app, run_in_thread

from .test_server import SlowModel

LONG = 150
"""A budget the tiny model's context allows: 7.5 s at 50 ms a token, longer than any test waits."""

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 40}


class Counting(SlowModel):
    """:class:`SlowModel` that counts generations started and ended (by any end)."""

    def __init__(self, inner: OnnxModel, delay: float) -> None:
        super().__init__(inner, delay)
        self.started = 0
        self.ended = 0

    def generate(self, prompt_ids: list[int], **kw: Any) -> Any:
        self.started += 1

        def end() -> None:
            self.ended += 1

        return super().generate(prompt_ids, **kw).pipe(_finally(end))


def _finally(action: Any) -> Any:
    from reactivex import operators as ops

    return ops.finally_action(action)


@contextmanager
def serving(
    model: OnnxModel, delay: float = 0.01, max_concurrency: int = 4, **limits: Any
) -> Iterator[tuple[str, Counting, Any]]:
    slow = Counting(model, delay)
    app = create_app(slow, model_name="tiny", limits=ServerLimits(max_concurrency=max_concurrency, **limits))
    with run_in_thread(app) as url:
        yield url, slow, app


def event_iter(response: httpx.Response) -> Iterator[tuple[str | None, str]]:
    """The events of an SSE response as (id, the event's other lines); comments skipped."""
    eid: str | None = None
    lines: list[str] = []
    for line in response.iter_lines():
        if line.startswith(":"):
            continue
        if line == "":
            if lines or eid is not None:
                yield eid, "\n".join(lines)
                eid, lines = None, []
            continue
        if line.startswith("id: "):
            eid = line[4:]
        else:
            lines.append(line)


def events(response: httpx.Response, limit: int | None = None) -> list[tuple[str | None, str]]:
    """The first ``limit`` events (all by default) of :func:`event_iter`."""
    out = []
    for ev in event_iter(response):
        out.append(ev)
        if limit is not None and len(out) >= limit:
            break
    return out


def content(evs: list[tuple[str | None, str]]) -> str:
    text = []
    for _, ev in evs:
        data = ev.removeprefix("data: ")
        if data != "[DONE]":
            for choice in json.loads(data).get("choices", []):
                text.append(choice["delta"].get("content") or "")
    return "".join(text)


def wait_for(check: Any, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return False


def test_events_are_numbered_and_a_resume_gets_exactly_the_rest(model: OnnxModel) -> None:
    with serving(model, resume_grace=10) as (url, slow, _app), httpx.Client(timeout=30) as http:
        with http.stream("POST", f"{url}/v1/chat/completions", json=CHAT) as r:
            sid = r.headers["rxstream-stream-id"]
            head = events(r, limit=5)
        # every event names the stream and its number, from 1
        assert [eid for eid, _ in head] == [f"{sid}:{n}" for n in range(1, 6)]
        assert json.loads(head[0][1].removeprefix("data: "))["id"] == sid
        # a follower from the start (multicast) and the resumed client see the same events
        with http.stream("GET", f"{url}/v1/chat/completions", headers={"Last-Event-ID": sid}) as r:
            whole = events(r)
        with http.stream(
            "POST", f"{url}/v1/chat/completions", json=CHAT, headers={"Last-Event-ID": f"{sid}:5"}
        ) as r:
            assert r.status_code == 200 and r.headers["rxstream-stream-id"] == sid
            rest = events(r)
        assert head + rest == whole  # nothing lost, nothing twice
        assert whole[-1][1] == "data: [DONE]"
        finish = json.loads(whole[-2][1].removeprefix("data: "))["choices"][0]["finish_reason"]
        assert finish == "length"  # the generation went on while no client followed it
        assert [eid for eid, _ in whole] == [f"{sid}:{n}" for n in range(1, len(whole) + 1)]
        assert slow.started == 1  # the resumes started no generation


def test_the_generation_goes_on_for_the_grace_period_then_is_cancelled(model: OnnxModel) -> None:
    body = {**CHAT, "max_tokens": LONG}
    with serving(model, delay=0.05, resume_grace=0.5) as (url, slow, app), httpx.Client(timeout=30) as http:
        with http.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
            events(r, limit=3)
        left = time.monotonic()
        time.sleep(0.25)
        assert slow.ended == 0  # within the grace period: still generating
        assert wait_for(lambda: slow.ended == 1, timeout=10)
        assert time.monotonic() - left >= 0.45  # ... and cancelled once it was over
        assert wait_for(lambda: not app.state.replay.streams)  # then forgotten


def test_no_grace_cancels_at_once(model: OnnxModel) -> None:
    body = {**CHAT, "max_tokens": LONG}
    with serving(model, delay=0.05, resume_grace=0) as (url, slow, app), httpx.Client(timeout=30) as http:
        with http.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
            sid = r.headers["rxstream-stream-id"]
            events(r, limit=3)
        assert wait_for(lambda: slow.ended == 1, timeout=5)
        assert wait_for(lambda: not app.state.replay.streams)
        r2 = http.get(f"{url}/v1/chat/completions", headers={"Last-Event-ID": f"{sid}:3"})
        assert r2.status_code == 404 and "no stream" in r2.json()["error"]["message"]


def test_an_explicit_cancel_ends_the_generation_for_every_follower(model: OnnxModel) -> None:
    body = {**CHAT, "max_tokens": LONG}
    with serving(model, delay=0.05, resume_grace=10) as (url, slow, _app), httpx.Client(timeout=30) as http:
        with http.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
            sid = r.headers["rxstream-stream-id"]
            events(r, limit=2)
        # reconnected, then cancelled from elsewhere: the follower gets the error event and [DONE]
        with http.stream("GET", f"{url}/v1/chat/completions?last_event_id={sid}:2") as r:
            it = event_iter(r)
            first = [next(it)]
            assert http.post(f"{url}/v1/streams/{sid}/cancel").json() == {
                "id": sid,
                "object": "stream",
                "status": "cancelled",
            }
            rest = first + list(it)
        assert rest[-1][1] == "data: [DONE]"
        error = json.loads(rest[-2][1].removeprefix("data: "))["error"]
        assert error["type"] == "cancelled" and "cancelled by a request" in error["message"]
        assert wait_for(lambda: slow.ended == 1, timeout=5)
        missing = http.post(f"{url}/v1/streams/chatcmpl-nope/cancel")
        assert missing.status_code == 404


def test_bad_cursors_get_one_clear_error(model: OnnxModel) -> None:
    with (
        serving(model, resume_grace=10, resume_buffer_bytes=2000) as (url, _slow, app),
        httpx.Client(timeout=30) as http,
    ):
        r = http.get(f"{url}/v1/chat/completions")
        assert r.status_code == 400 and "Last-Event-ID" in r.json()["error"]["message"]
        r = http.get(f"{url}/v1/chat/completions", headers={"Last-Event-ID": "not a cursor!"})
        assert r.status_code == 400 and r.json()["error"]["param"] == "Last-Event-ID"
        with http.stream("POST", f"{url}/v1/chat/completions", json={**CHAT, "max_tokens": 60}) as r:
            sid = r.headers["rxstream-stream-id"]
            events(r, limit=1)
        # the generation finishes with nobody reading: the 2 KB buffer keeps only the last events
        assert wait_for(lambda: app.state.replay.streams[sid].done)
        with http.stream("GET", f"{url}/v1/chat/completions", headers={"Last-Event-ID": sid}) as r:
            assert r.status_code == 410
            r.read()
            message = r.json()["error"]["message"]
        assert "cannot resume after event 0" in message and "replay buffer holds events" in message
        r = http.get(f"{url}/v1/chat/completions", headers={"Last-Event-ID": f"{sid}:99999"})
        assert r.status_code == 400 and "has no event 99999" in r.json()["error"]["message"]
        # another path's stream is not this one's
        r = http.get(f"{url}/v1/completions", headers={"Last-Event-ID": sid})
        assert r.status_code == 404


def test_a_slow_reader_holds_the_generation_back_and_loses_nothing(model: OnnxModel) -> None:
    # a buffer of ~3 events: the one client that reads slowly must still get every event
    with (
        serving(model, delay=0.0, resume_grace=10, resume_buffer_bytes=600) as (url, _slow, _app),
        httpx.Client(timeout=30) as http,
    ):
        with http.stream("POST", f"{url}/v1/chat/completions", json={**CHAT, "max_tokens": 30}) as r:
            sid = r.headers["rxstream-stream-id"]
            got: list[tuple[str | None, str]] = []
            for ev in _slowly(r):
                got.append(ev)
        assert [eid for eid, _ in got] == [f"{sid}:{n}" for n in range(1, len(got) + 1)]
        assert got[-1][1] == "data: [DONE]"
        assert sum(len(ev) for _, ev in got) > 3 * 600  # more than the buffer ever held


def _slowly(response: httpx.Response) -> Iterator[tuple[str | None, str]]:
    for ev in events(response):
        time.sleep(0.005)
        yield ev


def test_the_official_sdks_read_a_resumed_stream(model: OnnxModel) -> None:
    with serving(model, resume_grace=10) as (url, _slow, _app), httpx.Client(timeout=30) as http:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
        stream = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=30, stream=True
        )
        first = []
        for chunk in stream:
            first.append(chunk)
            if len(first) == 4:
                break
        stream.close()
        sid = first[0].id
        resumed = client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=30,
            stream=True,
            extra_headers={"Last-Event-ID": f"{sid}:4"},
        )
        text = "".join(c.choices[0].delta.content or "" for c in first + list(resumed) if c.choices)
        with http.stream("GET", f"{url}/v1/chat/completions", headers={"Last-Event-ID": sid}) as r:
            assert text == content(events(r))

        # the Messages API: event ids too, and the SDK reads the resumed events
        messages = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
        body = {"model": "tiny", "max_tokens": 30, "messages": [{"role": "user", "content": "hi"}]}
        with http.stream("POST", f"{url}/v1/messages", json={**body, "stream": True}) as r:
            msid = r.headers["rxstream-stream-id"]
            head = events(r, limit=3)
        assert [eid for eid, _ in head] == [f"{msid}:{n}" for n in (1, 2, 3)]
        later = messages.messages.create(**body, stream=True, extra_headers={"Last-Event-ID": f"{msid}:3"})
        kinds = [event.type for event in later]
        assert kinds[-1] == "message_stop" and "message_start" not in kinds

        # the Responses API
        with http.stream(
            "POST",
            f"{url}/v1/responses",
            json={"model": "tiny", "input": "hi", "max_output_tokens": 20, "stream": True},
        ) as r:
            rsid = r.headers["rxstream-stream-id"]
            head = events(r, limit=2)
        assert rsid.startswith("resp_") and head[0][0] == f"{rsid}:1"
        later = client.responses.create(
            model="tiny",
            input="hi",
            max_output_tokens=20,
            stream=True,
            extra_headers={"Last-Event-ID": f"{rsid}:2"},
        )
        assert [e.type for e in later][-1] == "response.incomplete"  # its budget was reached


def test_a_reconnect_storm_loses_and_duplicates_nothing(model: OnnxModel) -> None:
    """16 streams, each dropped after a random number of events and resumed (by POST or GET,
    at once or a little later) until its end: hundreds of drops. Each client's events, joined,
    are exactly what a follower that never dropped saw; then nothing is left behind."""
    import asyncio
    import random

    from .test_server_metrics import scrape, value

    rng = random.Random(7)
    streams = 16
    drops = 0

    async def read(response: httpx.Response, limit: int | None) -> list[tuple[str | None, str]]:
        out: list[tuple[str | None, str]] = []
        eid: str | None = None
        lines: list[str] = []
        async for line in response.aiter_lines():
            if line.startswith(":"):
                continue
            if line == "":
                if lines:
                    out.append((eid, "\n".join(lines)))
                    eid, lines = None, []
                    if limit is not None and len(out) >= limit:
                        break
            elif line.startswith("id: "):
                eid = line[4:]
            else:
                lines.append(line)
        return out

    async def client(http: httpx.AsyncClient, url: str, i: int) -> tuple[list[Any], list[Any]]:
        nonlocal drops
        body = {**CHAT, "max_tokens": 120, "messages": [{"role": "user", "content": f"storm {i}"}]}
        got: list[tuple[str | None, str]] = []
        async with http.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
            sid = r.headers["rxstream-stream-id"]
            got += await read(r, rng.randint(1, 5))
        follower = asyncio.ensure_future(_follow(http, url, sid, read))
        while got[-1][1] != "data: [DONE]":
            drops += 1
            if rng.random() < 0.3:
                await asyncio.sleep(rng.uniform(0, 0.05))  # away for a moment: it goes on
            cursor = {"Last-Event-ID": got[-1][0] or ""}
            if rng.random() < 0.5:
                request = http.stream("POST", f"{url}/v1/chat/completions", json=body, headers=cursor)
            else:
                request = http.stream("GET", f"{url}/v1/chat/completions", headers=cursor)
            async with request as r:
                assert r.status_code == 200, await r.aread()
                got += await read(r, rng.randint(1, 5))
        return got, await follower

    async def main(url: str) -> list[tuple[list[Any], list[Any]]]:
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
        async with httpx.AsyncClient(timeout=30, limits=limits) as http:
            return await asyncio.gather(*(client(http, url, i) for i in range(streams)))

    with serving(model, delay=0.002, resume_grace=1.0, max_concurrency=8) as (url, slow, app):
        before = scrape(url)
        results = asyncio.run(asyncio.wait_for(main(url), 120))
        for got, whole in results:
            assert got == whole  # nothing lost, nothing twice, in order
            sid = whole[0][0].rpartition(":")[0]
            assert [eid for eid, _ in whole] == [f"{sid}:{n}" for n in range(1, len(whole) + 1)]
            assert json.loads(whole[-2][1][6:])["choices"][0]["finish_reason"] == "length"
        assert drops >= 200
        assert slow.started == streams and wait_for(lambda: slow.ended == streams)
        after = scrape(url)
        resumes = value(after, "rxstream:stream_resumes_total", model_name="tiny") - value(
            before, "rxstream:stream_resumes_total", model_name="tiny"
        )
        assert resumes == drops + streams  # every reconnect, and each stream's follower
        hub = app.state.replay
        assert wait_for(lambda: not hub.streams, timeout=10)  # forgotten after the grace period
        assert hub.total == 0
        assert app.state.stats.snapshot()["active"] == 0


async def _follow(http: httpx.AsyncClient, url: str, sid: str, read: Any) -> list[Any]:
    async with http.stream("GET", f"{url}/v1/chat/completions", headers={"Last-Event-ID": sid}) as r:
        return list(await read(r, None))
