"""The family registry: one module per model family, found by the registry; a family's name in
its own module and nowhere else in the package; detection, aliases, forced-call openings."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

import rxstream.families as fam_pkg
from rxstream.channels import PRESETS, ToolCallFormat, preset, tool_format, tool_format_names
from rxstream.families import Family, detect_family, discover, families, family, family_names

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = ("rxstream", "operators", "backends")


def _module_of(f: Family) -> Path:
    for path in Path(fam_pkg.__file__).parent.glob("*.py"):
        if not path.name.startswith("_") and re.search(
            rf'^FAMILY = Family\(\s*"{re.escape(f.name)}"', path.read_text(), re.M
        ):
            return path
    raise AssertionError(f"no module defines the family {f.name!r}")


def test_every_family_is_one_module_and_the_registry_finds_them_all() -> None:
    modules = sorted(p.stem for p in Path(fam_pkg.__file__).parent.glob("*.py") if not p.name.startswith("_"))
    assert len(families()) == len(modules) >= 7
    assert sorted(_module_of(f).stem for f in families()) == modules
    assert set(PRESETS) == set(family_names())
    for f in families():
        assert preset(f.name) is f.spec
        for alias in f.aliases:
            assert family(alias) is f


def test_a_family_name_appears_only_in_its_own_module() -> None:
    """Adding a family touches one new file (plus tests): no other module of the package spells
    its name or aliases."""
    offenders: list[str] = []
    for f in families():
        own = _module_of(f)
        words = re.compile(
            r"(?<![\w-])(" + "|".join(re.escape(n) for n in (f.name, *f.aliases)) + r")(?![\w-])", re.I
        )
        for folder in PACKAGE_DIRS:
            for path in (ROOT / folder).rglob("*.py"):
                if path == own:
                    continue
                for n, line in enumerate(path.read_text().splitlines(), 1):
                    if words.search(line):
                        offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []


def test_unknown_names_give_one_line_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown preset 'nope'; known: .*") as info:
        family("nope")
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="unknown format 'nope'"):
        tool_format("nope")


def test_each_family_format_is_known_by_name() -> None:
    names = tool_format_names()
    for f in families():
        fmt = f.spec.tool_format
        if fmt is None:
            continue
        resolved = tool_format(fmt)
        assert isinstance(resolved, ToolCallFormat) and resolved.name in names
        assert tool_format(resolved.name) is resolved


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ '<|channel|>' }}", "harmony"),
        ("[THINK]", "mistral"),
        ("<tool_call> <function=x>", "qwen3-coder"),
        ("<think> <tool_call>{{ name }}\n<arg_key>", "glm-4.5"),
        ("<think> <tool_call>", "qwen3"),
        ("<｜tool▁calls▁begin｜> <think>", "deepseek-v3"),
        ("<|tool_calls_section_begin|> <think>", "kimi-k2"),
        ("<think>", "deepseek-r1"),
        ("<tool_call>", "hermes"),
        ("<|python_tag|>", "llama3"),
        ("<|header_start|>assistant<|header_end|>", "llama4"),
        ("plain", None),
        ("", None),
    ],
)
def test_detection_asks_the_families_in_rank_order(template: str, expected: str | None) -> None:
    found = detect_family(template)
    assert (None if found is None else found.name) == expected


def test_forced_calls_open_in_each_family_format() -> None:
    assert family("hermes").forced_call(None) == "<tool_call>\n"
    assert family("hermes").forced_call("f") == '<tool_call>\n{"name": "f", "arguments": '
    assert family("mistral").forced_call("f") == '[TOOL_CALLS][{"name": "f", "arguments": '
    assert family("llama3").forced_call("f") == '<|python_tag|>{"name": "f", "parameters": '
    assert family("llama4").forced_call("f") == "<|python_start|>[f("
    assert family("qwen3-coder").forced_call("f") == "<tool_call>\n<function=f>\n"
    assert family("glm-4.5").forced_call("f") == "<tool_call>f\n"
    assert family("glm-4.5").forced_call(None) == "<tool_call>"
    assert (
        family("harmony").forced_call("f")
        == "<|channel|>commentary to=functions.f <|constrain|>json<|message|>"
    )
    assert (
        family("deepseek-v3").forced_call("f")
        == "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n"
    )
    assert (
        family("kimi-k2").forced_call("f")
        == "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
    )
    assert family("deepseek-r1").forced_call("f") is None  # no tool-call region


def test_a_new_family_is_one_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry's discovery reads every public module of the package: a new file is a new
    family (here in a package of its own, so the real registry is untouched)."""
    pkg = tmp_path / "more_families"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_shared.py").write_text("X = 1\n")  # private modules are not families
    (pkg / "acme.py").write_text(
        textwrap.dedent(
            """
            from rxstream.channels import RouteSpec, Region
            from rxstream.families import Family

            FAMILY = Family(
                "acme",
                RouteSpec((Region("reasoning", ("<<",), (">>",)),), name="acme"),
                signature=lambda t: "<<" in t,
            )
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    found, by_name = discover("more_families")
    assert [f.name for f in found] == ["acme"] and by_name["acme"] is found[0]
    assert found[0].detects("a << b") and not found[0].detects("plain")
    (pkg / "broken.py").write_text("NOT_A_FAMILY = 1\n")
    sys.modules.pop("more_families", None)
    with pytest.raises(TypeError, match="must define FAMILY"):
        discover("more_families")


def test_two_hermes_calls_in_one_region_may_be_separated_by_a_comma() -> None:
    """``<tool_call>{...}, {...}</tool_call>``: two calls (the generic JSON format takes a comma
    between call objects, as whitespace)."""
    import reactivex as rx
    from reactivex import operators as ops

    from rxstream.channels import ToolCallEnd
    from rxstream.operators import route, tool_calls

    spec = family("hermes").spec
    text = '<tool_call>\n{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}\n</tool_call>'
    for chunks in ([text], list(text)):
        out = (
            rx.from_iterable(chunks)
            .pipe(route(spec), tool_calls(format=spec.tool_format), ops.to_list())
            .run()
        )
        assert [(e.name, e.arguments) for e in out if isinstance(e, ToolCallEnd)] == [
            ("a", {}),
            ("b", {"x": 1}),
        ]
