"""What the gateway reads from a local model directory (:func:`read_model_files`): the tokenizer,
the chat template, the EOS ids and the context length. Only ``tokenizer.json`` is required; a
Hugging Face checkpoint's directory, an ONNX model's or a tokenizer-only copy all work."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from rxstream.chat import ChatTemplate

__all__ = ["ModelFiles", "read_model_files"]


@dataclass(frozen=True, slots=True)
class ModelFiles:
    """A model directory's tokenizer side."""

    directory: Path
    tokenizer: Tokenizer
    chat_template: ChatTemplate | None
    eos_token_ids: frozenset[int]
    context_length: int | None


def read_model_files(path: str | Path) -> ModelFiles:
    """Read ``tokenizer.json``, ``tokenizer_config.json`` (EOS/BOS tokens, ``chat_template``, else
    ``chat_template.jinja``), ``config.json`` and ``generation_config.json`` (EOS ids,
    ``max_position_embeddings``) of ``path``.

    Raises:
        FileNotFoundError: no such directory, or no ``tokenizer.json`` in it.
        ValueError: a file that cannot be read (named).
    """
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise FileNotFoundError(f"GatewayModel: model directory {str(directory)!r} does not exist")
    tok_file = directory / "tokenizer.json"
    if not tok_file.is_file():
        raise FileNotFoundError(f"GatewayModel: no tokenizer.json in {str(directory)!r}")
    try:
        tokenizer = Tokenizer.from_file(str(tok_file))
    except Exception as exc:
        raise ValueError(f"GatewayModel: cannot read {tok_file}: {exc}") from None
    config = _read_json(directory / "config.json")
    tok_config = _read_json(directory / "tokenizer_config.json")
    eos = _ids(config.get("eos_token_id")) | _ids(
        _read_json(directory / "generation_config.json").get("eos_token_id")
    )
    eos_token = _token_text(tok_config.get("eos_token"))
    if not eos and eos_token is not None and (eos_id := tokenizer.token_to_id(eos_token)) is not None:
        eos.add(int(eos_id))
    context = config.get("max_position_embeddings")
    return ModelFiles(
        directory,
        tokenizer,
        _chat_template(directory, tok_config, eos_token),
        frozenset(eos),
        context if isinstance(context, int) and not isinstance(context, bool) and context > 0 else None,
    )


def _chat_template(directory: Path, tok_config: dict[str, Any], eos_token: str | None) -> ChatTemplate | None:
    source = tok_config.get("chat_template")
    if isinstance(source, list):  # [{"name": ..., "template": ...}]
        named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
        source = named.get("default") or next(iter(named.values()), None)
    if source is None and (directory / "chat_template.jinja").is_file():
        source = (directory / "chat_template.jinja").read_text(encoding="utf-8")
    if not isinstance(source, str):
        return None
    bos_token = _token_text(tok_config.get("bos_token"))
    return ChatTemplate(source, bos_token=bos_token or "", eos_token=eos_token or "")


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"GatewayModel: {path} is not valid JSON ({exc})") from None
    return data if isinstance(data, dict) else {}


def _ids(value: Any) -> set[int]:
    values = value if isinstance(value, list) else [value]
    return {v for v in values if isinstance(v, int) and not isinstance(v, bool) and v >= 0}


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None
