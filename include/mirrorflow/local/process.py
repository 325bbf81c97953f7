"""What every local server that mirrorflow starts shares (S3Proxy, the Spark Connect server): one child process.

Each server class starts its own command and decides when it is ready; this
module holds the rest, once: the process handle, its pid, whether it runs, the
tail of its log for error messages, a stop that escalates from SIGTERM to
SIGKILL, the context-manager protocol, and the Linux request that a server die
with the process that started it (a killed test session leaves nothing behind).
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
from pathlib import Path
from typing import Any


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to stop the server when the process that started it dies (a killed test session)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class LocalServerProcess:
    """Base of a local server: subclasses set ``log_path``, start ``_proc`` in ``start()`` and return ``self``."""

    log_path: Path
    _proc: subprocess.Popen | None = None
    #: Lines of the log that an error message quotes.
    log_tail_lines = 30

    def start(self) -> Any:  # pragma: no cover - every subclass has its own
        raise NotImplementedError

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int | None = None) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"
        return "\n".join(text.splitlines()[-(lines or self.log_tail_lines):])

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout``); a no-op if it is not running."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
