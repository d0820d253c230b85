"""An OpenAI-compatible streaming server over a local model (``rxstream serve``).

:func:`create_app` builds a Starlette ASGI application; :func:`serve` loads a model and runs it
on uvicorn; :func:`run_in_thread` runs an app on a background thread (tests, notebooks).

Endpoints:

* ``GET /`` -- a small chat page (``rxstream/server/static/chat.html``) that streams answers live.
  Query parameters: ``q`` (a first question), ``autorun=1`` (send it on load), ``max_tokens``,
  ``temperature``.
* ``POST /v1/completions`` and ``POST /v1/chat/completions`` -- ``stream`` true (server-sent
  events, ending with ``data: [DONE]``) or false (one JSON body).
* ``GET /v1/models`` -- the one served model.
* ``GET /health`` -- ``{"status": "ok", ...}`` with generation counters.

Each request's text is made by the rxstream operators: the model's ids are detokenized, cut at the
request's ``stop`` strings (``stop(...)``, matched on the generated text as OpenAI does), then
rewritten by the rxstream extension field ``"rxstream": {"replace": {"old": "new", ...}}`` (also
accepted: a list of ``[old, new]`` pairs; applied after ``stop``, leftmost-longest, replacement
text never rescanned). With the official client pass it as
``extra_body={"rxstream": {"replace": {...}}}``.

Regular expressions (SEMANTICS §7) come in the same extension::

    "rxstream": {
        "stop_regex": ["\\\\n\\\\s*(?:User|Human):", {"regex": "</?answer>", "max_hold": 32}],
        "replace": [["<NL>", "\\n"], {"regex": "sk-[A-Za-z0-9]{20,}", "replacement": "[KEY]"}]
    }

``stop_regex`` rules stop the stream beside the ``stop`` strings (one leftmost-longest order:
``stop`` strings first, then ``stop_regex`` in order); ``stop_reason`` is then the text the
regex matched. A ``replace`` list may mix ``[old, new]`` pairs and ``{"regex", "replacement"}``
objects (the replacement may use ``\\1``, ``\\g<name>``). Flags go inline (``(?i)``).
:class:`ServerLimits` bounds them: ``max_regex_rules`` (16, both lists together),
``max_regex_chars`` (256 per pattern) and ``max_regex_hold`` (256: the largest and the default
``max_hold``, the most text one rule may hold back). An invalid pattern, a construct the
streaming engine does not support (back-references, look-arounds, ...), a pattern that can
match the empty string, or one over a limit is a 400 whose ``param`` names the rule
(``rxstream.stop_regex[1]``).

``finish_reason`` is ``"stop"`` (end of sequence, or a stop string: then ``stop_reason`` names it,
as vLLM does) or ``"length"`` (the ``max_tokens`` budget).

Log-probabilities, in OpenAI's shapes: chat's ``logprobs: true`` with ``top_logprobs`` (0 to 20)
gives ``choices[].logprobs.content[]`` (``token``, ``logprob``, ``bytes``, ``top_logprobs[]``);
completions' ``logprobs`` (0 to 20) gives ``tokens``, ``token_logprobs``, ``top_logprobs`` (one
dict per token, the sampled token always in it) and ``text_offset``. The numbers are the model's
own distribution (log-softmax of the raw logits, before temperature, top-k/top-p and penalties, as
vLLM reports by default). ``bytes`` are each token's own UTF-8 bytes (a character split across
tokens is rebuilt by joining them); ``token`` is those bytes as text, a partial character escaped
as ``\\xNN``; ``-inf`` is sent as -9999.0. There is one entry per generated token whose text the
response holds whole: a token that a stop string cuts, even in part, has none (its text before the
cut is in the response), nor has one that holds the first bytes of a character the stop cuts;
streamed, a token that ends inside a character comes with the token that completes it. The served
model must take ``generate(..., logprobs=k)`` (see :class:`~rxstream.GenerativeModel`), else such a
request is a 400. A chat routed into reasoning or tool calls (below) has the answer's tokens in
``logprobs.content`` (after its ``stop`` and ``replace``) and the reasoning's in
``logprobs.reasoning_content`` (same entries; an extension named after the message's
``reasoning_content``, as vLLM spells it). Delimiter and tool-call tokens have no entries (OpenAI
gives tool calls none), nor does a token whose text no channel holds whole (one that runs into a
delimiter or into the whitespace dropped after a region), so each list's ``bytes`` rebuild its text
(up to a stop's cut). Streamed, every chunk but the last carries a ``logprobs`` object
(``{"content": [], "refusal": null}`` where it has no entries, the role chunk included, as OpenAI's
stream).

``n`` (up to ``ServerLimits.max_n``) runs n generations of the prompt (choice ``i`` samples with
``seed + i``); each choice has its own ``index``, stop and ``finish_reason``. Streamed, every
chunk carries one choice, interleaved as the text comes. ``best_of`` may only equal ``n``.
While a stream is silent (waiting for a generation slot, reading the prompt) a ``: keep-alive``
comment goes out every ``ServerLimits.keepalive_interval`` seconds (15), so proxies keep it open.

A failure during a stream is sent as an
``{"error": {...}}`` event (the official client raises ``APIError``).

Request limits (:class:`ServerLimits`, all enforced with HTTP 400 and an OpenAI-style error body
naming the parameter): body size, prompt size in characters and tokens, ``max_tokens``, prompt plus
``max_tokens`` within the model's context, number and length of stop strings, number and length of
replace rules, number of messages, types and ranges of sampling parameters, ``n`` and
``logprobs``; ``echo``/``suffix`` are not supported.

Reasoning and tool calls (chat completions; :mod:`rxstream.chat` plans them, ``_tools`` reads the
request's tool fields): the
output is routed by the model's reasoning format (``create_app(reasoning_format="auto")``: from
the chat template) into ``reasoning_content``, ``content`` and ``tool_calls``; ``stop`` and
``replace`` apply to the answer only. ``tools``, ``tool_choice`` (``auto``, ``none``,
``required``, a named function) and ``parallel_tool_calls`` are implemented; tools go to a chat
template that renders them, else into a fallback system prompt (``<tool_call>`` calls); a
forced call is opened in the prompt. A call the grammar makes valid (forced, ``strict``) streams
its arguments as OpenAI deltas; any other call is held until its arguments are complete and
valid against the tool's schema, then sent whole (SEMANTICS §9, whole calls); a call that cannot
be valid never reaches the client as a call: it is left out of ``message.tool_calls`` and
reported in ``choices[0].rxstream.invalid_tool_calls``. ``finish_reason`` is ``tool_calls`` when
a valid call was made.

Concurrency: generations run on the model's worker threads, never on the event loop (tokenizing
and chat templates run in ``asyncio.to_thread``). At most ``ServerLimits.max_concurrency``
generations run at once (default 16); further requests wait in a queue (at most
``ServerLimits.max_queued``, default 256; beyond that the answer is 503). A model that batches
(an :class:`~rxstream.backends.OnnxModel` with ``batching``, ``rxstream serve --batching on``)
runs them all in one decode step per token (continuous batching); a response that falls behind
its reader pauses its own generation there, never the batch. Other models (and
``create_app(..., batching=False)``) run one generation loop per request on the app's thread
pool. ``/health`` reports the batch (rows, slots, KV positions and bytes). A client that
disconnects -- while waiting or while streaming -- has its subscription disposed, which cancels
the generation within one token.

Guards (see "Exposing the server safely" in the README): POST bodies must be
``application/json``; the ``Host`` header must be an IP address, ``localhost`` or an allowed name
(DNS rebinding); connections are capped and timed out (:class:`ServerLimits`).

The package's modules, one concern each: ``_app`` (the application and its routes),
``_handlers`` (the endpoints, over one ``ServerState``), ``_body``/``_requests`` (reading and
validating a request, one parser per field; ``_tools`` for the tool fields), ``_prompt`` (prompt
ids and budget, on :func:`rxstream.chat.plan_chat`),
``_generation`` (one request's pipeline and slot), ``_responses``/``_sse`` (the OpenAI response
shapes and server-sent events), ``_stats``, ``_limits``, ``_errors``, ``_hosts`` (the Host
guard), ``_connections`` (uvicorn protocol with timeouts), ``_run`` (uvicorn, threads) and
``_args`` (the command-line options).
"""

from rxstream._extras import require_extra

require_extra("rxstream.server", "serve", ("starlette", "uvicorn"))

from ._app import create_app
from ._args import add_serve_arguments, add_serve_parser, main, serve_from_args
from ._errors import RequestError
from ._generation import build_text_stream
from ._limits import ServerLimits
from ._requests import GenerationRequest
from ._run import run_in_thread, serve
from ._stats import ServerStats

__all__ = [
    "GenerationRequest",
    "RequestError",
    "ServerLimits",
    "ServerStats",
    "add_serve_arguments",
    "add_serve_parser",
    "build_text_stream",
    "create_app",
    "main",
    "run_in_thread",
    "serve",
    "serve_from_args",
]
