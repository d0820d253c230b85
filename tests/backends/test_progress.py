"""The pull's progress: a bar redrawn in place on a terminal, a few plain lines in a log."""

from __future__ import annotations

import io

from rxstream.backends.convert._progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_a_few_plain_lines() -> None:
    log = io.StringIO()
    p = Progress(True, log)
    p.say("rxstream: downloading x.whl (~93 MB)")
    for done in range(0, 93_000_001, 64 * 1024):
        p.bytes_bar("rxstream: x.whl", done, 93_000_000)
    p.bytes_bar("rxstream: x.whl", 93_000_000, 93_000_000)
    for layer in range(31):
        p.bar("rxstream: layers", layer, 30)
    p.close()
    text = log.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert lines[0] == "rxstream: downloading x.whl (~93 MB)"
    assert [line.split(": ")[-1].split()[0] for line in lines[1:]] == ["0%", "25%", "50%", "75%", "100%"] * 2
    assert lines[5] == "rxstream: x.whl: 100% (93.0/93.0 MB)"
    assert max(len(line) for line in lines) < 80


def test_a_terminal_gets_a_bar_redrawn_in_place() -> None:
    term = Terminal()
    p = Progress(True, term)
    for done in range(0, 11):
        p.bar("rxstream: layers", done, 10)
    p.say("done")
    text = term.getvalue()
    assert text.count("\r") == 11 and text.endswith("[##############################] 10/10\ndone\n")


def test_disabled_prints_nothing() -> None:
    log = io.StringIO()
    p = Progress(False, log)
    p.say("x")
    p.bar("y", 1, 2)
    p.bytes_bar("z", 1, 2)
    assert log.getvalue() == ""
