"""Packaging: one version, exactly one ONNX Runtime package on every platform, the core and the
operators on three dependencies (the backends and the face behind pip extras), and a package list
that setuptools derives from the package-dir roots."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import rxstream
from rxstream._extras import EXTRAS

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
CORE_DEPENDENCIES = {"reactivex", "tokenizers", "numpy"}
MODULE_OF = {"onnxruntime-gpu": "onnxruntime", "prometheus-client": "prometheus_client"}
"""Distribution name -> the module it installs, where they differ."""
SERVE_MESSAGE = "the rxstream command needs the 'serve' extra: pip install 'rxstream[serve]'"


def test_one_source_for_the_version() -> None:
    assert importlib.metadata.version("rxstream") == rxstream.__version__
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert "version" not in project and "version" in project["dynamic"]


@pytest.mark.parametrize(
    ("sys_platform", "machine", "package"),
    [
        ("linux", "x86_64", "onnxruntime-gpu"),
        ("win32", "AMD64", "onnxruntime-gpu"),
        ("linux", "aarch64", "onnxruntime"),
        ("darwin", "arm64", "onnxruntime"),
        ("darwin", "x86_64", "onnxruntime"),
        ("win32", "ARM64", "onnxruntime"),
    ],
)
def test_exactly_one_onnxruntime_per_platform(sys_platform: str, machine: str, package: str) -> None:
    deps = PROJECT["optional-dependencies"]["onnx"]
    env = {"sys_platform": sys_platform, "platform_machine": machine}
    chosen = [
        r.name
        for r in map(Requirement, deps)
        if r.name.startswith("onnxruntime") and (r.marker is None or r.marker.evaluate(env))
    ]
    assert chosen == [package]


def _package_dirs() -> dict[str, Path]:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    return {name: ROOT / path for name, path in setuptools["package-dir"].items()}


def test_the_core_and_the_operators_need_three_packages() -> None:
    assert {Requirement(r).name for r in PROJECT["dependencies"]} == CORE_DEPENDENCIES


def _extra_modules(extra: str) -> set[str]:
    """The modules an extra of pyproject installs (its own extras followed, the core's left out)."""
    found: set[str] = set()
    for req in map(Requirement, PROJECT["optional-dependencies"][extra]):
        if req.name == "rxstream":
            for inner in req.extras:
                found |= _extra_modules(inner)
        else:
            found.add(MODULE_OF.get(req.name, req.name))
    return found


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_each_extra_checks_the_modules_it_installs(extra: str) -> None:
    assert _extra_modules(extra) == set(EXTRAS[extra])


def test_all_has_every_extra_and_test_has_all() -> None:
    extras = PROJECT["optional-dependencies"]
    assert _extra_modules("all") == set().union(*EXTRAS.values())
    assert "rxstream[all]" in extras["test"]
    assert _extra_modules("all") <= _extra_modules("test")


def test_the_package_list_is_derived_from_the_roots() -> None:
    """No hand-written list to forget a new subpackage in: setuptools finds every package under
    the package-dir roots (the wheel test below checks what it finds)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert "packages" not in setuptools
    for directory in _package_dirs().values():
        assert (directory / "__init__.py").is_file(), directory


_BLOCK_EXTRAS = "import sys\nfor m in {mods!r}: sys.modules[m] = None\n"


def _run_without_extras(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter where no extra's module can be imported."""
    mods = sorted(set().union(*EXTRAS.values()))
    return subprocess.run(
        [sys.executable, "-c", _BLOCK_EXTRAS.format(mods=mods) + code],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_the_core_and_the_operators_import_without_any_extra() -> None:
    code = (
        "import rxstream, rxstream.operators, rxstream.backends, rxstream.aio, rxstream.channels\n"
        "for name in rxstream.operators.__all__: getattr(rxstream.operators, name)\n"
        "print('ok')\n"
    )
    result = _run_without_extras(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        (
            "import rxstream.backends.onnx",
            "rxstream.backends.onnx needs the 'onnx' extra: pip install 'rxstream[onnx]'",
        ),
        (
            "from rxstream.backends import OnnxModel",
            "rxstream.backends.onnx needs the 'onnx' extra: pip install 'rxstream[onnx]'",
        ),
        (
            "import rxstream.backends.convert",
            "rxstream.backends.convert needs the 'onnx' extra: pip install 'rxstream[onnx]'",
        ),
        (
            "from rxstream.backends import OpenAIBackend",
            "rxstream.backends.openai needs the 'openai' extra: pip install 'rxstream[openai]'",
        ),
        ("import rxstream.server", "rxstream.server needs the 'serve' extra: pip install 'rxstream[serve]'"),
        ("import rxstream.cli", SERVE_MESSAGE),
    ],
)
def test_a_missing_extra_is_one_import_error_naming_the_pip_command(statement: str, message: str) -> None:
    code = f"try:\n    {statement}\nexcept ImportError as exc:\n    print(type(exc).__name__, exc)\n"
    result = _run_without_extras(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"MissingExtraError {message}\n"


def test_the_program_says_so_in_one_line() -> None:
    result = _run_without_extras("from rxstream.__main__ import main\nraise SystemExit(main(['--version']))")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == f"rxstream: {SERVE_MESSAGE}\n"


@pytest.mark.slow
@pytest.mark.network
def test_the_wheel_holds_every_module_and_data_file(tmp_path: Path) -> None:
    import shutil
    import zipfile

    source = tmp_path / "src"  # a copy: building in the checkout would leave build/lib behind
    shutil.copytree(
        ROOT, source, ignore=shutil.ignore_patterns(".venv*", "build", ".git", "__pycache__", "*.egg-info")
    )
    # a package no list names ships too (the list is derived from the package-dir roots)
    (source / "rxstream" / "_new_package").mkdir()
    (source / "rxstream" / "_new_package" / "__init__.py").write_text('"""new"""\n', encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = tmp_path.glob("rxstream-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in (
        "rxstream/py.typed",
        "rxstream/operators/py.typed",
        "rxstream/backends/py.typed",
        "rxstream/server/static/chat.html",
        "rxstream/server/static/favicon.svg",
    ):
        assert data in names, data
    for name, directory in _package_dirs().items():
        prefix = name.replace(".", "/")
        for source in directory.rglob("*.py"):
            if "__pycache__" in source.parts:
                continue
            inner = source.relative_to(directory).as_posix()
            if name == "rxstream" and inner.split("/")[0] in ("operators", "backends"):
                continue
            assert f"{prefix}/{inner}" in names, inner
    assert "rxstream/_new_package/__init__.py" in names


_FRESH_CHECK = """
import importlib.metadata, json, subprocess, sys
import reactivex as rx
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

import rxstream, rxstream.operators
for name in rxstream.operators.__all__:
    getattr(rxstream.operators, name)
from rxstream.operators import text_pipeline

# a byte-level tokenizer whose id n is the byte n (GPT-2's byte-to-character map)
bs = [*range(33, 127), *range(161, 173), *range(174, 256)]
cs = list(bs)
for b in range(256):
    if b not in bs:
        bs.append(b)
        cs.append(256 + len(cs) - 188)
tok = Tokenizer(models.BPE(vocab={chr(c): b for b, c in zip(bs, cs)}, merges=[]))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
out = []
rx.from_iterable(list("Hello, world! STOP more".encode())).pipe(
    text_pipeline(tok, stop=["STOP"], replace={"world": "there"})
).subscribe(out.append)

try:
    import rxstream.backends.onnx
except ImportError as exc:
    error = f"{type(exc).__name__}: {exc}"
requires = [r for r in importlib.metadata.requires("rxstream") if "extra ==" not in r]
print(json.dumps({"text": "".join(out), "error": error, "requires": requires}))
"""


@pytest.mark.slow
@pytest.mark.network
def test_a_fresh_venv_with_three_packages_runs_the_operators(tmp_path: Path) -> None:
    """The package installed with --no-deps next to reactivex, tokenizers and numpy only: the core
    and every operator import and run; a backend says which extra it needs; so does the program."""
    import json
    import shutil

    source = tmp_path / "src"  # a copy: building in the checkout would leave build/ behind
    shutil.copytree(
        ROOT, source, ignore=shutil.ignore_patterns(".venv*", "build", ".git", "__pycache__", "*.egg-info")
    )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, *sorted(CORE_DEPENDENCIES)], check=True, capture_output=True, timeout=300)
    subprocess.run([*pip, "--no-deps", str(source)], check=True, capture_output=True, timeout=300)
    installed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert not {p["name"].lower() for p in json.loads(installed.stdout)} & {
        "onnxruntime",
        "onnxruntime-gpu",
        "onnx",
        "gguf",
        "jinja2",
        "httpx",
        "starlette",
        "uvicorn",
    }
    result = subprocess.run(
        [str(python), "-c", _FRESH_CHECK], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["text"] == "Hello, there! "
    assert report["error"] == (
        "MissingExtraError: rxstream.backends.onnx needs the 'onnx' extra: pip install 'rxstream[onnx]'"
    )
    assert sorted(Requirement(r).name for r in report["requires"]) == sorted(CORE_DEPENDENCIES)
    program = subprocess.run(
        [str(venv / "bin" / "rxstream"), "chat", "hi"], capture_output=True, text=True, timeout=120
    )
    assert program.returncode == 1
    assert (
        program.stderr
        == "rxstream: the rxstream command needs the 'serve' extra: pip install 'rxstream[serve]'\n"
    )
