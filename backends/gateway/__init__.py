"""A gateway to the engines people run at scale: :class:`GatewayModel`, a
:class:`rxstream.GenerativeModel` over one or more remote engines (vLLM, SGLang, ``rxstream
serve``) that exchanges **token ids** with them.

The prompt is rendered (chat template) and tokenized locally, from a model directory's
``tokenizer.json`` and ``tokenizer_config.json``; the engine gets ``"prompt": [ids]`` on
``/v1/completions`` with ``return_token_ids`` and streams back the generated ids, which
:meth:`GatewayModel.generate` emits as a local model's ``generate`` does. So ``detokenize`` and
every operator after it run in the gateway exactly as they do on a local model, and ``rxstream
serve --upstream URL`` serves the engine's ids with all of rxstream's text features.

* Replicas: several URLs; the least outstanding work first; health checks (``/health``, else
  ``/v1/models``) eject a replica and readmit it; a request is retried on another replica only
  before its first id has arrived.
* Disposal closes the upstream request at once; failures are a one-line :class:`GatewayError`.
* ``generate(..., logprobs=k)``: the engine's log-probabilities (``return_tokens_as_token_ids``),
  one :class:`~rxstream.Piece` per id as a local model emits them. An engine that ignores
  ``return_token_ids`` is asked again for its ids in ``token_id:N`` logprobs tokens.
* ``mode="text"``: engines that give text only; :meth:`GatewayModel.text` streams their deltas.

Modules: ``_model`` (the model), ``_run`` (one subscription: tries, retries, the request body),
``_text`` (text mode),
``_replicas`` (picking and health), ``_files`` / ``_template`` (the local tokenizer side).

Needs the ``gateway`` extra (``pip install 'rxstream[gateway]'``: httpx, jinja2); it reuses the
HTTP stream of :mod:`rxstream.backends.openai`.
"""

from rxstream._extras import require_extra

require_extra("rxstream.backends.gateway", "gateway")

from ._model import GatewayModel
from ._run import GatewayError

__all__ = ["GatewayError", "GatewayModel"]
