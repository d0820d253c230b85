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

The same command checks CONTRIBUTING's size rule (:func:`check_sizes`): no module of the package
over :data:`MAX_MODULE_LINES` lines, no function over :data:`MAX_FUNCTION_LINES` (nested functions
count on their own), but for :data:`SIZE_EXEMPT` (only the GGUF -> ONNX graph builders) and the
files still waiting to be split (:data:`PENDING`, which may only shrink).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ALLOWED",
    "LAYERS",
    "MAX_FUNCTION_LINES",
    "MAX_MODULE_LINES",
    "PENDING",
    "SIZE_EXEMPT",
    "Oversize",
    "SizeProblem",
    "Violation",
    "check",
    "check_sizes",
    "layer_of",
    "module_files",
    "oversized",
]

LAYERS: dict[str, tuple[str, ...]] = {
    "operators": ("rxstream.operators",),
    "backends": ("rxstream.backends",),
    "testing": ("rxstream.testing",),
    "compat": ("rxstream.compat",),
    "face": ("rxstream.cli", "rxstream.server", "rxstream.face", "rxstream.__main__"),
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


# --- the size rule ---------------------------------------------------------------------------

MAX_MODULE_LINES = 450
"""The most lines a module of the package may have."""

MAX_FUNCTION_LINES = 100
"""The most lines a function may span (``end_lineno - lineno + 1``; decorators not counted)."""

SIZE_EXEMPT: frozenset[str] = frozenset(
    {
        # The GGUF -> ONNX graph builders: one ONNX graph written out node by node, read top to
        # bottom next to the model's reference code; cutting it up would hide the graph.
        "backends/convert/_graph.py",
    }
)
"""Keys (see :class:`Oversize`) allowed over the limit for good; only the converter's graph builders
(their module, or functions of it) may be here."""

_EXEMPTABLE = "backends/convert/_graph.py"

# Files still to split (none now). An entry that is no longer over the limit fails the check, so
# the list only shrinks.
PENDING: frozenset[str] = frozenset()
"""Keys over the limit that are allowed for now (each must still be over: the list only shrinks)."""


@dataclass(frozen=True)
class Oversize:
    """A module or a function over its limit."""

    path: Path
    line: int
    function: str | None  # the qualified name (``Class.method``, ``outer.inner``); None: the module
    lines: int

    @property
    def key(self) -> str:
        """``path`` for a module, ``path::qualified.name`` for a function (as in PENDING)."""
        return self.path.as_posix() + (f"::{self.function}" if self.function else "")

    @property
    def limit(self) -> int:
        return MAX_MODULE_LINES if self.function is None else MAX_FUNCTION_LINES

    def __str__(self) -> str:
        what = f"function {self.function}" if self.function else "module"
        return f"{self.path}:{self.line}: {what} has {self.lines} lines (at most {self.limit}); split it"


@dataclass(frozen=True)
class SizeProblem:
    """What the size check reports: an oversize not allowed, or a list entry that is wrong."""

    message: str

    def __str__(self) -> str:
        return self.message


def _functions(
    tree: ast.AST, prefix: str = ""
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function in ``tree`` with its qualified name, nested ones too."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + node.name
            yield name, node
            yield from _functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")
        else:
            yield from _functions(node, prefix)


def oversized(root: Path) -> list[Oversize]:
    """Every module and function of the packages under ``root`` over its limit, exemptions or not."""
    found: list[Oversize] = []
    for _module, path in module_files(root):
        text = path.read_text(encoding="utf-8")
        relative = path.relative_to(root)
        count = len(text.splitlines())
        if count > MAX_MODULE_LINES:
            found.append(Oversize(relative, 1, None, count))
        for name, node in _functions(ast.parse(text, str(path))):
            span = (node.end_lineno or node.lineno) - node.lineno + 1
            if span > MAX_FUNCTION_LINES:
                found.append(Oversize(relative, node.lineno, name, span))
    return found


def check_sizes(
    root: Path, *, pending: frozenset[str] = PENDING, exempt: frozenset[str] = SIZE_EXEMPT
) -> list[SizeProblem]:
    """What breaks the size rule under ``root``: oversizes neither exempt nor pending, exemptions
    outside the graph builders, and pending entries that are no longer over (remove them)."""
    problems = [
        SizeProblem(f"SIZE_EXEMPT may hold only {_EXEMPTABLE} (its graph builders), not {key}")
        for key in sorted(exempt)
        if key.partition("::")[0] != _EXEMPTABLE
    ]
    over = oversized(root)
    keys = {o.key for o in over}
    for o in over:
        if o.key not in pending and o.key not in exempt:
            problems.append(SizeProblem(str(o)))
    problems += [
        SizeProblem(f"PENDING lists {key}, no longer over its limit: remove it from tests/layers.py")
        for key in sorted(pending - keys)
    ]
    return problems


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
    problems = check_sizes(root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} size problem(s): see tests/layers.py for the size rule", file=sys.stderr)
    any_ok, any_line = check_any(root)
    print(any_line, file=sys.stderr)  # stdout keeps one line per forbidden import
    return 1 if violations or problems or not any_ok else 0


if __name__ == "__main__":
    raise SystemExit(main())
