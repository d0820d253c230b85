"""Running the app: on a background thread (tests, notebooks) or as ``rxstream serve``."""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import uvicorn

from .._generative_model import GenerativeModel
from .._sampling_params import SamplingParams
from ..chat import check_reasoning_format, renders_tools
from ..face import describe_sampling, load_model, model_defaults
from ..face._upstream import describe as describe_upstream
from ._app import create_app
from ._connections import raise_open_files_limit, uvicorn_config
from ._hosts import parse_allowed_hosts
from ._limits import ServerLimits

__all__ = ["ServeError", "listen", "run_in_thread", "serve", "url_of"]


@contextlib.contextmanager
def run_in_thread(
    app: Any, *, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"
) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a background thread; yield its base URL (``http://host:port``).

    ``port=0`` picks a free port. The server is shut down (and the thread joined) on exit.
    """
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    actual_port = sock.getsockname()[1]
    limits = getattr(getattr(app, "state", None), "limits", None)
    config = uvicorn_config(
        app,
        limits=limits if isinstance(limits, ServerLimits) else ServerLimits(),
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="rxstream-uvicorn", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("run_in_thread: uvicorn did not start")
            time.sleep(0.01)
        yield f"http://{host}:{actual_port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


class _Server(uvicorn.Server):
    """uvicorn's server, ending every generation as soon as a shutdown signal arrives (so open
    streams finish at once, instead of generating on until the graceful-shutdown timeout)."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: Any) -> None:
        self._on_exit()
        super().handle_exit(sig, frame)


def describe_defaults(model: GenerativeModel) -> str:
    """The model's sampling defaults in words, for the start-up log."""
    text = describe_sampling(model_defaults(model))
    return f"{text} (the model's generation_config.json, else greedy; a request's own fields win)"


def describe_batching(model: Any, asked: bool) -> str:
    """How the generations run, in words, for the start-up log."""
    config = getattr(model, "batching", None)
    if config is None:
        why = "--batching off" if not asked else "this model's graph cannot batch rows of different lengths"
        return f"batching: off ({why}); one generation loop per request"
    return (
        f"batching: on (up to {config.max_batch} requests per decode step, "
        f"{config.kv_budget(getattr(model, 'max_length', 0))} KV "
        f"positions, prefill chunks of {config.prefill_chunk} tokens, prefix sharing "
        f"{'on' if config.share_prefix else 'off'}"
        + (
            f", {config.prefix_cache_bytes >> 20} MB for ended requests' prefixes"
            if config.share_prefix
            else ""
        )
        + _describe_drafts(model)
        + ")"
    )


def _describe_drafts(model: Any) -> str:
    stats = model.batch_stats() if hasattr(model, "batch_stats") else None
    drafts = stats.get("draft_tokens") if isinstance(stats, dict) else None
    if not isinstance(drafts, int):
        return ""
    floats = ", several-row passes on float weights" if stats and stats.get("float_graph") else ""
    return f", prompt lookup {'up to ' + str(drafts) + ' ids' if drafts else 'off'}{floats}"


def _batch_config(
    batching: bool,
    limits: ServerLimits,
    max_kv_tokens: int | None,
    prefill_chunk: int,
    share_prefix: bool,
    prefix_cache_bytes: int,
    draft_tokens: int | None = None,
) -> Any:
    """The model's :class:`~rxstream.backends.BatchConfig` (False when batching is off)."""
    if not batching:
        return False
    from rxstream.backends import BatchConfig

    for option, value in (("--kv-tokens", max_kv_tokens), ("--prefill-chunk", prefill_chunk)):
        if value is None and option == "--kv-tokens":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ServeError(f"{option} must be a positive int, got {value!r}")
    if (
        isinstance(prefix_cache_bytes, bool)
        or not isinstance(prefix_cache_bytes, int)
        or prefix_cache_bytes < 0
    ):
        raise ServeError(f"--prefix-cache-mb must be 0 or more, got {prefix_cache_bytes!r} bytes")
    try:
        return BatchConfig(
            max_batch=limits.max_concurrency,
            max_kv_tokens=max_kv_tokens,
            prefill_chunk=prefill_chunk,
            share_prefix=bool(share_prefix),
            prefix_cache_bytes=prefix_cache_bytes,
            draft_tokens=draft_tokens,
        )
    except (TypeError, ValueError) as exc:
        raise ServeError(str(exc).replace("BatchConfig: draft_tokens", "--draft-tokens")) from None


class ServeError(RuntimeError):
    """``rxstream serve`` cannot start (the message is one line for the user)."""


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (IPv4 or IPv6; ``port`` 0 picks a free one).

    Raises:
        ServeError: the address cannot be used (in use, not this machine's, bad name).
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ServeError(f"--port must be between 0 and 65535, got {port!r}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
    except (OSError, IndexError) as exc:
        raise ServeError(f"cannot listen on {host}:{port}: {exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        raise ServeError(f"cannot listen on {host}:{port}: {reason}") from None
    sock.setblocking(False)
    return sock


def url_of(sock: socket.socket) -> str:
    """The base URL of a listening socket (``http://host:port``)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _load_model(
    model: str | None,
    provider: str,
    quantization: str,
    batching: Any,
    upstream: Sequence[str] = (),
    upstream_mode: str = "ids",
    upstream_endpoint: str = "completions",
) -> tuple[Any, str]:
    # The event loop and the clients share the cores with the model. With batching, one step runs
    # at a time: its workers spin within the step and stop when it returns ("step"), so the work
    # between steps has the cores (measured: 1.29x the blocking workers' tokens/s for one client,
    # 1.18x for 16). Without batching, concurrent loops run passes side by side, and workers that
    # block give more total throughput.
    try:
        loaded = load_model(
            model,
            provider,
            quantization,
            spinning="step" if batching is not False else False,
            batching=batching,
            upstream=upstream,
            upstream_mode=upstream_mode,
            upstream_endpoint=upstream_endpoint,
        )
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        raise ServeError(str(exc)) from None
    prepare = getattr(loaded, "prepare_batches", None)
    if callable(prepare):  # an int4 build's float graph for batches: opened now, not mid-request
        prepare()
    # a gateway is named as its engines name their model
    name = getattr(loaded, "engine_model", None) if upstream else None
    return loaded, name or Path(model or "smollm2").name or "model"


def _log_start(loaded: Any, app: Any, name: str, url: str, how_run: str, reasoning_format: str) -> None:
    """The start-up lines: sampling defaults, how generations run, reasoning format, address."""
    print(f"rxstream serve: sampling defaults: {describe_defaults(loaded)}", file=sys.stderr)
    print(f"rxstream serve: {how_run}", file=sys.stderr)
    fmt = app.state.reasoning_format
    how = "detected from the chat template" if reasoning_format == "auto" else "--reasoning-format"
    print(
        f"rxstream serve: reasoning format: {fmt or 'none'} ({how}); tools: "
        + (
            "the chat template's own"
            if renders_tools(getattr(loaded, "chat_template", None))
            else "fallback prompt"
        ),
        file=sys.stderr,
    )
    print(
        f"rxstream serve: {name} on {getattr(loaded, 'provider', '?')}, running on {url}/ "
        f"(chat page: {url}/, OpenAI API: {url}/v1)",
        file=sys.stderr,
        flush=True,
    )


def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    model: str | None = "smollm2",
    provider: str = "auto",
    quantization: str = "fp32",
    model_name: str | None = None,
    limits: ServerLimits | None = None,
    allowed_hosts: Sequence[str] = (),
    log_level: str = "info",
    batching: bool = True,
    max_kv_tokens: int | None = None,
    prefill_chunk: int = 256,
    share_prefix: bool = True,
    prefix_cache_bytes: int = 128 << 20,
    draft_tokens: int | None = None,
    reasoning_format: str = "auto",
    sampling: Mapping[str, Any] | None = None,
    upstream: Sequence[str] = (),
    upstream_mode: str = "ids",
    upstream_endpoint: str = "completions",
) -> None:
    """Load ``model`` (a model directory or a known name) and serve it until interrupted.

    ``upstream`` (one or more engine URLs): serve those engines instead, through a
    :class:`~rxstream.backends.GatewayModel` (token ids both ways; ``model`` is the directory of
    the tokenizer and chat template, None for the engines' own model; the engines batch);
    ``upstream_mode="text"`` for engines that give text only (``rxstream.server._text_mode``);
    ``upstream_endpoint="generate"`` sends ids to vLLM's tokens-only endpoint.

    ``batching`` (default): the requests' generations share one batch on the model (continuous
    batching: up to ``limits.max_concurrency`` rows, ``max_kv_tokens`` KV-cache positions (None:
    65536, or the model's context when larger),
    prompts prefilled ``prefill_chunk`` tokens at a time, a prompt's prefix that another row
    holds copied when ``share_prefix``, up to ``prefix_cache_bytes`` of ended requests' KV
    positions kept for the prompts that continue them, and up to ``draft_tokens`` prompt-lookup
    ids read with a lone request's next id (None: the model's default); see
    :class:`~rxstream.backends.BatchConfig`); ``batching=False``: one generation loop per request
    on its own thread (the mode before batching).

    The address is taken before the model loads, so a port in use fails at once. On Ctrl-C
    (SIGINT) or SIGTERM open streams get at most two seconds to end; then their generations are
    cancelled and the server exits (uvicorn then re-raises the signal: a ``KeyboardInterrupt``
    for SIGINT).

    ``sampling`` (field name -> value, as :func:`rxstream.face.sampling_from_args` reads the
    options) overrides the model's own sampling defaults: what a request gets for the fields it
    leaves out.

    Raises:
        ServeError: the address, the model or an option is unusable (a one-line message).
    """
    limits = limits if limits is not None else ServerLimits()
    if upstream_mode != "ids" and not upstream:
        raise ServeError(f"--upstream-mode {upstream_mode} is for --upstream engines; none was given")
    try:
        allowed = parse_allowed_hosts(allowed_hosts)
        check_reasoning_format(reasoning_format)
        overrides = SamplingParams.requested(dict(sampling or {}))
    except ValueError as exc:
        raise ServeError(str(exc)) from None
    batch_config = _batch_config(
        batching, limits, max_kv_tokens, prefill_chunk, share_prefix, prefix_cache_bytes, draft_tokens
    )
    sock = listen(host, port)
    try:
        loaded, default_name = _load_model(
            model, provider, quantization, batch_config, upstream, upstream_mode, upstream_endpoint
        )
        name = model_name or default_name
        if sampling:
            given = {k: getattr(overrides, k) for k in sampling}
            loaded.default_sampling = model_defaults(loaded).replace(**given)
        context = getattr(loaded, "context_length", None)
        if (
            batch_config
            and isinstance(context, int)
            and max_kv_tokens is not None
            and max_kv_tokens < context
        ):
            raise ServeError(
                f"--kv-tokens must hold one request of the whole context ({context} tokens), "
                f"got {max_kv_tokens}"
            )
        app = create_app(
            loaded, model_name=name, limits=limits, allowed_hosts=allowed, reasoning_format=reasoning_format
        )
        raise_open_files_limit(limits.max_connections)
        config = uvicorn_config(
            app, limits=limits, log_level=log_level, lifespan="on", timeout_graceful_shutdown=2
        )
        url = url_of(sock)
        how_run = describe_upstream(loaded) if upstream else describe_batching(loaded, batching)
        _log_start(loaded, app, name, url, how_run, reasoning_format)
        _Server(config, app.state.begin_shutdown).run(sockets=[sock])
    finally:
        sock.close()
