"""Progress on stderr for pulls and conversions: one-line messages, and a bar that redraws in place
on a terminal. When stderr is not a terminal (a file, a CI log) the bar is a few plain lines
instead -- its start, 25%, 50%, 75% and the end -- so a log holds no ``\\r`` redraws."""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["Progress"]

_WIDTH = 30


class Progress:
    """``enabled``: print anything at all; ``stream``: where (default stderr); ``tty``: redraw
    bars in place (default: whether ``stream`` is a terminal)."""

    def __init__(self, enabled: bool, stream: TextIO | None = None, *, tty: bool | None = None) -> None:
        self.enabled = enabled
        self.stream = stream or sys.stderr
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            tty = bool(isatty()) if callable(isatty) else False
        self.tty = tty
        self._bar = False
        self._quarter: dict[str, int] = {}  # label -> the last quarter printed (plain lines)

    def say(self, message: str) -> None:
        if self.enabled:
            self._end_bar()
            print(message, file=self.stream, flush=True)

    def bar(self, label: str, done: int, total: int) -> None:
        if self.enabled:
            if not self.tty:
                self._plain(label, done, total, f"{done}/{total}")
                return
            filled = _WIDTH * done // max(total, 1)
            print(
                f"\r{label} [{'#' * filled}{'.' * (_WIDTH - filled)}] {done}/{total}",
                end="",
                file=self.stream,
                flush=True,
            )
            self._bar = True

    def bytes_bar(self, label: str, done: int, total: int | None) -> None:
        """A bar of bytes in MB (``total`` None: unknown size, the count alone)."""
        if not self.enabled:
            return
        mb = 1e6
        if not self.tty:
            if total:
                self._plain(label, min(done, total), total, f"{done / mb:.1f}/{total / mb:.1f} MB")
            return
        if total:
            filled = _WIDTH * min(done, total) // total
            shown = f"[{'#' * filled}{'.' * (_WIDTH - filled)}] {done / mb:.1f}/{total / mb:.1f} MB"
        else:
            shown = f"{done / mb:.1f} MB"
        print(f"\r{label} {shown}", end="", file=self.stream, flush=True)
        self._bar = True

    def _plain(self, label: str, done: int, total: int, shown: str) -> None:
        """A plain line when the bar reaches a new quarter (0 at its first call, 4 at the end)."""
        quarter = 4 * done // max(total, 1)
        if quarter <= self._quarter.get(label, -1):
            return
        self._quarter[label] = quarter
        print(f"{label}: {25 * quarter}% ({shown})", file=self.stream, flush=True)

    def _end_bar(self) -> None:
        if self._bar:
            print(file=self.stream, flush=True)
            self._bar = False

    def close(self) -> None:
        """End an unfinished bar's line."""
        self._end_bar()
