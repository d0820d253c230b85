"""Progress on stderr for pulls and conversions: one-line messages and a bar that redraws in place."""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    def __init__(self, enabled: bool, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self._bar = False

    def say(self, message: str) -> None:
        if self.enabled:
            self._end_bar()
            print(message, file=self.stream, flush=True)

    def bar(self, label: str, done: int, total: int) -> None:
        if self.enabled:
            width = 30
            filled = width * done // max(total, 1)
            print(
                f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}",
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
        if total:
            width = 30
            filled = width * min(done, total) // total
            shown = f"[{'#' * filled}{'.' * (width - filled)}] {done / mb:.1f}/{total / mb:.1f} MB"
        else:
            shown = f"{done / mb:.1f} MB"
        print(f"\r{label} {shown}", end="", file=self.stream, flush=True)
        self._bar = True

    def _end_bar(self) -> None:
        if self._bar:
            print(file=self.stream, flush=True)
            self._bar = False

    def close(self) -> None:
        """End an unfinished bar's line."""
        self._end_bar()
