"""A cluster far away on loopback: a TCP proxy that adds round-trip time, and optionally caps bandwidth.

This machine's kernel has no ``netem``, so distance is made in user space. The
proxy listens on one port and forwards to one upstream address; every chunk it
reads waits half the round trip before it is written on, in each direction, so a
request and its answer take one round trip more, as over a WAN. A bandwidth cap
(bytes per second, per direction and connection) paces the writes.

A broker reached only through it must advertise the proxy's port
(``LocalCluster(advertised_port=...)``), or the clients would follow the metadata to
the broker's own port and be near again. ``python -m mirrorflow_dev.shaper
--listen 19192 --to 127.0.0.1:19092 --rtt-ms 100`` runs one by hand; :class:`Shaper`
runs one in a child process (it moves every byte: in the test's own process it
would take the copier's CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import IO

from mirrorflow_dev.process import wait_until

#: Bytes read at once: large enough that pacing costs few wake-ups, small enough to keep a cap smooth.
CHUNK = 64 * 1024


@dataclass(frozen=True)
class Shape:
    """What the proxy adds: ``rtt_s`` of round trip, and at most ``rate`` bytes/s each way (``None``: no cap)."""

    rtt_s: float = 0.0
    rate: float | None = None


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, shape: Shape) -> None:
    """Move one direction: each chunk held for half the round trip after it was read, then paced by the cap.

    A reset on either side ends the direction as an end of stream would: clients
    reset connections all the time (a closed consumer, a stopped broker), and that
    is no error of the proxy's.
    """
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async def read() -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(CHUNK):
                queue.put_nowait((loop.time() + shape.rtt_s / 2, data))
        queue.put_nowait((loop.time() + shape.rtt_s / 2, b""))

    async def write() -> None:
        free_at = loop.time()
        while True:
            due, data = await queue.get()
            await asyncio.sleep(max(0.0, due - loop.time()))  # the distance itself, not a wait for something
            if not data:
                break
            if shape.rate:
                free_at = max(free_at, loop.time()) + len(data) / shape.rate
            writer.write(data)
            await writer.drain()
            if shape.rate:
                await asyncio.sleep(max(0.0, free_at - loop.time()))
        writer.write_eof()

    reading = asyncio.create_task(read())
    try:
        with contextlib.suppress(OSError):
            await write()
    finally:
        reading.cancel()
        await asyncio.gather(reading, return_exceptions=True)


async def _serve(listen: int, upstream: tuple[str, int], shape: Shape) -> None:
    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*upstream)
        except OSError:
            client_writer.close()
            return
        for w in (client_writer, up_writer):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await asyncio.gather(_pipe(client_reader, up_writer, shape), _pipe(up_reader, client_writer, shape),
                                 return_exceptions=True)
        finally:
            for w in (client_writer, up_writer):
                w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", listen, reuse_address=True)
    async with server:
        await server.serve_forever()


def serve(listen: int, upstream: str, shape: Shape) -> None:
    """Run the proxy in this process until it is killed."""
    host, _, port = upstream.rpartition(":")
    asyncio.run(_serve(listen, (host, int(port)), shape))


class Shaper:
    """A shaping proxy in a child process: ``with Shaper(listen, upstream, Shape(rtt_s=0.1)):``."""

    def __init__(self, listen: int, upstream: str, shape: Shape, start_timeout: float = 30.0) -> None:
        self.listen, self.upstream, self.shape = listen, upstream, shape
        self.start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._errors: IO[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.listen}"

    def start(self) -> Shaper:
        args = [sys.executable, "-m", "mirrorflow_dev.shaper", "--listen", str(self.listen), "--to", self.upstream,
                "--rtt-ms", str(self.shape.rtt_s * 1000)]
        if self.shape.rate:
            args += ["--rate", str(self.shape.rate)]
        # Its stderr goes to a file, not a pipe: a pipe nobody reads fills up on a long run, and the proxy
        # then blocks on its next error line and stops accepting connections (the cluster looks down).
        self._errors = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self._errors)
        wait_until(f"the shaper on port {self.listen} to listen", self._listening, self.start_timeout, 0.1,
                   self._why)
        return self

    def _listening(self) -> bool:
        if self._proc is not None and self._proc.poll() is not None:
            raise RuntimeError(f"the shaper on port {self.listen} exited: {self._why()}")
        with socket.socket() as probe:
            probe.settimeout(1.0)
            return probe.connect_ex(("127.0.0.1", self.listen)) == 0

    def _why(self) -> str:
        if self._proc is None or self._proc.poll() is None or self._errors is None:
            return "still starting"
        self._errors.seek(0)
        return self._errors.read().decode(errors="replace")[-2000:]

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        self._proc = None
        if self._errors is not None:
            self._errors.close()
            self._errors = None

    def __enter__(self) -> Shaper:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mirrorflow_dev.shaper", description=__doc__.split("\n")[0])
    parser.add_argument("--listen", type=int, required=True, help="port on 127.0.0.1 to listen on")
    parser.add_argument("--to", required=True, help="upstream host:port (the broker's own listener)")
    parser.add_argument("--rtt-ms", type=float, default=0.0, help="round-trip time to add, in milliseconds")
    parser.add_argument("--rate", type=float, default=None, help="bytes per second each way and connection")
    args = parser.parse_args(argv)
    serve(args.listen, args.to, Shape(args.rtt_ms / 1000, args.rate))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
