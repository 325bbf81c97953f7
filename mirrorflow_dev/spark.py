"""Local Spark for development: the driver's class-data-sharing archive built, and a Spark Connect server.

``prepare`` builds the archive that :mod:`mirrorflow.spark.driver` hands a local
driver JVM (that module says why and where it lives): it runs a trivial job
whose JVM dumps its classes at exit, then proves the archive maps.
``make setup`` runs it once per machine.

:class:`LocalConnectServer` is the other way to a short micro-batch: a Spark
Connect server on loopback, started once, that every job of a ``spark_connect``
Airflow connection runs on (:mod:`mirrorflow.spark.run` says why). The tests,
the benchmarks and ``connect-server`` below start one.

    python -m mirrorflow_dev.spark prepare                        # build the archive if missing
    python -m mirrorflow_dev.spark connect-server --port 15002    # a Connect server in the foreground
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from mirrorflow.spark import C1_ONLY, archive_path
from mirrorflow_dev.process import LocalServerProcess, die_with_parent, free_port, port_accepts

_WARM_UP = """
from pyspark import SparkConf, SparkContext
sc = SparkContext(conf=SparkConf().setAppName("mirrorflow-class-archive"))
sc.setLogLevel("WARN")
sc.parallelize(range(8), 2).mapPartitions(lambda rows: [sum(rows)]).collect()
sc.stop()
"""


def prepare(cache_root: Path | None = None, *, force: bool = False) -> Path | None:
    """Build the archive by running a trivial local job whose JVM dumps its classes at exit."""
    path = archive_path(cache_root)
    if path is None:
        print("[mirrorflow_dev.spark] no pyspark or java here: no class archive", flush=True)
        return None
    if path.is_file() and not force:
        print(f"[mirrorflow_dev.spark] class archive is up to date: {path}", flush=True)
        return path
    import pyspark

    path.parent.mkdir(parents=True, exist_ok=True)
    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mirrorflow-cds-") as tmp:
        script = Path(tmp) / "warm_up.py"
        script.write_text(_WARM_UP, encoding="utf-8")
        # Renamed into place only once the JVM wrote it whole (same directory: the rename is atomic).
        partial = path.parent / f".{path.name}.{os.getpid()}.partial"
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
               "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}

        def run(java_options: str) -> subprocess.CompletedProcess:
            return subprocess.run([str(spark_submit), "--master", "local[2]",
                                   "--conf", "spark.ui.showConsoleProgress=false",
                                   "--conf", f"spark.driver.extraJavaOptions={java_options}", str(script)],
                                  env=env, capture_output=True, text=True, timeout=300)

        proc = run(f"-XX:ArchiveClassesAtExit={partial}")
        if proc.returncode == 0 and partial.is_file():
            # Prove it maps: -Xshare:on refuses to start on an archive it cannot use (a JVM
            # handed a damaged archive may crash instead of falling back, so none is kept).
            proc = run(f"-XX:SharedArchiveFile={partial} -Xshare:on {C1_ONLY}")
        if proc.returncode != 0 or not partial.is_file():
            partial.unlink(missing_ok=True)
            # Not fatal: every job still runs, only its start is slower.
            print(f"[mirrorflow_dev.spark] could not build the class archive (exit {proc.returncode}); "
                  f"Spark jobs start without it:\n{proc.stderr[-2000:]}", file=sys.stderr, flush=True)
            return None
        os.replace(partial, path)
    for stale in path.parent.glob("driver-*.jsa"):
        if stale != path:
            stale.unlink(missing_ok=True)
    print(f"[mirrorflow_dev.spark] class archive built in {time.monotonic() - started:.1f}s "
          f"({path.stat().st_size / 2**20:.0f} MiB): {path}", flush=True)
    return path


CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
_pause = threading.Event()  # never set: .wait(t) paces the readiness probe


class ConnectServerError(RuntimeError):
    """The local Spark Connect server did not start (the message carries its log's last lines)."""


class LocalConnectServer(LocalServerProcess):
    """A Spark Connect server on ``127.0.0.1:<port>`` with a ``local[N]`` master and this interpreter's workers.

    ``master`` puts it on a cluster instead (platform mode: a standalone master).

    Its Python workers run ``python`` (default: this interpreter), whose environment
    must have ``mirrorflow`` and confluent-kafka; they are kept between jobs, so a
    changed ``mirrorflow`` reaches them only after a restart of the server.
    ``spark.default.parallelism`` is set to the cores, which is how a Connect
    client learns how many tasks to pack the work into. Sessions stay open a day
    without use (Spark's default is an hour), so a schedule with long gaps still
    finds its session's workers warm.
    """

    def __init__(self, port: int | None = None, *, cores: int | None = None, run_dir: Path | str | None = None,
                 python: str | None = None, die_with_parent: bool = True, start_new_session: bool = False,
                 conf: dict[str, str] | None = None, master: str | None = None) -> None:
        self.port = port or free_port()
        self.cores = cores or os.cpu_count() or 1
        self.run_dir = Path(run_dir) if run_dir else Path(tempfile.mkdtemp(prefix="mirrorflow-connect-"))
        self.python = python or sys.executable
        self.die_with_parent = die_with_parent
        self.start_new_session = start_new_session
        self.conf = dict(conf or {})
        self.master = master or f"local[{self.cores}]"
        self.log_path = self.run_dir / "connect-server.log"
        self._proc: subprocess.Popen | None = None
        self.log_tail_lines = 40

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        import pyspark

        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.default.parallelism": str(self.cores),
            "spark.connect.session.manager.defaultSessionTimeout": "24h",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.pyspark.python": self.python,
            **self.conf,
        }
        spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
        return [str(spark_submit), "--master", self.master, "--class", CONNECT_SERVER_CLASS,
                "--name", "mirrorflow-connect", *[a for k, v in conf.items() for a in ("--conf", f"{k}={v}")],
                "spark-internal"]

    def start(self, timeout: float = 120.0) -> LocalConnectServer:
        """Start the server; return once it accepts connections on its port."""
        if self.is_running():
            return self
        if port_accepts(self.port):
            raise ConnectServerError(f"cannot start a Spark Connect server on 127.0.0.1:{self.port}: "
                                     "the port is in use")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYSPARK_PYTHON": self.python, "SPARK_LOCAL_IP": "127.0.0.1"}
        log = self.log_path.open("w")
        try:
            # spark-submit execs the server's JVM, so this pid is the server's.
            self._proc = subprocess.Popen(self.command(), cwd=self.run_dir, env=env, stdout=log,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          preexec_fn=die_with_parent if self.die_with_parent else None,
                                          start_new_session=self.start_new_session)
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                self._proc = None
                raise ConnectServerError(f"the Spark Connect server exited with {code} during start-up; "
                                         f"last lines of {self.log_path}:\n{self.log_tail()}")
            if port_accepts(self.port):
                return self
            _pause.wait(0.2)
        self.stop()
        raise ConnectServerError(f"the Spark Connect server did not listen on 127.0.0.1:{self.port} within "
                                 f"{timeout:.0f}s; last lines of {self.log_path}:\n{self.log_tail()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mirrorflow_dev.spark", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_prepare = sub.add_parser("prepare", help="build the driver's class archive if it is missing")
    p_prepare.add_argument("--force", action="store_true", help="build it again even if it exists")
    p_prepare.add_argument("--cache-dir", type=Path, default=None, help="default: <repo>/.cache")
    p_connect = sub.add_parser("connect-server", help="run a Spark Connect server on loopback in the foreground")
    p_connect.add_argument("--port", type=int, default=15002)
    p_connect.add_argument("--cores", type=int, default=None, help="local[N] (default: every core)")
    p_connect.add_argument("--run-dir", type=Path, default=Path(".run") / "spark-connect",
                           help="where its log goes (default: .run/spark-connect)")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.cache_dir, force=args.force)
        return 0
    server = LocalConnectServer(args.port, cores=args.cores, run_dir=args.run_dir).start()
    print(f"Spark Connect server on {server.url} (local[{server.cores}], Python workers: {server.python}); "
          f"log in {server.log_path}; Ctrl-C stops it", flush=True)
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
