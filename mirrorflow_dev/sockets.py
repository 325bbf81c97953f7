"""This process's TCP connections to given ports, read from the kernel: how many a piece of code opens.

A client library can say how often it connected, but only while the client lives;
a client made and dropped per poll takes its counters with it. The kernel's socket
table does not: :class:`ConnectionWatch` samples ``/proc/net/tcp{,6}`` for the
sockets this process owns (``/proc/self/fd``) whose remote port is one of
``ports``, every ``interval`` seconds in a thread, and counts each distinct
connection (local port, remote port) it ever saw. A connection opened and closed
between two samples can be missed, so the count is a lower bound: a watch that
must show "no connection opened" samples often (a few milliseconds). Linux only.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

#: TCP states counted: ESTABLISHED, SYN_SENT (``include/net/tcp_states.h``).
_STATES = {"01", "02"}


def own_connections(ports: Iterable[int]) -> set[tuple[int, int]]:
    """``(local port, remote port)`` of this process's open TCP connections to ``ports`` now."""
    wanted = set(ports)
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            remote_port = int(remote.rsplit(":", 1)[1], 16)
            if state in _STATES and remote_port in wanted and inode in inodes:
                found.add((int(local.rsplit(":", 1)[1], 16), remote_port))
    return found


class ConnectionWatch:
    """Counts the distinct connections this process opens to ``ports`` while it runs (a context manager)."""

    def __init__(self, ports: Iterable[int], interval: float = 0.002) -> None:
        self.ports = set(ports)
        self.interval = interval
        self.seen: set[tuple[int, int]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="connection-watch", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.seen |= own_connections(self.ports)
            self._stop.wait(self.interval)

    def __enter__(self) -> ConnectionWatch:
        self.seen |= own_connections(self.ports)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.seen |= own_connections(self.ports)

    def opened_since(self, before: set[tuple[int, int]]) -> set[tuple[int, int]]:
        """Connections seen that were not in ``before`` (a snapshot from :func:`own_connections`)."""
        return self.seen - before
