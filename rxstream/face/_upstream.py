"""``--upstream URL``: both faces on remote engines (:class:`~rxstream.backends.GatewayModel`),
with the tokenizer and chat template from ``--model DIR`` or the engines' own model."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._generative_model import GenerativeModel

__all__ = ["describe", "engine_model", "load_gateway", "tokenizer_dir"]


def engine_model(urls: Sequence[str], timeout: float = 5.0) -> tuple[str | None, int | None]:
    """The model id and context length (``max_model_len``) the first answering engine's
    ``/v1/models`` names; (None, None) when none answers."""
    import httpx

    from rxstream.backends.gateway._replicas import engine_root

    for url in urls:
        try:
            response = httpx.get(engine_root(url) + "/v1/models", timeout=timeout)
            entry = response.json()["data"][0]
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
            continue
        model_id = entry.get("id") if isinstance(entry, dict) else None
        length = entry.get("max_model_len") if isinstance(entry, dict) else None
        return (
            model_id if isinstance(model_id, str) and model_id else None,
            length if isinstance(length, int) and not isinstance(length, bool) and length > 0 else None,
        )
    return None, None


def _hub_snapshot(name: str) -> Path | None:
    """A Hugging Face hub cache's snapshot of repository ``name`` with a ``tokenizer.json``."""
    hub = Path(
        os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME", "~/.cache/huggingface")) / "hub"
    )
    snapshots = hub.expanduser() / f"models--{name.replace('/', '--')}" / "snapshots"
    if not snapshots.is_dir():
        return None
    found = sorted(snapshots.glob("*/tokenizer.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    return found[0].parent if found else None


def tokenizer_dir(name: str, *, progress: bool = False) -> Path:
    """A directory with ``name``'s ``tokenizer.json``: ``name`` itself, a known model (pulled
    into the cache if needed), or a Hugging Face hub cache's snapshot of the repository ``name``.

    Raises:
        FileNotFoundError: none of them (the message says to pass ``--model DIR``).
    """
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    from rxstream.backends.convert import KNOWN_MODELS, pull_model

    if name in KNOWN_MODELS:
        return pull_model(name, progress=progress)
    snapshot = _hub_snapshot(name)
    if snapshot is not None:
        return snapshot
    raise FileNotFoundError(
        f"no tokenizer for the model {name!r}: pass --model DIR, a directory with its tokenizer.json "
        "and tokenizer_config.json"
    )


def load_gateway(
    upstream: Sequence[str], model: str | None, *, progress: bool = False, **options: Any
) -> GenerativeModel:
    """The :class:`~rxstream.backends.GatewayModel` of ``--upstream`` (one or more URLs):
    tokenizer and chat template from ``model`` (``--model``), else from the model the engines
    name on ``/v1/models``; requests name that model when the engines gave it, and the context
    length is the engines' ``max_model_len`` when they give it.

    Raises:
        ValueError, FileNotFoundError: a bad URL, or no tokenizer to be found (one line).
    """
    from rxstream.backends.gateway import GatewayModel

    engine_id, length = engine_model(upstream)
    if model is None and engine_id is None:
        raise ValueError(
            f"--upstream {upstream[0]}: no engine answered /v1/models; pass --model DIR for the "
            "tokenizer and chat template"
        )
    directory = tokenizer_dir(model if model is not None else str(engine_id), progress=progress)
    # the engine's own limit (vLLM's --max-model-len) before the checkpoint's config.json
    return GatewayModel(list(upstream), directory, model=engine_id, context_length=length, **options)


def describe(model: Any) -> str:
    """The start-up line of a gateway: its engines and their health."""
    stats = model.replica_stats() if hasattr(model, "replica_stats") else []
    return "upstream engines: " + ", ".join(
        f"{s['url']} ({'healthy' if s['healthy'] else 'ejected'})" for s in stats
    )
