"""Optional dependencies: the packages that need an extra check for it when they are imported.

The core and the operators need only ``reactivex``, ``tokenizers`` and ``numpy``. The backends and
the command line / server come with pip extras (``rxstream[onnx]``, ``rxstream[openai]``,
``rxstream[serve]``, ``rxstream[all]``); such a package calls :func:`require_extra` first thing, so
that importing it without its extra raises one :class:`MissingExtraError` line naming the pip
command, instead of the ``ModuleNotFoundError`` of whichever dependency it happens to import first.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

__all__ = ["EXTRAS", "MissingExtraError", "require_extra"]

_ONNX = ("onnxruntime", "onnx", "gguf", "jinja2", "httpx", "llguidance")

EXTRAS: dict[str, tuple[str, ...]] = {
    "onnx": _ONNX,
    "openai": ("httpx",),
    "gateway": ("httpx", "jinja2"),
    "serve": ("starlette", "uvicorn", "prometheus_client", *_ONNX),
}
"""Extra -> the top-level modules it installs (what :func:`require_extra` looks for)."""


class MissingExtraError(ImportError):
    """A package of rxstream was imported without the pip extra it needs.

    The message is one line naming the pip command; :attr:`extra` is the extra and
    :attr:`missing` the modules that are not installed (``name`` is the first of them).
    """

    def __init__(self, what: str, extra: str, missing: tuple[str, ...]) -> None:
        message = f"{what} needs the {extra!r} extra: pip install 'rxstream[{extra}]'"
        super().__init__(message, name=missing[0])
        self.extra = extra
        self.missing = missing


def require_extra(what: str, extra: str, modules: Iterable[str] | None = None) -> None:
    """Raise :class:`MissingExtraError` unless every module of ``extra`` (or ``modules``, top-level
    names) can be imported; ``what`` names the package in the message. Nothing is imported."""
    names = tuple(EXTRAS[extra] if modules is None else modules)
    missing = tuple(name for name in names if importlib.util.find_spec(name) is None)
    if missing:
        raise MissingExtraError(what, extra, missing)
