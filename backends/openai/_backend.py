"""The backend object (:class:`OpenAIBackend`): a connection pool, the completions endpoint and
a chat in one of three APIs (Chat Completions, Responses, Messages)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Literal, overload

import httpx
import reactivex
from reactivex import abc
from reactivex.disposable import Disposable

from rxstream._finish import FinishCallback
from rxstream._piece import Piece
from rxstream.aio import scheduler_loop
from rxstream.channels import Segment, ToolCallEvent
from rxstream.detok import TokenBytes

from ._chat_reader import ChatReader
from ._messages import MessagesReader
from ._outputs import Outputs, RemoteUsage
from ._request import API, APIS, chat_request, headers_for
from ._responses import ResponsesReader
from ._stream import PAUSE, Reader, StreamRequest
from ._wire import WirePool, wire_target

__all__ = ["OpenAIBackend"]


class OpenAIBackend:
    """Streams completions from an OpenAI-compatible server (``base_url`` ends in ``/v1``).

    Args:
        base_url: e.g. ``"http://127.0.0.1:8000/v1"``.
        api: the API :meth:`chat` speaks: ``"chat"`` (the default: ``POST /chat/completions``),
            ``"responses"`` (OpenAI's Responses API, ``POST /responses``) or ``"messages"``
            (Anthropic's Messages API, ``POST /messages``, for ``https://api.anthropic.com/v1`` and
            the servers that speak it). The items, the finish and the usage are the same for all.
        api_key: sent as ``Authorization: Bearer <api_key>`` when given (``x-api-key`` with
            ``api="messages"``, which also sends ``anthropic-version: 2023-06-01``; a header of
            that name in ``headers`` replaces it).
        model: the ``model`` field of each request (a request parameter ``model=`` overrides it);
            None (the default) sends none, which servers of one model (``rxstream serve``, vLLM,
            llama.cpp) answer with that model; OpenAI itself needs one.
        timeout: seconds for connecting and between two reads of the stream.
        headers: extra HTTP headers.
        transport: an httpx transport (for tests or custom networking).
        tokenizer: the served model's tokenizer (anything
            :func:`~rxstream.operators.detokenize` accepts), optional. With ``pieces=True`` it
            turns the tokens a server names only by their text or bytes (OpenAI, vLLM without
            ``return_tokens_as_token_ids``) into ids.
        max_connections: the most connections open at once (one per open stream; default 1024).

    The backend holds one ``httpx.Client`` (a connection pool); close it with :meth:`close` or
    use the backend as a context manager.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api: API = "chat",
        api_key: str | None = None,
        model: str | None = None,
        timeout: float = 60.0,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        tokenizer: Any = None,
        max_connections: int = 1024,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"OpenAIBackend: base_url must be an http(s) URL, got {base_url!r}")
        if model is not None and (not isinstance(model, str) or not model):
            raise ValueError(f"OpenAIBackend: model must be a non-empty str, got {model!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ValueError(f"OpenAIBackend: timeout must be a positive number, got {timeout!r}")
        if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
            raise ValueError(f"OpenAIBackend: max_connections must be an int >= 1, got {max_connections!r}")
        if api not in APIS:
            raise ValueError(f"OpenAIBackend: api must be one of {', '.join(APIS)}, got {api!r}")
        self.base_url = base_url.rstrip("/")
        self.api: API = api
        self.model = model
        all_headers = {"Accept": "text/event-stream", **headers_for(api, api_key)}
        all_headers.update(headers or {})
        # one connection per open stream: httpx's default of 100 would make stream 101 wait for a
        # whole generation to end (a gateway in front of an engine holds one per client)
        limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=min(64, max_connections)
        )
        self._client = httpx.Client(
            headers=all_headers, timeout=httpx.Timeout(timeout), transport=transport, limits=limits
        )
        self._client_options: dict[str, Any] = {
            "headers": all_headers,
            "timeout": httpx.Timeout(timeout),
            "limits": limits,
            # a mock transport answers both kinds of client; another sync transport has no async side
            "transport": transport if isinstance(transport, httpx.AsyncBaseTransport) else None,
        }
        self._async_clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}
        self._wire_pools: dict[asyncio.AbstractEventLoop, WirePool] = {}
        self._wire_headers = all_headers
        self._timeout = float(timeout)
        # httpx reads the proxy variables for the client: the plain path must not bypass them
        self._wire_ok = transport is None and not any(
            os.environ.get(name) for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
        )
        self._vocab = None if tokenizer is None else TokenBytes(tokenizer)

    def _model_field(self) -> dict[str, str]:
        return {} if self.model is None else {"model": self.model}

    def _on_loop(
        self, request: StreamRequest, loop: asyncio.AbstractEventLoop, ready: Callable[[], bool] | None
    ) -> Coroutine[Any, Any, None]:
        """The coroutine that runs ``request`` on ``loop``: over the loop's plain-HTTP pool for
        an ``http://`` engine (no transport or proxy given), else with the loop's httpx client."""
        target = wire_target(request.url) if self._wire_ok else None
        if target is not None:
            pool = self._wire_pools.get(loop)
            if pool is None:
                pool = self._wire_pools[loop] = WirePool(loop, self._wire_headers, self._timeout, PAUSE)
            return request.arun_wire(pool, target, ready)
        return request.arun(self._async_client(loop), ready)

    def _async_client(self, loop: asyncio.AbstractEventLoop) -> httpx.AsyncClient:
        """The connection pool of requests that run on ``loop`` (made on first use, on the loop)."""
        client = self._async_clients.get(loop)
        if client is None:
            client = self._async_clients[loop] = httpx.AsyncClient(**self._client_options)
        return client

    def close(self) -> None:
        """Close the connection pools (an event loop's, on that loop when it still runs)."""
        self._client.close()
        pools, self._wire_pools = self._wire_pools, {}
        for loop, pool in pools.items():
            if not loop.is_closed():
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(pool.close)
        clients, self._async_clients = self._async_clients, {}
        for loop, client in clients.items():
            if loop.is_closed():
                continue
            with contextlib.suppress(RuntimeError):
                asyncio.run_coroutine_threadsafe(client.aclose(), loop)

    def __enter__(self) -> OpenAIBackend:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @overload
    def completions(
        self,
        prompt: str | Sequence[int],
        *,
        pieces: Literal[False] = False,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        ready: Callable[[], bool] | None = None,
        usage: Callable[[RemoteUsage], None] | None = None,
        **params: Any,
    ) -> reactivex.Observable[str]: ...

    @overload
    def completions(
        self,
        prompt: str | Sequence[int],
        *,
        pieces: Literal[True],
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        ready: Callable[[], bool] | None = None,
        usage: Callable[[RemoteUsage], None] | None = None,
        **params: Any,
    ) -> reactivex.Observable[Piece]: ...

    def completions(
        self,
        prompt: str | Sequence[int],
        *,
        pieces: bool = False,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        ready: Callable[[], bool] | None = None,
        usage: Callable[[RemoteUsage], None] | None = None,
        **params: Any,
    ) -> reactivex.Observable[str] | reactivex.Observable[Piece]:
        """Stream ``POST /completions`` for ``prompt`` (text or token ids).

        ``params`` are added to the request body (``max_tokens``, ``temperature``, ``stop``,
        ``seed``, server extensions such as ``rxstream={"replace": {...}}``). Items are text
        deltas, or :class:`~rxstream.Piece` items with ``pieces=True``.

        ``scheduler``: where the request runs; an asyncio scheduler (reactivex's
        ``AsyncIOScheduler``) makes it a task on that scheduler's loop, read with an async client
        of that loop (no thread per stream: what a server holding many streams wants); None: a
        thread of its own. ``ready`` (on a loop only): reading pauses while it returns False,
        and the engine waits on TCP's flow control (back-pressure from a slow reader). ``usage``
        gets the server's :class:`RemoteUsage` at the end (when it sends one:
        ``stream_options={"include_usage": True}``).
        """
        if self.api == "messages":
            raise ValueError(
                "OpenAIBackend.completions: the Messages API (api='messages') has no completions"
            )
        if not isinstance(prompt, str) and not (
            isinstance(prompt, Sequence) and all(isinstance(i, int) for i in prompt)
        ):
            raise TypeError(f"OpenAIBackend.completions: prompt must be a str or token ids, got {prompt!r}")
        body = {
            **self._model_field(),
            **params,
            "prompt": prompt if isinstance(prompt, str) else list(prompt),
        }
        body["stream"] = True
        vocab = self._vocab
        return self._stream(
            "/completions",
            body,
            lambda: ChatReader("completions", Outputs(False), pieces, vocab),
            on_finish,
            usage,
            scheduler,
            ready,
        )

    def generate_tokens(
        self,
        token_ids: Sequence[int],
        sampling_params: Mapping[str, Any],
        *,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        ready: Callable[[], bool] | None = None,
        usage: Callable[[RemoteUsage], None] | None = None,
    ) -> reactivex.Observable[Piece]:
        """Stream vLLM's tokens-only endpoint (``POST /inference/v1/generate``, beside ``/v1``):
        token ids in (``token_ids``), ``sampling_params`` as vLLM names them (``max_tokens``,
        ``temperature``, ``logprobs``...), and the generated ids out: :class:`~rxstream.Piece`
        items with no text (each chunk's ``token_ids``; with ``logprobs`` their log-probabilities,
        tokens spelled ``token_id:N``). ``scheduler``, ``ready`` and ``usage`` as for
        :meth:`completions` (the usage is asked with ``stream_options.include_usage``)."""
        if not isinstance(token_ids, Sequence) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in token_ids
        ):
            raise TypeError(f"OpenAIBackend.generate_tokens: token_ids must be ints, got {token_ids!r}")
        body = {
            **self._model_field(),
            "token_ids": list(token_ids),
            "sampling_params": dict(sampling_params),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        vocab = self._vocab
        return self._stream(
            "/inference/v1/generate",
            body,
            lambda: ChatReader("completions", Outputs(False), True, vocab),
            on_finish,
            usage,
            scheduler,
            ready,
            root=True,
        )

    @overload
    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        pieces: Literal[False] = False,
        channels: Literal[False] = False,
        usage: Callable[[RemoteUsage], None] | None = None,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        **params: Any,
    ) -> reactivex.Observable[str]: ...

    @overload
    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        pieces: Literal[True],
        channels: Literal[False] = False,
        usage: Callable[[RemoteUsage], None] | None = None,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        **params: Any,
    ) -> reactivex.Observable[Piece]: ...

    @overload
    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        pieces: Literal[False] = False,
        channels: Literal[True],
        usage: Callable[[RemoteUsage], None] | None = None,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        **params: Any,
    ) -> reactivex.Observable[Segment | ToolCallEvent]: ...

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        pieces: bool = False,
        channels: bool = False,
        usage: Callable[[RemoteUsage], None] | None = None,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        **params: Any,
    ) -> (
        reactivex.Observable[str]
        | reactivex.Observable[Piece]
        | reactivex.Observable[Segment | ToolCallEvent]
    ):
        """Stream a chat for ``messages`` (``[{"role": ..., "content": ...}]``) in the
        backend's ``api``: ``POST /chat/completions``, ``/responses`` or ``/messages``.

        ``params`` are added to the request body as for :meth:`completions`, in Chat Completions
        terms where the APIs differ (see the package's documentation): leading system messages
        become ``instructions`` / ``system``, ``max_tokens`` becomes ``max_output_tokens``
        (Responses; the Messages API needs it), ``stop`` becomes ``stop_sequences`` (Messages),
        function ``tools`` and ``tool_choice`` take each API's form.

        Items are the answer's text deltas (reasoning and tool calls are left out), or
        :class:`~rxstream.Piece` items with ``pieces=True`` (Chat Completions and Responses). With
        ``channels=True`` they are what ``route`` and ``tool_calls`` give for a local model:
        ``Segment("reasoning" | "content", "chunk", text)`` and, per tool call,
        :class:`~rxstream.channels.ToolCallStart`, its :class:`~rxstream.channels.ToolCallDelta`
        items and a :class:`~rxstream.channels.ToolCallEnd` (or
        :class:`~rxstream.channels.ToolCallInvalid` when its arguments are not a JSON object).
        ``usage`` is called with a :class:`RemoteUsage` before the stream completes, when the
        server reported one (Chat Completions is asked for it with ``stream_options``).
        """
        if isinstance(messages, str | bytes) or not all(isinstance(m, Mapping) for m in messages):
            raise TypeError(f"OpenAIBackend.chat: messages must be a sequence of mappings, got {messages!r}")
        if pieces and (channels or self.api == "messages"):
            why = "channels=True" if channels else "the Messages API"
            raise ValueError(f"OpenAIBackend.chat: pieces=True does not go with {why}")
        if usage is not None and not callable(usage):
            raise TypeError(f"OpenAIBackend.chat: usage must be callable, got {type(usage).__name__}")
        path, body = chat_request(self.api, messages, params, self.model)
        if usage is not None and self.api == "chat" and "stream_options" not in params:
            body["stream_options"] = {"include_usage": True}
        api, vocab = self.api, self._vocab

        def make_reader() -> Reader:
            outputs = Outputs(channels)
            if api == "chat":
                return ChatReader("chat", outputs, pieces, vocab)
            if api == "responses":
                return ResponsesReader(outputs, pieces, vocab)
            return MessagesReader(outputs)

        return self._stream(path, body, make_reader, on_finish, usage, scheduler)

    def _stream(
        self,
        path: str,
        body: dict[str, Any],
        make_reader: Callable[[], Reader],
        on_finish: FinishCallback | None,
        on_usage: Callable[[RemoteUsage], None] | None,
        scheduler: abc.SchedulerBase | None,
        ready: Callable[[], bool] | None = None,
        root: bool = False,
    ) -> reactivex.Observable[Any]:
        # ``root``: a path beside the API's base (``.../v1``), at the server's root
        url = (self.base_url.removesuffix("/v1") if root else self.base_url) + path
        streams = self.base_url + "/streams/"
        client = self._client
        loop = scheduler_loop(scheduler)

        def subscribe(observer: abc.ObserverBase[Any], _sched: abc.SchedulerBase | None = None) -> Disposable:
            reader = make_reader()
            request = StreamRequest(client, url, body, reader, observer, on_finish, on_usage, streams)
            if loop is not None:
                request.start_on(loop, lambda: self._on_loop(request, loop, ready))
            elif scheduler is not None:
                scheduler.schedule(lambda _s, _st: request.run())
            else:
                threading.Thread(target=request.run, name="rxstream-openai", daemon=True).start()
            return Disposable(request.dispose)

        return reactivex.create(subscribe)
