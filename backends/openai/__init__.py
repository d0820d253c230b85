"""A backend that streams text from any OpenAI-compatible HTTP endpoint.

:class:`OpenAIBackend` posts to ``{base_url}/completions`` or ``{base_url}/chat/completions``
with ``"stream": true`` and turns the server-sent events into an ``Observable[str]`` of text
deltas (or of :class:`~rxstream.Piece` items carrying token ids and log-probabilities when the
server returns them), so the same text operators (``stop``, ``replace``, ...) apply to a serving
fleet (vLLM, TGI, llama.cpp server, ``rxstream serve``) as to a local model.

* Each subscription makes one HTTP request on its own worker thread (or on a given scheduler).
* Disposing the subscription closes the HTTP stream at once (the socket is shut down, so a read
  that is waiting for the next event returns), which makes the server cancel the generation. This
  holds from the moment the connection is made, also while waiting for the response headers; only
  a request sent on a reused keep-alive connection cannot be interrupted before its headers arrive
  (its worker then ends when they do, or after ``timeout``).
* Network errors, HTTP error statuses, error events and malformed events go to ``on_error`` as
  :class:`OpenAIBackendError`, whose message names the URL and the offending event text.
* ``on_finish`` receives the server's ``finish_reason`` as a :class:`~rxstream.Finish`: ``"length"``
  -> ``LENGTH``; ``"stop"`` with a ``stop_reason`` (vLLM and ``rxstream serve`` send the matched stop
  string or token id) -> ``STOP``; ``"stop"`` without one, any other reason, or a stream that ends
  without a reason -> ``EOS``. Disposal reports ``CANCELLED``; failures ``ERROR``.

Token ids and log-probabilities (``pieces=True``): ids are read from a choice's ``token_ids``
(vLLM's ``return_token_ids``), from each logprob entry's ``id`` (llama.cpp's server), or from
tokens spelled ``"token_id:N"`` (vLLM's ``return_tokens_as_token_ids``); log-probabilities and
alternatives from ``logprobs.content[]`` (chat; llama.cpp for both endpoints) or
``logprobs.tokens``/``token_logprobs``/``top_logprobs`` (completions). A server that names tokens
only by text and bytes (OpenAI, vLLM) gives pieces whose ``tokens`` hold each token's text, with
its logprob and alternatives; given ``tokenizer=`` (the served model's), each token's bytes
(``bytes``, or its text; ``bytes:\\xNN`` spells raw bytes) are mapped to its id, and the pieces
carry ids. Ask the server for them with the request parameters it understands (``logprobs=1``,
``logprobs=True, top_logprobs=5``). Log-probabilities that cannot be paired one-to-one with the
tokens are dropped (``Piece.logprobs`` is then None).

Three chat APIs (``OpenAIBackend(url, api=...)``): ``"chat"`` (Chat Completions), ``"responses"``
(OpenAI's Responses API: ``response.output_text.delta``, ``response.reasoning_text.delta`` /
``response.reasoning_summary_text.delta``, ``function_call`` items and their
``response.function_call_arguments.delta`` events, ``response.completed`` / ``incomplete`` /
``failed``) and ``"messages"`` (Anthropic's Messages API: ``text_delta``, ``thinking_delta``,
``tool_use`` blocks and their ``input_json_delta`` events, ``message_delta.stop_reason``) give the
same outputs: the answer's text (``chat(...)``), or with ``chat(..., channels=True)`` the reasoning
and answer as ``Segment`` chunks and the tool calls as ``ToolCallStart`` / ``ToolCallDelta`` /
``ToolCallEnd`` events (what ``route`` and ``tool_calls`` give for a local model); the finish
(``max_output_tokens`` and ``max_tokens`` are ``LENGTH``, a ``stop_sequence`` is ``STOP``, the
rest ``EOS``) and, with ``usage=``, the server's token counts as a :class:`RemoteUsage`. Error
events and HTTP errors in each API's own shape become a one-line :class:`OpenAIBackendError`.

Needs the ``openai`` extra (``pip install 'rxstream[openai]'``: httpx); importing this package
without it raises a one-line :class:`~rxstream._extras.MissingExtraError`.
"""

from rxstream._extras import require_extra

require_extra("rxstream.backends.openai", "openai")

from ._backend import OpenAIBackend
from ._errors import OpenAIBackendError
from ._outputs import RemoteUsage

__all__ = ["OpenAIBackend", "OpenAIBackendError", "RemoteUsage"]
