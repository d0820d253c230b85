"""What ``rxstream chat`` and ``rxstream serve`` share: one model loader (:func:`load_model`),
one option set (:func:`add_model_options`: model, provider, quantization, the sampling options of
:meth:`rxstream.SamplingParams.table`, reasoning format) and the sampling a model gets when a
user says nothing (:func:`model_defaults`, :func:`describe_sampling`).

Modules: ``_loading`` (the loader and the model's defaults), ``_options`` (the options and
reading them back).
"""

from __future__ import annotations

from ._loading import QUANTIZATIONS, describe_sampling, load_model, model_defaults
from ._options import (
    add_model_options,
    add_sampling_options,
    reasoning_format_option,
    sampling_from_args,
    sampling_option,
)

__all__ = [
    "QUANTIZATIONS",
    "add_model_options",
    "add_sampling_options",
    "describe_sampling",
    "load_model",
    "model_defaults",
    "reasoning_format_option",
    "sampling_from_args",
    "sampling_option",
]
