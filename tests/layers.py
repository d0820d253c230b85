"""The layer check: each layer of rxstream imports only the layers below it.

Layers (the installed package names; ``rxstream.operators`` and ``rxstream.backends`` live in
``operators/`` and ``backends/`` through pyproject's package-dir mapping, which this check reads):

==========  ===========================================  =======================================
layer       packages                                     may import (besides itself)
==========  ===========================================  =======================================
core        ``rxstream`` (all but the ones below)        --
operators   ``rxstream.operators``                       core
backends    ``rxstream.backends``                        core
testing     ``rxstream.testing``                         core, operators
compat      ``rxstream.compat``                          core, operators
face        ``rxstream.cli``, ``rxstream.server``,       everything
            ``rxstream.__main__``
==========  ===========================================  =======================================

Every ``import`` statement counts, also inside functions and under ``TYPE_CHECKING``.

Beside the layers, :func:`check_any` bounds how often the operators fall back on ``Any``
(:data:`ANY_PER_1000_LINES`); the command prints the count.
Run ``python tests/layers.py`` (exit status 1 and one line per forbidden import), or call
:func:`check` from a test.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ALLOWED", "LAYERS", "Violation", "check", "layer_of", "module_files"]

LAYERS: dict[str, tuple[str, ...]] = {
    "operators": ("rxstream.operators",),
    "backends": ("rxstream.backends",),
    "testing": ("rxstream.testing",),
    "compat": ("rxstream.compat",),
    "face": ("rxstream.cli", "rxstream.server", "rxstream.__main__"),
    "core": ("rxstream",),  # last: everything under rxstream that no other layer claims
}
"""Layer -> the package prefixes that belong to it (the first match wins, in this order)."""

ALLOWED: dict[str, frozenset[str]] = {
    "core": frozenset({"core"}),
    "operators": frozenset({"core", "operators"}),
    "backends": frozenset({"core", "backends"}),
    "testing": frozenset({"core", "operators", "testing"}),
    "compat": frozenset({"core", "operators", "compat"}),
    "face": frozenset(LAYERS),
}
"""Layer -> the layers it may import."""


@dataclass(frozen=True)
class Violation:
    """A forbidden import: where it is and what it imports."""

    path: Path
    line: int
    module: str
    imported: str
    layer: str
    imported_layer: str

    def __str__(self) -> str:
        return (
            f"{self.path}:{self.line}: {self.module} ({self.layer}) imports {self.imported} "
            f"({self.imported_layer}); {self.layer} may import only {', '.join(sorted(ALLOWED[self.layer]))}"
        )


def layer_of(module: str) -> str | None:
    """The layer of an ``rxstream`` module, or None for any other module."""
    for layer, prefixes in LAYERS.items():
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                return layer
    return None


def _package_dirs(root: Path) -> dict[str, Path]:
    """Package name -> directory, from pyproject's ``[tool.setuptools] package-dir``."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    return {name: root / path for name, path in mapping.items()}


def module_files(root: Path) -> Iterator[tuple[str, Path]]:
    """``(module name, file)`` for every Python file of the installed packages under ``root``."""
    dirs = _package_dirs(root)
    # the most specific mapping first, so rxstream.operators is not read as part of rxstream/
    mapped = sorted(dirs.items(), key=lambda item: -item[0].count("."))
    seen: set[Path] = set()
    for package, directory in mapped:
        for path in sorted(directory.rglob("*.py")):
            resolved = path.resolve()
            if resolved in seen or "__pycache__" in path.parts:
                continue
            seen.add(resolved)
            parts = list(path.relative_to(directory).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join([package, *parts]), path


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target
            for alias in node.names:  # from rxstream import operators
                yield node.lineno, f"{target}.{alias.name}"


def check(root: Path) -> list[Violation]:
    """Every forbidden import in the packages under ``root`` (a checkout with a pyproject.toml)."""
    found: list[Violation] = []
    for module, path in module_files(root):
        layer = layer_of(module)
        if layer is None:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        seen: set[tuple[int, str]] = set()
        for line, imported in _imports(tree, module, path.name == "__init__.py"):
            imported_layer = layer_of(imported)
            if imported_layer is None or imported_layer in ALLOWED[layer] or (line, imported_layer) in seen:
                continue
            seen.add((line, imported_layer))
            found.append(Violation(path.relative_to(root), line, module, imported, layer, imported_layer))
    return found


ANY_PER_1000_LINES = 30.0
"""The most occurrences of the word ``Any`` per 1,000 lines of ``operators/*.py`` (RxPY has 18)."""


def any_density(root: Path) -> tuple[int, int]:
    """``(occurrences of the word Any, lines)`` in the modules of ``operators/`` under ``root``."""
    word = re.compile(r"\bAny\b")
    count = lines = 0
    for path in sorted((root / "operators").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        count += len(word.findall(text))
        lines += text.count("\n")
    return count, lines


def check_any(root: Path) -> tuple[bool, str]:
    """Whether the operators keep ``Any`` under :data:`ANY_PER_1000_LINES`, and a line saying how many."""
    count, lines = any_density(root)
    density = 1000 * count / max(lines, 1)
    ok = density <= ANY_PER_1000_LINES
    verdict = "" if ok else ": too many, type the operators' items (str, Piece, int, Segment, TypeVars)"
    return ok, (
        f"operators/: {count} Any in {lines} lines, {density:.1f} per 1,000 "
        f"(at most {ANY_PER_1000_LINES:g}){verdict}"
    )


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
    violations = check(root)
    for v in violations:
        print(v)
    if violations:
        print(f"{len(violations)} forbidden import(s): see tests/layers.py for the layers", file=sys.stderr)
    any_ok, any_line = check_any(root)
    print(any_line, file=sys.stderr)  # stdout keeps one line per forbidden import
    return 1 if violations or not any_ok else 0


if __name__ == "__main__":
    raise SystemExit(main())
