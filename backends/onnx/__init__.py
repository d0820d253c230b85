"""The ONNX runtime side of the backends: :class:`OnnxModel` loads a model directory and
generates token ids as ``Observable[int]``.

Modules (all private; import from here or from :mod:`rxstream.backends`):

* ``_model``: :class:`OnnxModel`, the facade (properties, forward, generate); ``_model_text`` its
  text side (encode, the chat template); ``_grammar`` its grammar side (constrained decoding).
* ``_loader``: reading a model directory (Optimum or onnxruntime-genai layout) and resolving the
  names :meth:`OnnxModel.from_pretrained` accepts.
* ``_session``: the ONNX Runtime session (provider choice, IO binding, the KV caches);
  :class:`CudaUnavailableError`. ``_graph_ops`` reads a graph's op types and ``_onnx_writer``
  writes the small KV graphs, as protobuf: loading and running a model never imports ``onnx``.
* ``_generation``: one run of ``generate`` (decode loop, cancellation, its end reported once);
  :func:`default_scheduler`.
* ``_batch``: one run of ``generate_batch`` (a left-padded batch, each row ending on its own).
* ``_scheduler``: :class:`BatchScheduler`, continuous batching of concurrent ``generate``
  subscriptions (admission, chunked prefill, one decode step for all rows), :class:`BatchConfig`.
* ``_kvcache``: the KV caches rows of different lengths share (slots for GroupQueryAttention
  graphs, left padding for plain ones) and the small ONNX graphs that move their blocks.
* ``_sampling``: :class:`Sampler` (greedy, temperature, top-k/top-p, repetition penalty, a
  grammar's mask) and
  :func:`token_logprobs` (a token's log-probability and the best alternatives).
* ``_chat``: the Jinja chat template.
* ``_config``: :class:`DecoderConfig` (``config.json``), :func:`sampling_defaults`
  (``generation_config.json``), the graph file names of a model directory and the builds of a
  GGUF (:data:`QUANTIZATIONS`).

Dependencies: this package imports only the core (:mod:`rxstream`). The converter
(:mod:`rxstream.backends.convert`) builds on it (it writes the directories this package reads);
the one way back, pulling a known model in :meth:`OnnxModel.from_pretrained`, is imported lazily.

Needs the ``onnx`` extra (``pip install 'rxstream[onnx]'``: onnxruntime, onnx, jinja2; pulling a
known model also gguf and httpx); importing this package without it raises a one-line
:class:`~rxstream._extras.MissingExtraError`.
"""

from rxstream._extras import require_extra

require_extra("rxstream.backends.onnx", "onnx")

from ._config import QUANTIZATIONS, DecoderConfig, Quantization, sampling_defaults
from ._generation import default_scheduler
from ._model import OnnxModel
from ._sampling import Sampler, token_logprobs
from ._scheduler import BatchConfig, BatchScheduler
from ._session import CudaUnavailableError, Provider

__all__ = [
    "QUANTIZATIONS",
    "BatchConfig",
    "BatchScheduler",
    "CudaUnavailableError",
    "DecoderConfig",
    "OnnxModel",
    "Provider",
    "Quantization",
    "Sampler",
    "default_scheduler",
    "sampling_defaults",
    "token_logprobs",
]
