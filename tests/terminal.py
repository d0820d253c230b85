"""Drive a command through a real pseudo-terminal (it is the command's controlling terminal, so
Ctrl-C typed there is a SIGINT and Ctrl-D an end of input), for tests."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import time
from collections.abc import Sequence

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal:
    """A child process on a pseudo-terminal: :meth:`send` types, :meth:`expect` waits for output."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: the pty is its controlling terminal
            try:
                os.execve(argv[0], list(argv), {**os.environ, **(env or {}), "TERM": "dumb"})
            finally:
                os._exit(127)
        self.pid = pid
        self.fd = fd
        self.output = ""  # everything shown so far, line ends as \n, no colour codes
        self.raw = ""  # everything shown so far, as the terminal received it
        self._seen = 0
        self.status: int | None = None

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # the child closed the terminal (EIO)
            return False
        if not data:
            return False
        self.raw += data.decode("utf-8", "replace")
        self.output += _ANSI.sub("", data.decode("utf-8", "replace")).replace("\r\n", "\n")
        return True

    def expect(self, text: str, timeout: float = 60) -> str:
        """Wait until ``text`` appears after what earlier calls matched; return the output between."""
        deadline = time.monotonic() + timeout
        while True:
            at = self.output.find(text, self._seen)
            if at >= 0:
                before = self.output[self._seen : at]
                self._seen = at + len(text)
                return before
            if time.monotonic() > deadline or not self._read(0.1):
                raise AssertionError(f"did not see {text!r}; the terminal shows:\n{self.output[-3000:]}")

    def wait(self, timeout: float = 30) -> int:
        """The exit status (128+N for a signal), reading what is left on the way."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._read(0.05)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                if self.status < 0:
                    self.status = 128 - self.status
                return self.status
        raise AssertionError(f"still running; the terminal shows:\n{self.output[-3000:]}")

    def close(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)
