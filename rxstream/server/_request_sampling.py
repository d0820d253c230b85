"""Request validation: the sampling fields and the token budget, read from
:meth:`SamplingParams.table` (each field's request name and range are declared there, once)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._sampling_params import SamplingParams, SamplingParamsError
from ._errors import RequestError
from ._limits import ServerLimits

__all__ = ["REQUEST_FIELDS", "parse_budget", "parse_sampling", "reported_defaults", "request_params"]

_BUDGET = next(spec for spec in SamplingParams.table() if spec.name == "max_new_tokens")
"""The budget's field: read with the server's limits (and chat's ``max_completion_tokens``)."""

_SAMPLING = tuple(spec for spec in SamplingParams.table() if spec.json is not None and spec is not _BUDGET)
"""The sampling fields a request may set (absent or null: the model's default)."""

REQUEST_FIELDS = frozenset(spec.json for spec in SamplingParams.table() if spec.json is not None)
"""The request names of the table's fields."""

_JSON_NAMES = {spec.name: spec.json for spec in SamplingParams.table() if spec.json is not None}


def _refused(exc: SamplingParamsError, name: str | None = None) -> RequestError:
    """A 400 naming the request's field (``'top_p' must be in (0, 1], got 0``)."""
    field = name or _JSON_NAMES.get(exc.field) or exc.field
    return RequestError(f"'{field}' {exc.reason}"[:300], param=field)


def parse_sampling(body: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling fields the request gives (field name -> value), each checked against its
    field's range and the faces' limit; a field's ``json_off`` value means its default."""
    given: dict[str, Any] = {}
    for spec in _SAMPLING:
        assert spec.json is not None
        value = body.get(spec.json)
        if value is None:
            continue
        if spec.json_off is not None and type(value) is int and value == spec.json_off:
            value = spec.default  # vLLM's spelling of "off"
        try:
            given[spec.name] = spec.check(value, limited=True)
        except SamplingParamsError as exc:
            raise _refused(exc, spec.json) from None
    return given


def parse_budget(body: Mapping[str, Any], chat: bool, limits: ServerLimits) -> tuple[int, bool]:
    """``max_tokens`` (or chat's ``max_completion_tokens``) and whether the request gave it."""
    name = "max_completion_tokens" if chat and body.get("max_completion_tokens") is not None else _BUDGET.json
    assert name is not None
    value = body.get(name)
    if value is None:
        return min(limits.default_max_tokens, limits.max_tokens), False
    try:
        return int(_BUDGET.check(value, limited=True, hi=limits.max_tokens)), True
    except SamplingParamsError as exc:
        raise _refused(exc, name) from None


def request_params(defaults: SamplingParams, sampling: Mapping[str, Any], max_tokens: int) -> SamplingParams:
    """``defaults`` with a request's sampling fields and budget.

    Raises:
        RequestError: a combination the model cannot use, naming the request's field.
    """
    try:
        return defaults.replace(**sampling, **{_BUDGET.name: max_tokens})
    except SamplingParamsError as exc:
        raise _refused(exc) from None


def reported_defaults(defaults: SamplingParams, max_tokens: int) -> dict[str, object]:
    """What a request gets for the fields it leaves out, under their request names (fields
    without a default value, like ``seed``, left out); ``max_tokens``: the server's budget."""
    reported: dict[str, object] = {
        spec.json: getattr(defaults, spec.name)
        for spec in _SAMPLING
        if spec.json and spec.default is not None
    }
    assert _BUDGET.json is not None
    reported[_BUDGET.json] = max_tokens
    return reported
