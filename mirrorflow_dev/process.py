"""Processes and ports of the local tooling, written once: free ports, waiting, child servers, stopping groups.

Every local server mirrorflow's tooling starts (the Kafka brokers, S3Proxy, the
schema registry, the Spark Connect server), the demo and the test fixtures
need the same few things: a loopback port nobody uses, a wait for a condition
with a deadline (never a bare sleep), whether a pid or a process group still
runs, a stop that escalates from a polite signal to SIGKILL, and the Linux
request that a server die with the process that started it (a killed test
session leaves nothing behind). :class:`LocalServerProcess` is the base of a
server that is one child process.
"""

from __future__ import annotations

import ctypes
import os
import random
import secrets
import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

#: Every local server binds loopback only.
HOST = "127.0.0.1"
#: Where :func:`free_port` looks: below Linux's ephemeral range (32768-60999), so outgoing
#: client connections never sit on the ports it hands out.
AUTO_PORT_RANGE = (20000, 32000)

_pause = threading.Event()  # never set: .wait(t) paces a poll loop, it does not synchronise anything
_port_lock = threading.Lock()
_ports_handed_out: set[int] = set()


class NoFreePortError(RuntimeError):
    """No bindable port was found in :data:`AUTO_PORT_RANGE`."""


class WaitTimeout(TimeoutError):
    """:func:`wait_until`'s condition did not hold before its deadline."""


# --------------------------------------------------------------------------- ports


def port_free(port: int) -> bool:
    """Whether ``port`` on loopback can be bound now (a port in TIME_WAIT counts as free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # The servers (Kafka, Jetty) bind with SO_REUSEADDR too.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A currently bindable loopback port that this process has not handed out before."""
    rng = random.Random()
    with _port_lock:
        for _ in range(2000):
            port = rng.randrange(*AUTO_PORT_RANGE)
            if port not in _ports_handed_out and port_free(port):
                _ports_handed_out.add(port)
                return port
    raise NoFreePortError(f"no free port found in {AUTO_PORT_RANGE}")


def port_accepts(port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on ``port`` of loopback."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


# --------------------------------------------------------------------------- waiting


def wait_until(what: str, check: Callable[[], T], timeout: float, interval: float = 1.0,
               detail: Callable[[], str] | None = None) -> T:
    """Poll ``check`` until it returns something truthy, and return that; past ``timeout``, :class:`WaitTimeout`.

    The error names ``what``; ``detail`` is called once the time is up, and what it
    says follows the message (a log tail).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            extra = f"\n{detail()}" if detail else ""
            raise WaitTimeout(f"timed out after {timeout:.0f}s waiting for {what}{extra}")
        _pause.wait(interval)


def until_answered(what: str, call: Callable[[], T], transient: Callable[[Exception], bool], timeout: float,
                   interval: float = 0.5) -> T:
    """``call()``'s answer, asked again while it raises an error ``transient`` accepts, until ``timeout``."""
    answer: list[T] = []

    def answered() -> bool:
        try:
            answer.append(call())
            return True
        except Exception as exc:
            if not transient(exc):
                raise
            return False

    wait_until(what, answered, timeout, interval=interval)
    return answer[0]


# --------------------------------------------------------------------------- pids and process groups


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie (an ended process its parent has not reaped yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def wait_pid_exit(pid: int, timeout: float) -> bool:
    """Wait until a process that is *not* our child exits; True if it did within ``timeout``.

    Uses a pidfd (readable when the process terminates), so it is an event wait rather than
    polling; falls back to short polls on kernels without pidfd_open.
    """
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except (AttributeError, OSError):
        deadline = time.monotonic() + timeout
        while pid_alive(pid):
            if time.monotonic() >= deadline:
                return False
            _pause.wait(0.05)
        return True
    try:
        readable, _, _ = select.select([fd], [], [], max(timeout, 0.0))
        return bool(readable) or not pid_alive(pid)
    finally:
        os.close(fd)


def group_alive(pgid: int, *, zombies: bool = True) -> bool:
    """Whether process group ``pgid`` still has a member.

    With ``zombies=False`` only a running member counts: a zombie waits for its
    parent to reap it and runs nothing (a group whose leader is our own unreaped
    child would otherwise never end).
    """
    if zombies:
        try:
            os.killpg(pgid, 0)
            return True
        except OSError:
            return False
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def leader_running(pgid: int) -> bool:
    """Whether the process leading group ``pgid`` (its pid is the group id) still runs (a zombie does not)."""
    try:
        return Path(f"/proc/{pgid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def stop_group(pgid: int, steps: Sequence[tuple[signal.Signals, float]], *, alive: Callable[[], bool] | None = None,
               interval: float = 0.5, first_done: Callable[[], bool] | None = None) -> bool:
    """Signal process group ``pgid`` step by step until it has ended; True once it has, False if it outlived all.

    Each step sends its signal to the group, then gives it up to its grace (seconds)
    to end before the next one. ``alive`` says whether it still runs (default:
    :func:`group_alive`); a group that is gone already counts as ended.
    ``first_done`` ends the first step's grace early: a leader that stops its own
    children on Ctrl-C has done all it will once it exits (``airflow standalone``
    leaves idle executor workers behind), so what is left gets the next signal at once.
    """
    still_running = alive or (lambda: group_alive(pgid))
    for step, (sig, grace) in enumerate(steps):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + grace
        while still_running() and time.monotonic() < deadline:
            if step == 0 and first_done is not None and first_done():
                break
            _pause.wait(interval)
        if not still_running():
            return True
    return False


# --------------------------------------------------------------------------- secrets on disk


def write_secret_file(path: Path, text: str, owner: str | None = None) -> None:
    """``text`` into ``path``, readable by its owner only from the first byte on (``owner``: a user to give it to)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    path.chmod(0o600)
    if owner:
        import pwd

        user = pwd.getpwnam(owner)
        os.chown(path, user.pw_uid, user.pw_gid)


def stored_secret(path: Path) -> str:
    """A secret generated once into a 0600 file (``path``) and read from it after; never printed."""
    try:
        stored = path.read_text().strip()
    except FileNotFoundError:
        stored = ""
    if not stored:
        stored = secrets.token_urlsafe(24)
        write_secret_file(path, stored + "\n")
    return stored


# --------------------------------------------------------------------------- one child server


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to stop the server when the process that started it dies (a killed test session)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class LocalServerProcess:
    """Base of a local server that is one child process.

    Subclasses set ``log_path``, start ``_proc`` in ``start()`` (deciding themselves
    when the server is ready) and return ``self``; this holds the rest: the pid,
    whether it runs, the tail of its log for error messages, a stop that escalates
    from SIGTERM to SIGKILL, and the context-manager protocol.
    """

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

    def wait(self) -> int | None:
        """Block until the server exits (a CLI running it in the foreground); its exit code, None if not started."""
        return self._proc.wait() if self._proc is not None else None

    def serve(self) -> None:
        """Run in the foreground for a CLI: wait until the server exits; Ctrl-C stops it."""
        try:
            self.wait()
        except KeyboardInterrupt:
            self.stop()

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
