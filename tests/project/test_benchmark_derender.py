"""The derender benchmark runs and measures what it says: every stream's text reaches its events."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_derender_rows_cover_every_token(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from derender import derender_rows  # type: ignore[import-not-found]
    from gateway import tokenizer_dir  # type: ignore[import-not-found]

    tok_dir, _ = tokenizer_dir(tmp_path)
    rows = derender_rows(tok_dir / "tokenizer.json", [1, 3], [16])
    assert [(r.pipeline, r.streams, r.tokens) for r in rows] == [
        ("text", 1, 16),
        ("text", 3, 48),
        ("routed", 1, 16),
        ("routed", 3, 48),
    ]
    from gateway import Script  # type: ignore[import-not-found]
    from tokenizers import Tokenizer

    script = Script(tok_dir / "tokenizer.json")
    text = Tokenizer.from_file(str(tok_dir / "tokenizer.json")).decode(script.ids[:16])
    for r in rows:  # every stream's whole text went out as events (the prose's start has no stop)
        assert r.chars_out == r.streams * len(text)
        assert r.bytes_out > r.chars_out and r.us_per_token > 0
    sys.path.remove(str(ROOT / "benchmarks"))
