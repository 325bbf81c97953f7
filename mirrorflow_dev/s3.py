"""A real S3-compatible server on loopback (S3Proxy), built from Maven Central, for tests and the demo.

The archive writes Parquet objects with boto3, and the project's rule is real
parts over fakes: an in-process mock of S3 would agree with whatever boto3
sends, so it could not catch a wrong signature, a path-style mistake or a
checksum header a server refuses. S3Proxy (``org.gaul:s3proxy``) is a real
S3 API server in Java, published to Maven Central with its dependencies, so
it is fetched exactly like Apache Kafka (:mod:`mirrorflow_dev.maven`) and
run as one JVM process with the jclouds ``filesystem-nio2`` backend: every
top-level directory of ``data_dir`` is a bucket, every file an object.

Why 4.1.0 plus a pinned ``jackson-annotations``: it is the newest release and
the first line that accepts what boto3 >= 1.36 sends by default (CRC checksum
headers and ``aws-chunked`` trailers; 2.6.0 answers ``NotImplemented`` to
them). Its POM resolves ``jackson-annotations`` to 2.18 (Maven's nearest-wins
picks the Jackson 2 line's version), but its Jackson 3 ``jackson-databind``
needs 2.22 (the version Jackson's 3.2 BOM names), so the server dies at start
with ``NoClassDefFoundError: JsonSerializeAs`` unless 2.22 is declared
directly. It runs on Java 17.

Other quirks found on the way, handled here:

- the legacy ``filesystem`` backend lists directory placeholders
  (``a/b/``) as objects; ``filesystem-nio2`` does not, but insists on
  ``jclouds.identity``/``jclouds.credential`` (unused by a local backend);
- without a logback configuration the server logs every Jetty event at DEBUG
  (thousands of lines per request), so a small one is written next to the log;
- bucket names must be 3-63 characters (``InvalidBucketName`` otherwise).

The access secret is written only to a ``0600`` properties file in the run
directory (never on the command line, where ``ps`` would show it) and never
appears in a ``repr`` or a log line.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from mirrorflow.cache_root import default_cache_root
from mirrorflow_dev.maven import Artifact, FetchError, cached_jars, fetch_jars, find_java
from mirrorflow_dev.process import HOST, LocalServerProcess, die_with_parent, free_port, port_free

Progress = Callable[[str], None]

S3PROXY_VERSION = "4.1.0"
#: What jackson-databind 3.2 (used by S3Proxy 4.1.0) needs; see the module docstring.
JACKSON_ANNOTATIONS_VERSION = "2.22"
MAIN_CLASS = "org.gaul.s3proxy.Main"
DEFAULT_REGION = "us-east-1"
_pause = threading.Event()  # never set: .wait(t) paces the readiness probe

_LOGBACK = """<configuration>
  <!-- written by mirrorflow_dev.s3: S3Proxy logs every Jetty event at DEBUG without one -->
  <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{36} - %msg%n</pattern></encoder>
  </appender>
  <logger name="org.gaul.s3proxy" level="INFO"/>
  <root level="WARN"><appender-ref ref="OUT"/></root>
</configuration>
"""


class S3ServerError(RuntimeError):
    """The local S3 server could not be started (it exited, or never answered)."""


def _stderr(message: str) -> None:
    print(f"[mirrorflow_dev.s3] {message}", file=sys.stderr, flush=True)


def artifacts(version: str = S3PROXY_VERSION) -> list[Artifact]:
    """The Maven artifacts of a runnable S3Proxy, the server first."""
    return [Artifact("org.gaul", "s3proxy", version),
            Artifact("com.fasterxml.jackson.core", "jackson-annotations", JACKSON_ANNOTATIONS_VERSION)]


def home(version: str = S3PROXY_VERSION, cache_root: Path | None = None) -> Path:
    """``<cache>/s3proxy/<version>``: ``libs/`` plus a marker written once a fetch completed."""
    return (cache_root or default_cache_root()) / "s3proxy" / version


def fetch(version: str = S3PROXY_VERSION, *, cache_root: Path | None = None, mvn: str | None = None,
          progress: Progress = _stderr) -> Path:
    """Resolve S3Proxy's jars into ``<cache>/s3proxy/<version>/libs`` once; the folder's path."""
    return fetch_jars(f"S3Proxy {version}", home(version, cache_root), artifacts(version),
                      [f"s3proxy-{version}.jar"], mvn=mvn, progress=progress)


class LocalS3(LocalServerProcess):
    """One S3Proxy process on ``127.0.0.1:<port>`` storing objects under ``data_dir``.

    Path-style addressing only (no virtual-host buckets: a loopback address has
    no bucket subdomains), AWS signature v2 or v4 with one access key.
    ``run_dir`` (default: ``<data_dir>.s3proxy``, beside the data, because every
    directory inside ``data_dir`` is a bucket) holds the properties file, the
    logback configuration and ``s3proxy.log``.

    A server meant to outlive whoever started it (the demo's) passes
    ``die_with_parent=False`` and ``start_new_session=True``: in a session and
    process group of its own, a Ctrl-C or hang-up aimed at the starter's
    terminal does not reach it either; it is stopped by its pid.
    """

    def __init__(self, port: int | None = None, data_dir: Path | str = ".", access_key: str = "mirrorflow",
                 secret_key: str = "mirrorflow-secret", *, run_dir: Path | None = None,
                 version: str = S3PROXY_VERSION, cache_root: Path | None = None,
                 die_with_parent: bool = True, start_new_session: bool = False) -> None:
        self.port = port or free_port()
        self.data_dir = Path(data_dir).resolve()
        self.access_key = access_key
        self._secret_key = secret_key
        self.run_dir = Path(run_dir) if run_dir else self.data_dir.with_name(self.data_dir.name + ".s3proxy")
        self.version = version
        self.cache_root = cache_root
        self.die_with_parent = die_with_parent
        self.start_new_session = start_new_session
        self.log_path = self.run_dir / "s3proxy.log"
        self.region = DEFAULT_REGION
        self._proc: subprocess.Popen | None = None

    def __repr__(self) -> str:
        return (f"LocalS3(endpoint_url={self.endpoint_url!r}, data_dir={str(self.data_dir)!r}, "
                f"access_key={self.access_key!r}, secret_key=***)")

    @property
    def secret_key(self) -> str:
        return self._secret_key

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def _write_config(self) -> Path:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "logback.xml").write_text(_LOGBACK)
        props = self.run_dir / "s3proxy.properties"
        lines = [
            f"s3proxy.endpoint={self.endpoint_url}",
            "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={self.access_key}",
            f"s3proxy.credential={self._secret_key}",
            "jclouds.provider=filesystem-nio2",
            f"jclouds.filesystem.basedir={self.data_dir}",
            # filesystem-nio2 refuses to start without these; a local directory ignores them
            "jclouds.identity=local",
            "jclouds.credential=local",
        ]
        fd = os.open(props, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write("\n".join(lines) + "\n")
        os.chmod(props, 0o600)  # an older file keeps its mode on O_TRUNC
        return props

    def start(self, timeout: float = 60.0) -> LocalS3:
        """Start the server and return once it answers HTTP on its port.

        Raises :class:`S3ServerError` with the tail of the server's log if it exits
        or does not answer within ``timeout`` seconds (then it is stopped).
        """
        if self.is_running():
            return self
        libs = cached_jars(home(self.version, self.cache_root), artifacts(self.version))
        if libs is None:
            raise FetchError(f"S3Proxy {self.version} is not fetched (no complete {home(self.version, self.cache_root)}"
                             "): run `python -m mirrorflow_dev.s3 fetch` (scripts/bootstrap.sh does)")
        if not port_free(self.port):
            # checked first: otherwise the readiness probe would be answered by whoever holds the port
            raise S3ServerError(f"cannot start S3Proxy on {HOST}:{self.port}: the port is already in use")
        props = self._write_config()
        cmd = [find_java(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               f"-Dlogback.configurationFile={self.run_dir / 'logback.xml'}",
               "-cp", str(libs / "*"), MAIN_CLASS, "--properties", str(props)]
        log = self.log_path.open("w")
        try:
            self._proc = subprocess.Popen(cmd, cwd=self.run_dir, stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL,
                                          preexec_fn=die_with_parent if self.die_with_parent else None,
                                          start_new_session=self.start_new_session)
        finally:
            log.close()  # the child has its own descriptor
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                self._proc = None
                raise S3ServerError(f"S3Proxy on port {self.port} exited with {code} during start-up; "
                                    f"last lines of {self.log_path}:\n{self.log_tail()}")
            if self.ready():
                return self
            _pause.wait(0.1)
        self.stop()
        raise S3ServerError(f"S3Proxy did not answer on {self.endpoint_url} within {timeout:.0f}s; "
                            f"last lines of {self.log_path}:\n{self.log_tail()}")

    def ready(self) -> bool:
        """True once the server answers HTTP at all (an anonymous request gets 403, which counts)."""
        try:
            with urllib.request.urlopen(f"{self.endpoint_url}/", timeout=2):
                return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mirrorflow_dev.s3", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_fetch = sub.add_parser("fetch", help="resolve S3Proxy's jars into the cache (no-op when cached)")
    p_fetch.add_argument("--cache-dir", type=Path, default=None, help="default: <repo>/.cache")
    run = sub.add_parser("run", help="run one server in the foreground (the secret comes from "
                                     "$MIRRORFLOW_S3_SECRET_KEY, default 'mirrorflow-secret')")
    run.add_argument("--port", type=int, default=19000)
    run.add_argument("--data-dir", type=Path, required=True)
    run.add_argument("--access-key", default="mirrorflow")
    args = parser.parse_args(argv)
    if args.command == "fetch":
        print(f"S3Proxy: {fetch(cache_root=args.cache_dir, progress=print)}")
        return 0
    fetch(progress=print)
    server = LocalS3(args.port, args.data_dir, args.access_key,
                     os.environ.get("MIRRORFLOW_S3_SECRET_KEY", "mirrorflow-secret")).start()
    print(f"S3 on {server.endpoint_url} (path-style, region {server.region}, access key {server.access_key}); "
          f"data in {server.data_dir}; Ctrl-C stops it")
    server.serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
