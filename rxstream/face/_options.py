"""The options ``rxstream chat`` and ``rxstream serve`` share, and reading them back."""

from __future__ import annotations

import argparse
from typing import Any

from .._sampling_params import SamplingParams, SamplingParamsError
from ._loading import PROVIDERS, QUANTIZATIONS

__all__ = [
    "add_model_options",
    "add_sampling_options",
    "reasoning_format_option",
    "sampling_from_args",
    "sampling_option",
]


def reasoning_format_option(text: str) -> str:
    """``--reasoning-format``: ``auto``, ``none`` or a preset name (aliases accepted)."""
    # here, not at the top: rxstream.server's own options import this module
    from ..chat import check_reasoning_format

    try:
        return check_reasoning_format(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--reasoning-format ")) from None


def add_sampling_options(parser: argparse.ArgumentParser) -> None:
    """One option per field of :meth:`SamplingParams.table` that has a ``flag``: its type and
    help from the table; not given, it is None (the model's own), or the field's default for a
    ``face_default`` field."""
    for spec in SamplingParams.table():
        if spec.flag is None:
            continue
        parser.add_argument(
            spec.flag,
            type=int if spec.kind == "int" else float,
            default=spec.default if spec.face_default else None,
            help=spec.help,
        )


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """The options both faces take: ``--model``, ``--upstream``, ``--provider``, ``--quantization``
    (``--int4``), the
    sampling options (:func:`add_sampling_options`) and ``--reasoning-format``."""
    from ..chat import REASONING_FORMATS

    parser.add_argument(
        "--model",
        default=None,
        metavar="DIR",
        help="a model directory (Optimum or onnxruntime-genai layout) or a known name (default "
        "smollm2); with --upstream, the directory of the engines' tokenizer.json and chat template "
        "(default: the model the engines name)",
    )
    parser.add_argument(
        "--upstream",
        action="append",
        default=[],
        metavar="URL",
        help="run on a remote engine (vLLM, rxstream serve, ...) instead of a local model, "
        "exchanging token ids with it (its /v1/completions with return_token_ids); repeat for "
        "replicas of one model",
    )
    parser.add_argument(
        "--upstream-mode",
        choices=("ids", "text"),
        default="ids",
        help="ids (default): the engines return token ids; text: they give text only (OpenAI, "
        "Ollama): the stop and replace rules still run here, what needs ids is refused",
    )
    parser.add_argument(
        "--upstream-endpoint",
        choices=("completions", "generate"),
        default="completions",
        help="where token ids go: completions (default: /v1/completions with return_token_ids) or "
        "generate (vLLM's tokens-only /inference/v1/generate; the engine makes no text)",
    )
    parser.add_argument(
        "--provider",
        choices=PROVIDERS,
        default="auto",
        help="ONNX Runtime execution provider (default auto: CUDA when it works, else CPU)",
    )
    parser.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        default="fp32",
        help="the build of a known model: fp32 (default), int4 (the GGUF's 4-bit blocks, the same "
        "weights) or int4-a8 (those weights with 8-bit activations: fastest, not exact; "
        "docs/benchmarks.md gives its accuracy)",
    )
    parser.add_argument(
        "--int4",
        dest="quantization",
        action="store_const",
        const="int4",
        help="the same as --quantization int4",
    )
    add_sampling_options(parser)
    parser.add_argument(
        "--reasoning-format",
        type=reasoning_format_option,
        default="auto",
        metavar="FORMAT",
        help="how chat output is split into reasoning (reasoning_content), answer and tool calls: "
        f"{', '.join(REASONING_FORMATS)} (default auto: detected from the model's chat template)",
    )


def sampling_option(field: str) -> str:
    """The option that sets a :class:`SamplingParams` field (``--top-p`` for ``top_p``)."""
    for spec in SamplingParams.table():
        if spec.name == field and spec.flag is not None:
            return spec.flag
    return field


def sampling_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The sampling options given (field name -> value; the model's defaults fill in the rest),
    each checked against its field's range and the faces' limit, before anything loads.

    Raises:
        ValueError: a bad option, named as the user typed it (``--top-p must be in (0, 1], got 2.0``).
    """
    given: dict[str, Any] = {}
    for spec in SamplingParams.table():
        value = None if spec.dest is None else getattr(args, spec.dest, None)
        if value is not None:
            given[spec.name] = value
    try:
        SamplingParams.requested(given)
    except SamplingParamsError as exc:
        raise ValueError(f"{sampling_option(exc.field)} {exc.reason}") from None
    return given
