"""rxstream operators: each function returns an operator for ``Observable.pipe``.

Text operators (``Observable[str] -> Observable[str]``, or streams of :class:`~rxstream.Piece`
that carry their token ids):

- :func:`replace` -- find/replace many patterns at once, emitting as early as possible.
- :func:`hold_back` -- pass text through, holding only what could still become a pattern.
- :func:`redact` -- hide e-mail addresses, card numbers, API keys, IPs, phone numbers as they stream.
- :func:`stop` -- end the stream before the first stop string; cancel the generation upstream.
- :func:`deltas` / :func:`snapshots` -- cumulative "whole text so far" items <-> deltas.

Rules may mix literal strings and regular expressions (:func:`rxstream.rx`; SEMANTICS §7).

Token-id operators (``Observable[int | Sequence[int]]``):

- :func:`stop_on_tokens` -- end the stream at a stop token id.
- :func:`max_tokens` -- a token budget.

Token ids to shown text in one operator: :func:`text_pipeline` -- ``detokenize -> stop -> replace``
with one :class:`~rxstream.Finish` report.

Channels (reasoning, answer, tool calls; SEMANTICS §8):

- :func:`route` -- split text or aligned pieces into :class:`~rxstream.channels.Segment` items.
- :func:`channels` -- one view per channel over one upstream subscription, so ``stop``,
  ``replace`` or ``redact`` can apply to one channel only.
- :func:`tool_calls` -- tool-call regions to tool-call events, checked against the tools'
  schemas as they stream.
- :func:`whole_tool_calls` -- each tool call held until it is valid, then sent whole (a
  client never receives part of an invalid call).
- :func:`chat_pipeline` -- the routed counterpart of :func:`text_pipeline`: a chat generation's
  ids to its answer and reasoning (:class:`~rxstream.chat.TextDelta`) and tool-call events, as a
  :class:`~rxstream.chat.ChatPlan` says (what ``rxstream serve`` and ``rxstream chat`` run).
- :func:`responses_events` -- a routed chat's items as OpenAI Responses API streaming events.
- :func:`messages_events` -- a chat's items as the Anthropic Messages API's streaming events
  (:class:`MessageEvents` is its engine; ``POST /v1/messages`` runs it).

Structured output: :func:`json_patches` -- a JSON answer or a call's arguments as settled values
(RFC 6902 ``add`` operations, :class:`JsonPatch`, whose ``apply`` applies one) as they stream.

Threading: :func:`serialize` -- make a multi-threaded source obey the Rx contract.

Resuming: :func:`checkpoint` -- a pipeline whose state a :class:`Checkpoint` snapshots
mid-stream (small JSON) and restores into a fresh pipeline, here or in another process.

Measuring: :func:`measure` -- a pipeline's stages timed by a :class:`Meter` as the stream runs
(time to first token, gaps, tokens in and characters out, how long each stage held text back).

Writing an operator: every operator here is a function that returns ``operator(name, make_sink)``
(``_sink.py``), whose sink (an ``OperatorSink`` subclass, one per subscription) handles the items;
the text operators share ``TextSink`` (``_text_sink.py``), which feeds an engine from
:mod:`rxstream.text` and keeps :class:`~rxstream.Piece` ids aligned.

Every public operator documents its timing with a marble diagram, checked by the test suite.

>>> import reactivex as rx
>>> from reactivex import operators as ops
>>> from rxstream.operators import replace, stop
>>> rx.from_iterable(["Hel", "lo<N", "L>wor", "ld<|end|>", "!"]).pipe(
...     replace({"<NL>": "\\n"}), stop("<|end|>"), ops.to_list()
... ).run()
['Hel', 'lo', '\\nwor', 'ld']
"""

from ._channels import Channels, channels
from ._chat import chat_pipeline
from ._checkpoint import Checkpoint, SnapshotError, checkpoint
from ._deltas import deltas
from ._detokenize import detokenize
from ._hold_back import hold_back
from ._json_patches import JsonPatch, json_patches
from ._max_tokens import max_tokens
from ._measure import Meter, measure
from ._messages_events import MessageEvents, messages_events
from ._meter_figures import MeterReport, OperatorFigures, StageFigures
from ._pipeline import text_pipeline
from ._redact import redact
from ._replace import replace
from ._responses_events import responses_events
from ._route import route
from ._serialize import serialize
from ._snapshots import snapshots
from ._stop import stop
from ._stop_on_tokens import stop_on_tokens
from ._tool_calls import tool_calls
from ._whole_calls import whole_tool_calls

__all__ = [
    "Channels",
    "Checkpoint",
    "JsonPatch",
    "MessageEvents",
    "Meter",
    "MeterReport",
    "OperatorFigures",
    "SnapshotError",
    "StageFigures",
    "channels",
    "chat_pipeline",
    "checkpoint",
    "deltas",
    "detokenize",
    "hold_back",
    "json_patches",
    "max_tokens",
    "measure",
    "messages_events",
    "redact",
    "replace",
    "responses_events",
    "route",
    "serialize",
    "snapshots",
    "stop",
    "stop_on_tokens",
    "text_pipeline",
    "tool_calls",
    "whole_tool_calls",
]
