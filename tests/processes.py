"""Every process command line seen on the machine while a block runs: where a secret must never show."""

from __future__ import annotations

import threading
from pathlib import Path


class CommandLines:
    """A thread reading ``/proc/*/cmdline`` (paced by an event) while the ``with`` block runs.

    ``seen`` holds them raw (arguments separated by NUL); :meth:`text` as one readable line each.
    """

    def __init__(self, interval: float = 0.05) -> None:
        self.seen: set[bytes] = set()
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for proc in Path("/proc").iterdir():
                if proc.name.isdigit():
                    try:
                        self.seen.add((proc / "cmdline").read_bytes())
                    except OSError:
                        pass
            self._stop.wait(self._interval)

    def text(self) -> list[str]:
        return [c.replace(b"\0", b" ").decode(errors="replace") for c in self.seen]

    def __enter__(self) -> CommandLines:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
