"""Testing a pipeline with marble diagrams: what is emitted, and *when*.

    .venv/bin/python -m pytest examples/marble_testing.py      (as a test)
    .venv/bin/python examples/marble_testing.py                (shows a failure message)

One frame per token: ``-`` nothing, ``a`` a value (from the mapping), ``[text]`` a literal
multi-character value, ``(ab)`` several in one frame, ``|`` complete, ``#`` error; in
subscription diagrams ``^`` subscribe and ``!`` dispose.
"""

from __future__ import annotations

from rxstream.operators import replace, stop
from rxstream.testing import MarbleMismatch, MarbleTest


def test_stop_cancels_the_generator_at_the_deciding_frame() -> None:
    m = MarbleTest()
    tokens = m.cold("-[The]-[ end]-[.<]-[NL>]-[\n]-[User]-[: hi]-|")
    out = tokens.pipe(replace({"<NL>": " "}), stop("\nUser:"))
    m.expect(out, "-[The]-[ end]-[.]-[ ]-----|")
    m.expect_subscriptions(tokens, "^------------!")  # disposed at frame 13, when ": hi" decides


def test_subscriber_disposes_at_a_chosen_frame() -> None:
    m = MarbleTest()
    tokens = m.cold("-a-b-c-d-|")
    m.expect(tokens.pipe(replace({"c": "C"})), "-a-b-", dispose_at="-----!")
    m.expect_subscriptions(tokens, "^----!")


if __name__ == "__main__":
    m = MarbleTest()
    src = m.cold("-[Hel]-[lo <N]-[L> world]-|")
    try:
        m.expect(src.pipe(replace({"<NL>": "\n"})), "-[Hel]-[lo <N]-n-|", {"n": "\n world"})
    except MarbleMismatch as failure:
        print(failure)
