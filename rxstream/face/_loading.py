"""Loading the model a face runs, and the sampling it gets when a user says nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from .._generative_model import GenerativeModel
from .._sampling_params import SamplingParams

if TYPE_CHECKING:
    from rxstream.backends.onnx import Quantization

__all__ = ["PROVIDERS", "QUANTIZATIONS", "describe_sampling", "load_model", "model_defaults"]

PROVIDERS = ("auto", "cpu", "cuda")
"""The ``--provider`` choices."""

QUANTIZATIONS = ("fp32", "int4", "int4-a8")
"""The ``--quantization`` choices: the builds of a known model (the backend's
``QUANTIZATIONS``, written out so that parsing the options imports no backend)."""


def load_model(
    model: str | None,
    provider: str = "auto",
    quantization: str = "fp32",
    *,
    progress: bool = False,
    spinning: bool | Literal["step"] | None = None,
    batching: Any = None,
    upstream: Sequence[str] = (),
    upstream_mode: str = "ids",
    upstream_endpoint: str = "completions",
) -> GenerativeModel:
    """Load ``model`` (a model directory or a known name) with ONNX Runtime, or with ``upstream``
    the :class:`~rxstream.backends.GatewayModel` of those engines (``model``: the directory of
    its tokenizer and chat template, None: the engines' own model; see
    :func:`~._upstream.load_gateway`; ``provider``, ``quantization``, ``spinning`` and ``batching`` do
    not apply).

    Args:
        model: ``--model`` (None: not given, the default model ``smollm2``).
        provider: ``--provider`` (``auto``, ``cpu`` or ``cuda``).
        quantization: ``--quantization``: the build of a known model (:data:`QUANTIZATIONS`).
        progress: show the download's progress (a terminal's command).
        spinning: whether ONNX Runtime threads spin while waiting (None: its default).
        batching: the model's :class:`~rxstream.backends.BatchConfig` (None: its default; False:
            none).
        upstream_mode: ``--upstream-mode``: ``ids`` or ``text`` (the gateway's ``mode``).
        upstream_endpoint: ``--upstream-endpoint``: ``completions`` or ``generate`` (its ``endpoint``).

    Raises:
        ValueError, FileNotFoundError, RuntimeError: the model or an option is unusable (a
            one-line message).
    """
    if upstream:
        from ._upstream import load_gateway

        return load_gateway(
            upstream, model, progress=progress, mode=upstream_mode, endpoint=upstream_endpoint
        )
    from rxstream.backends import OnnxModel

    if model is None:
        model = "smollm2"
    if provider not in PROVIDERS:
        raise ValueError(f"--provider must be auto, cpu or cuda, got {provider!r}")
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"--quantization must be one of {', '.join(QUANTIZATIONS)}, got {quantization!r}")
    extra: dict[str, Any] = {}
    if progress:
        extra["progress"] = True
    if spinning is not None:
        extra["spinning"] = spinning
    if batching is not None:
        extra["batching"] = batching
    from rxstream.backends.onnx import CudaUnavailableError

    try:
        return OnnxModel.from_pretrained(
            model,
            provider=cast("Literal['auto', 'cpu', 'cuda']", provider),
            quantization=cast("Quantization", quantization),
            **extra,
        )
    except CudaUnavailableError as exc:  # the flag's spelling, not the library's
        raise RuntimeError(f"--provider cuda: {exc.reason}; use --provider cpu or auto") from None


def model_defaults(model: GenerativeModel) -> SamplingParams:
    """How ``model`` samples when a user does not say: its ``default_sampling`` (an
    :class:`~rxstream.backends.OnnxModel` reads it from ``generation_config.json``), else greedy."""
    defaults = getattr(model, "default_sampling", None)
    return defaults if isinstance(defaults, SamplingParams) else SamplingParams()


def describe_sampling(params: SamplingParams) -> str:
    """``params``' sampling in words (``greedy``, ``temperature 0.7, top_p 0.9, top_k 50``): the
    fields of :meth:`SamplingParams.table` shown in the banner, under their request names."""
    parts = ["greedy"] if params.greedy else []
    for spec in SamplingParams.table():
        value = getattr(params, spec.name)
        if not spec.shown or (params.greedy and not spec.greedy_too):
            continue
        if spec.shown == "sampling" or value != spec.default:
            parts.append(
                f"{spec.json or spec.name} {value:g}"
                if spec.kind == "float"
                else f"{spec.json or spec.name} {value}"
            )
    return ", ".join(parts)
