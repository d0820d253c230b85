"""The operators type their items: ``Any`` stays rare in operators/ (tests/layers.py's check_any)."""

from __future__ import annotations

from pathlib import Path

from tests.layers import ANY_PER_1000_LINES, any_density, check_any

ROOT = Path(__file__).resolve().parents[2]


def test_the_operators_keep_any_rare() -> None:
    ok, line = check_any(ROOT)
    assert ok, line


def test_the_count_is_of_the_word(tmp_path: Path) -> None:
    (tmp_path / "operators").mkdir()
    (tmp_path / "operators" / "_x.py").write_text(
        "from typing import Any\n\ndef f(x: Any) -> AnyStr | Anything:\n    return x\n", encoding="utf-8"
    )
    assert any_density(tmp_path) == (2, 4)
    ok, line = check_any(tmp_path)
    assert not ok and line.startswith("operators/: 2 Any in 4 lines, 500.0 per 1,000")
    assert ANY_PER_1000_LINES == 30
