"""Real Apache Kafka brokers on loopback, without Docker: fetch, format, start, stop.

Tests and the demo need several *independent* Kafka clusters (mirroring copies between
clusters, so each must have its own cluster id, topics and group coordinator). Each
cluster here is one JVM running a combined broker+controller in KRaft mode
(``process.roles=broker,controller``) with a static single-voter quorum. The jars come
from Maven Central (``org.apache.kafka:kafka_2.13`` and friends), resolved by Maven
into ``<repo>/.cache/kafka/<version>/libs``; the main classes are ``kafka.Kafka``
(the server) and ``kafka.tools.StorageTool`` (``format``), which runs once per Kafka
release and set of features: later nodes copy the ``bootstrap.checkpoint`` it wrote,
kept in ``<version>/format-templates/``, and get a ``meta.properties`` of their own.

Layout of a run dir::

    <run_dir>/state.json            ports, pids, cluster ids (read by `status` / `stop`)
    <run_dir>/<name>/server.properties
    <run_dir>/<name>/log4j2.xml
    <run_dir>/<name>/server.log     everything the JVM printed (appended across restarts)
    <run_dir>/<name>/format.log     output of the storage format step (when it ran)
    <run_dir>/<name>/kafka.pid
    <run_dir>/<name>/data/          log.dirs (and the KRaft metadata log)

Python API: :class:`KafkaDistribution` (fetch), :class:`LocalCluster` (one broker:
start/stop/kill/wait_ready), :class:`LocalKafka` (several clusters, a context manager and
a ``Mapping`` of name -> cluster). CLI: ``python -m mirrorflow_dev.kafka
{fetch,start,stop,status}``; ``start`` detaches the brokers (new session) so they outlive
the command, which returns once every cluster answers metadata requests; ``start --secured``
starts them secured (:mod:`mirrorflow_dev.secured`; CA and certificates in ``<run_dir>/pki/``).

Synchronisation is always "wait for a condition with a deadline" (process exit via
``waitpid``/``pidfd``, a metadata answer), never a bare sleep.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirrorflow.cache_root import default_cache_root
from mirrorflow_dev.maven import (
    MVN_HINT,
    Artifact,
    FetchError,
    ToolMissingError,
    copy_dependencies,
    find_java,
    require_tool,
)
from mirrorflow_dev.process import HOST, NoFreePortError, free_port, pid_alive, port_accepts, port_free, wait_pid_exit
from mirrorflow_dev.secured import ADMIN_PRINCIPAL, BROKER_PRINCIPAL, SecuredListeners

__all__ = [
    "KAFKA_VERSION",
    "DEFAULT_BROKER_CONFIG",
    "BrokerStartError",
    "FetchError",
    "KafkaDistribution",
    "LocalCluster",
    "LocalKafka",
    "ToolMissingError",
    "reap_orphans",
    "main",
]

Progress = Callable[[str], None]

# 4.3.1: the newest release whose modules are all on Maven Central (4.4.0 has the broker
# but not kafka-tools / kafka-tools-api, which the broker pom and the benchmarks need).
KAFKA_VERSION = "4.3.1"
SCALA_BINARY = "2.13"
# Kafka 4.x logs through SLF4J 1.7 (its poms declare slf4j-api 1.7.36) and ships log4j2 with
# the SLF4J-1.x binding; the poms leave both out of the runtime scope, so we add them.
SLF4J_VERSION = "1.7.36"
LOG4J_VERSION = "2.25.5"
# kafka-tools (perf tools for the benchmarks) and kafka-tools-api must exist at the broker's
# version on Maven Central. Where a release lacks them (4.4.0 did when checked), map it to the
# newest release that has them; the broker never loads a kafka-tools-api class.
TOOLS_VERSION_FALLBACK: dict[str, str] = {"4.4.0": "4.3.1"}

SERVER_MAIN = "kafka.Kafka"
STORAGE_TOOL_MAIN = "kafka.tools.StorageTool"
DEFAULT_NAMES = ("c1", "c2", "c3", "c4")
DEFAULT_HEAP_MAX = "512m"
DEFAULT_HEAP_MIN = "256m"
DEFAULT_STARTUP_TIMEOUT = 120.0
DEFAULT_STOP_TIMEOUT = 30.0

# Settings that make a one-node cluster start fast and behave like a real one for clients:
# every internal topic with replication factor 1 (the defaults of 3 would leave the group,
# transaction and share coordinators unavailable forever), no auto-created topics (tests
# and the mirror create topics explicitly, and typos must fail), no initial rebalance delay.
DEFAULT_BROKER_CONFIG: dict[str, str] = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "10",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "10",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    # A broker that restarts after SIGKILL must wait for its previous registration's session to
    # expire before the controller lets it back in; the default (9 s) makes every crash test slow.
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "500",
    "delete.topic.enable": "true",
    # The log cleaner looks for work every second instead of every 15 s when idle, so a compacted
    # topic with a short segment.ms is compacted within seconds (what the compacted-topic tests wait for).
    "log.cleaner.backoff.ms": "1000",
}

#: The broker JVM's options besides heap and class path (the benchmarks' perf tools run with them too).
JVM_OPTIONS = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)

#: Brokers that share one machine with each other, Airflow and Spark (the demo, platform mode, the
#: tests) run lighter than Kafka's defaults: two request handlers and one network thread instead of
#: eight and three (each idle one wakes to poll), heartbeats every second and the controller's no-op
#: metadata record every 5 s instead of every 0.5 s (the session timeout stays 4 s), and the JIT's
#: first tier only, whose code is slower but whose compiles cost less than the second tier's at these
#: rates. benchmarks/local_brokers.py measures both ways (docs/benchmarks.md, "Local brokers"); the
#: benchmarks' own brokers keep Kafka's defaults.
SHARED_MACHINE_CONFIG: dict[str, str] = {"num.io.threads": "2", "num.network.threads": "1",
                                         "broker.heartbeat.interval.ms": "1000",
                                         "metadata.max.idle.interval.ms": "5000"}
SHARED_MACHINE_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:CICompilerCount=1")

#: A log4j2 configuration sending everything to stdout (``log_name`` and ``root_level`` are filled in).
LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!-- generated by mirrorflow_dev.kafka: everything goes to stdout, which is {log_name} -->
<Configuration status="WARN">
  <Appenders>
    <Console name="STDOUT" target="SYSTEM_OUT">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="{root_level}"><AppenderRef ref="STDOUT"/></Root>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Logger name="org.apache.kafka.common.config.AbstractConfig" level="WARN"/>
    <Logger name="state.change.logger" level="WARN"/>
  </Loggers>
</Configuration>
"""


def _stderr(message: str) -> None:
    print(f"[mirrorflow_dev.kafka] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- fetch


def kafka_artifacts(version: str, tools_version: str | None = None) -> list[Artifact]:
    """The Maven artifacts a runnable broker (plus the perf tools) needs, primary first."""
    tools = tools_version or TOOLS_VERSION_FALLBACK.get(version, version)
    # When the tools come from another release, keep that release's kafka-tools-api off the
    # broker's dependency edge so Maven cannot try (and fail) to resolve it at `version`.
    broker_exclusions = (("org.apache.kafka", "kafka-tools-api"),) if tools != version else ()
    return [
        Artifact("org.apache.kafka", f"kafka_{SCALA_BINARY}", version, broker_exclusions),
        Artifact("org.apache.kafka", "kafka-clients", version),
        Artifact("org.apache.kafka", "kafka-server", version),
        Artifact("org.apache.kafka", "kafka-storage", version),
        Artifact("org.slf4j", "slf4j-api", SLF4J_VERSION),
        Artifact("org.apache.logging.log4j", "log4j-api", LOG4J_VERSION),
        Artifact("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION),
        Artifact("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION),
        Artifact("org.apache.kafka", "kafka-tools", tools),
    ]


@dataclass(frozen=True)
class KafkaDistribution:
    """A fetched set of Kafka jars: ``home/libs/*.jar`` plus a marker proving the fetch completed."""

    version: str
    home: Path
    tools_version: str

    MARKER_NAME = ".fetched.json"

    @property
    def libs(self) -> Path:
        return self.home / "libs"

    @property
    def marker(self) -> Path:
        return self.home / self.MARKER_NAME

    @property
    def classpath(self) -> str:
        """A JVM classpath wildcard (the JVM expands ``dir/*`` to every jar in it)."""
        return str(self.libs / "*")

    @property
    def jars(self) -> list[Path]:
        return sorted(self.libs.glob("*.jar"))

    @staticmethod
    def home_for(version: str, cache_root: Path | None = None) -> Path:
        return (cache_root or default_cache_root()) / "kafka" / version

    @classmethod
    def cached(
        cls, version: str = KAFKA_VERSION, *, cache_root: Path | None = None, tools_version: str | None = None
    ) -> KafkaDistribution | None:
        """The distribution if a previous fetch of exactly this artifact set completed, else None.

        Trusts the marker only when it lists the same artifacts as asked for now and every jar
        it lists is still on disk, so a changed pin or a half-deleted cache triggers a refetch.
        """
        artifacts = kafka_artifacts(version, tools_version)
        home = cls.home_for(version, cache_root)
        dist = cls(version=version, home=home, tools_version=artifacts[-1].version)
        try:
            marker = json.loads(dist.marker.read_text())
        except (OSError, ValueError):
            return None
        if marker.get("artifacts") != [a.coordinate for a in artifacts]:
            return None
        if not all((dist.libs / jar).is_file() for jar in marker.get("jars", [])) or not marker.get("jars"):
            return None
        return dist

    @classmethod
    def fetch(
        cls,
        version: str = KAFKA_VERSION,
        *,
        cache_root: Path | None = None,
        tools_version: str | None = None,
        mvn: str | None = None,
        progress: Progress = _stderr,
    ) -> KafkaDistribution:
        """Return the cached distribution, fetching it with Maven first if needed.

        Idempotent and cheap when cached: the marker file is written only after Maven
        succeeded and the essential jars were checked, so an interrupted fetch is redone.
        A file lock makes concurrent fetches (two test sessions) wait for each other.
        """
        done = cls.cached(version, cache_root=cache_root, tools_version=tools_version)
        if done is not None:
            progress(f"Kafka {version}: cached in {done.libs} ({len(done.jars)} jars)")
            return done
        mvn_path = mvn or require_tool("mvn", MVN_HINT)
        home = cls.home_for(version, cache_root)
        home.mkdir(parents=True, exist_ok=True)
        with _file_lock(home / ".lock"):
            done = cls.cached(version, cache_root=cache_root, tools_version=tools_version)
            if done is not None:
                return done
            artifacts = kafka_artifacts(version, tools_version)
            dist = cls(version=version, home=home, tools_version=artifacts[-1].version)
            progress(f"Kafka {version}: fetching jars from Maven Central into {dist.libs} (first time only)")
            started = time.monotonic()
            partial = home / "libs.partial"
            shutil.rmtree(partial, ignore_errors=True)
            jars = copy_dependencies(artifacts, partial, work_dir=home / "maven", mvn=mvn_path, progress=progress)
            names = {j.name for j in jars}
            for needed in (f"kafka_{SCALA_BINARY}-{version}.jar", f"log4j-core-{LOG4J_VERSION}.jar"):
                if needed not in names:
                    raise FetchError(f"Maven did not deliver {needed} into {partial}; got {sorted(names)}")
            shutil.rmtree(dist.libs, ignore_errors=True)
            partial.rename(dist.libs)
            marker = {
                "version": version,
                "tools_version": dist.tools_version,
                "artifacts": [a.coordinate for a in artifacts],
                "jars": sorted(names),
                "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
            tmp = dist.marker.with_suffix(".tmp")
            tmp.write_text(json.dumps(marker, indent=2) + "\n")
            os.replace(tmp, dist.marker)
            size = sum(j.stat().st_size for j in dist.jars) / 2**20
            progress(
                f"Kafka {version}: {len(jars)} jars ({size:.0f} MiB) in {dist.libs}, "
                f"took {time.monotonic() - started:.1f}s"
            )
            return dist

    def java_command(
        self,
        main_class: str,
        *args: str,
        heap_max: str = DEFAULT_HEAP_MAX,
        heap_min: str = DEFAULT_HEAP_MIN,
        log4j_config: Path | None = None,
        jvm_options: Sequence[str] = (),
    ) -> list[str]:
        """A ``java`` command line running ``main_class`` on this distribution's classpath."""
        cmd = [find_java(), f"-Xmx{heap_max}", f"-Xms{heap_min}", *JVM_OPTIONS, *jvm_options]
        if log4j_config is not None:
            cmd.append(f"-Dlog4j2.configurationFile={log4j_config}")
        cmd += ["-cp", self.classpath, main_class, *args]
        return cmd


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- broker processes


class BrokerStartError(RuntimeError):
    """A broker did not become ready (it died, or the deadline passed); the message has its log tail."""


class PortInUseError(BrokerStartError):
    """An explicitly requested port is already taken by another process."""


def new_cluster_id() -> str:
    """A Kafka cluster id like ``Uuid.randomUuid()``: url-safe base64 of 16 random bytes, no padding.

    Generated here instead of running ``StorageTool random-uuid`` to save a JVM start per cluster;
    like Kafka, ids starting with '-' are avoided (they look like command-line flags).
    """
    while True:
        value = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not value.startswith("-"):
            return value


def _tail(path: Path, lines: int = 60) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            text = handle.read().decode(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


_START_BANNER = "===== mirrorflow: starting"
# Java exception lines without a log prefix: "org.x.FooException: message", "Caused by: ..."
_EXCEPTION_LINE = re.compile(r"^(Caused by: |[\w.$]+(Exception|Error)(: |$))")


def log_diagnosis(path: Path, lines: int = 40) -> str:
    """The ERROR/FATAL lines of the latest start in ``path``, then its last ``lines`` lines.

    A broker that fails logs the cause once and then pages of orderly shutdown; the tail alone
    would hide the cause, the error lines alone would hide the context.
    """
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 4 * 1024 * 1024))
            text = handle.read().decode(errors="replace")
    except OSError:
        return f"(no log at {path})"
    latest = text[text.rfind(_START_BANNER):] if _START_BANNER in text else text
    all_lines = latest.splitlines()
    errors = [ln for ln in all_lines if " ERROR " in ln or " FATAL " in ln or _EXCEPTION_LINE.match(ln)][:12]
    tail = all_lines[-lines:]
    parts = [f"last lines of {path}:", *tail]
    if errors:
        parts = [f"errors logged in {path}:", *errors, "", *parts]
    return "\n".join(parts)


def _quiet_admin(client: Mapping[str, Any]) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {
            **client,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 250,
            "socket.connection.setup.timeout.ms": 3000,
            # The broker may still be refusing connections; don't spam stderr while we wait.
            "log_level": 0,
        }
    )


# --------------------------------------------------------------------------- one cluster


class LocalCluster:
    """One single-node KRaft cluster (combined broker+controller) in its own directory.

    The object can be rebuilt from its directory (``LocalKafka.open``), so a CLI started in
    one process can be stopped from another: the pid file plus a check of
    ``/proc/<pid>/cmdline`` (must run ``kafka.Kafka`` with *this* config) identify the JVM
    without trusting a possibly recycled pid.
    """

    def __init__(
        self,
        name: str,
        directory: Path,
        port: int,
        controller_port: int,
        distribution: KafkaDistribution | None = None,
        *,
        config: Mapping[str, str] | None = None,
        heap_max: str = DEFAULT_HEAP_MAX,
        heap_min: str = DEFAULT_HEAP_MIN,
        auto_ports: bool = False,
        jvm_options: Sequence[str] = (),
        progress: Progress = _stderr,
        security: SecuredListeners | None = None,
        node_id: int = 1,
        quorum_voters: str | None = None,
        cluster_id: str | None = None,
        advertised_port: int | None = None,
    ) -> None:
        self.name = name
        #: The port clients are told to use instead of :attr:`port`: a shaping proxy's
        #: (:mod:`mirrorflow_dev.shaper`), so that every client of this cluster goes through it.
        self.advertised_port = advertised_port
        #: One node of a several-node cluster: its id, the quorum's voters (``id@host:port,...``) and the
        #: cluster id all its nodes are formatted with. The defaults make a one-node cluster.
        self.node_id = node_id
        self.quorum_voters = quorum_voters
        self.fixed_cluster_id = cluster_id
        self.directory = Path(directory).resolve()
        self.port = port
        self.controller_port = controller_port
        self.security = security
        self.distribution = distribution
        self.config = dict(config or {})
        self.heap_max = heap_max
        self.heap_min = heap_min
        self.auto_ports = auto_ports
        self.jvm_options = list(jvm_options)
        self.progress = progress
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.RLock()
        self._started_once = False
        self.last_exit_code: int | None = None
        self.last_start_seconds: float | None = None

    def __repr__(self) -> str:
        return f"LocalCluster({self.name!r}, bootstrap={self.bootstrap!r}, pid={self.pid})"

    @property
    def secured(self) -> bool:
        return self.security is not None

    @property
    def ssl_bootstrap(self) -> str:
        """The mutual-TLS listener of a secured cluster (the principal is the certificate's CN)."""
        if self.security is None:
            raise ValueError(f"cluster {self.name} is not secured: it has no TLS listener")
        return f"{HOST}:{self.security.ssl_port}"

    # -- where things are
    @property
    def bootstrap(self) -> str:
        """Where clients connect: the advertised port (a shaping proxy) when there is one."""
        return f"{HOST}:{self.advertised_port or self.port}"

    @property
    def own_bootstrap(self) -> str:
        """The broker's own listener, behind any shaping proxy (what the proxy forwards to)."""
        return f"{HOST}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def pid_file(self) -> Path:
        return self.directory / "kafka.pid"

    @property
    def cluster_id(self) -> str | None:
        """The id written by ``format`` into ``meta.properties`` (None before the first start)."""
        try:
            for line in (self.data_dir / "meta.properties").read_text().splitlines():
                if line.startswith("cluster.id="):
                    return line.split("=", 1)[1].strip()
        except OSError:
            pass
        return None

    def client_config(self, **overrides: Any) -> dict[str, Any]:
        """A confluent-kafka config dict pointing at this cluster (a secured one: as its super user)."""
        if self.security is not None:
            return {**self.security.admin_config(self.ssl_bootstrap), **overrides}
        return {"bootstrap.servers": self.bootstrap, **overrides}

    def broker_properties(self) -> dict[str, str]:
        """The full ``server.properties`` content as a dict (defaults, then overrides, then fixed keys)."""
        props = dict(DEFAULT_BROKER_CONFIG)
        props.update(self.config)
        props.update(
            {
                "process.roles": "broker,controller",
                "node.id": str(self.node_id),
                "controller.quorum.voters": self.quorum_voters or f"{self.node_id}@{HOST}:{self.controller_port}",
                "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
                "advertised.listeners": f"PLAINTEXT://{HOST}:{self.advertised_port or self.port}",
                "inter.broker.listener.name": "PLAINTEXT",
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "log.dirs": str(self.data_dir),
            }
        )
        if self.security is not None:
            props.update(self.security.broker_properties(self.port, self.controller_port,
                                                         self.directory / "broker.pem"))
        return props

    # -- process state
    @property
    def pid(self) -> int | None:
        """The broker JVM's pid if it is running (ours or started by another process), else None."""
        with self._lock:
            if self._proc is not None:
                if self._proc.poll() is None:
                    return self._proc.pid
                self.last_exit_code = self._proc.returncode
                self._proc = None
            try:
                pid = int(self.pid_file.read_text().strip())
            except (OSError, ValueError):
                return None
            return pid if self._is_our_jvm(pid) else None

    def _is_our_jvm(self, pid: int) -> bool:
        if not pid_alive(pid):
            return False
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return SERVER_MAIN.encode() in cmdline and str(self.config_path).encode() in cmdline

    def is_running(self) -> bool:
        return self.pid is not None

    def _dist(self) -> KafkaDistribution:
        if self.distribution is None:
            raise RuntimeError(f"cluster {self.name}: no KafkaDistribution given (fetch one first)")
        return self.distribution

    def _wait_exit(self, pid: int, timeout: float) -> bool:
        proc = self._proc
        if proc is not None and proc.pid == pid:
            try:
                proc.wait(timeout=max(timeout, 0.0))
                return True
            except subprocess.TimeoutExpired:
                return False
        return wait_pid_exit(pid, timeout)

    def log_tail(self, lines: int = 60) -> str:
        return _tail(self.log_path, lines)

    def diagnosis(self) -> str:
        """Error lines plus the tail of this cluster's log from its latest start (for error messages)."""
        return log_diagnosis(self.log_path)

    # -- lifecycle
    def prepare(self) -> str:
        """Write the config files and format the storage if this is a fresh data dir; return the cluster id."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            "# generated by mirrorflow_dev.kafka; rewritten on every start\n"
            + "".join(f"{k}={v}\n" for k, v in sorted(self.broker_properties().items()))
        )
        (self.directory / "log4j2.xml").write_text(LOG4J2_XML.format(log_name="server.log", root_level="INFO"))
        if self.security is not None and not (self.directory / "broker.pem").exists():
            self.security.authority().write_keystore(BROKER_PRINCIPAL, self.directory / "broker.pem")
        existing = self.cluster_id
        if existing is not None:
            return existing
        cluster_id = self.fixed_cluster_id or new_cluster_id()
        template = self._format_template()
        if template.is_file():
            self._format_like(template, cluster_id)
            return cluster_id
        quiet = self.directory / "log4j2-tools.xml"
        quiet.write_text(LOG4J2_XML.format(log_name="format.log", root_level="WARN"))
        cmd = self._dist().java_command(
            STORAGE_TOOL_MAIN,
            "format",
            "--cluster-id",
            cluster_id,
            "--config",
            str(self.config_path),
            heap_max="256m",
            heap_min="64m",
            log4j_config=quiet,
        )
        with (self.directory / "format.log").open("ab") as out:
            rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
        if rc != 0:
            raise BrokerStartError(
                f"cluster {self.name}: `StorageTool format` exited with {rc}; "
                f"last lines of {self.directory / 'format.log'}:\n{_tail(self.directory / 'format.log')}"
            )
        # Kept for the next cluster formatted for the same Kafka and features (written whole, then renamed).
        template.parent.mkdir(parents=True, exist_ok=True)
        partial = template.with_name(f"{template.name}.{os.getpid()}.{threading.get_ident()}")
        shutil.copyfile(self.data_dir / "bootstrap.checkpoint", partial)
        os.replace(partial, template)
        return cluster_id

    def _format_template(self) -> Path:
        """Where a ``bootstrap.checkpoint`` formatted for this Kafka and these features is kept.

        ``StorageTool format`` writes two files into a one-directory node: ``meta.properties``
        (node id, a random directory id, the cluster id) and ``bootstrap.checkpoint`` (the
        metadata version and feature levels, which depend on the Kafka release and the
        settings named below, never on the cluster or the node). Formatting is a JVM start
        of its own, about 3.5 CPU seconds; a cluster after the first copies the checkpoint
        and writes ``meta.properties`` itself.
        """
        props = self.broker_properties()
        features = sorted((k, v) for k, v in props.items()
                          if k == "process.roles" or any(w in k for w in ("version", "feature", "unstable")))
        key = hashlib.sha256(json.dumps([self._dist().version, features]).encode()).hexdigest()[:16]
        return self._dist().home / "format-templates" / key / "bootstrap.checkpoint"

    def _format_like(self, template: Path, cluster_id: str) -> None:
        """Format this node's data directory as ``StorageTool format`` would, from ``template``."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, self.data_dir / "bootstrap.checkpoint")
        partial = self.data_dir / "meta.properties.partial"
        partial.write_text(f"#\n# written by mirrorflow_dev.kafka as `StorageTool format` would\n"
                           f"node.id={self.node_id}\ndirectory.id={new_cluster_id()}\nversion=1\n"
                           f"cluster.id={cluster_id}\n")
        os.replace(partial, self.data_dir / "meta.properties")

    def launch(self) -> int:
        """Start the broker JVM in its own session and return at once (see :meth:`wait_ready`).

        A new session keeps the broker out of the terminal's process group (Ctrl-C in the shell
        that ran the CLI does not reach it) and lets detached brokers outlive their starter.
        """
        with self._lock:
            running = self.pid
            if running is not None:
                return running
            self.prepare()
            cmd = self._dist().java_command(
                SERVER_MAIN,
                str(self.config_path),
                heap_max=self.heap_max,
                heap_min=self.heap_min,
                log4j_config=self.directory / "log4j2.xml",
                jvm_options=[
                    f"-Dkafka.logs.dir={self.directory}",
                    f"-Dmirrorflow.cluster={self.name}",
                    *self.jvm_options,
                ],
            )
            with self.log_path.open("ab") as out:
                out.write(f"\n{_START_BANNER} {self.name} at {time.strftime('%F %T')} =====\n".encode())
                out.flush()
                self._proc = subprocess.Popen(
                    cmd,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=self.directory,
                    start_new_session=True,
                    close_fds=True,
                )
            self.pid_file.write_text(f"{self._proc.pid}\n")
            self._started_once = True
            return self._proc.pid

    def wait_ready(self, timeout: float = DEFAULT_STARTUP_TIMEOUT) -> None:
        """Block until the broker answers a metadata request listing itself, or raise.

        Raises :class:`BrokerStartError` with the tail of ``server.log`` when the process exits
        first or the deadline passes. Between probes it waits on the process's exit (so a crash
        is noticed at once), not on a clock.
        """
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + timeout
        admin = None
        while True:
            pid = self.pid
            if pid is None:
                code = self.last_exit_code
                raise BrokerStartError(
                    f"cluster {self.name} ({self.bootstrap}): the broker process exited"
                    f"{f' with code {code}' if code is not None else ''} before it was ready.\n{self.diagnosis()}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrokerStartError(
                    f"cluster {self.name} ({self.bootstrap}): not ready after {timeout:.0f}s (pid {pid}).\n"
                    f"{self.diagnosis()}"
                )
            if admin is None and port_accepts(self.security.ssl_port if self.security else self.port):
                admin = _quiet_admin(self.client_config())
            if admin is not None:
                try:
                    metadata = admin.list_topics(timeout=min(2.0, max(remaining, 0.1)))
                    if metadata.brokers:
                        return
                except KafkaException:
                    pass
            self._wait_exit(pid, min(0.1, max(deadline - time.monotonic(), 0.0)))

    def start(self, timeout: float = DEFAULT_STARTUP_TIMEOUT) -> None:
        """Start (or restart, on the same ports and data dir) and wait until ready.

        A cluster whose ports were chosen automatically and that has never run yet gets fresh
        ports if its JVM lost a race for them (``Address already in use``).
        """
        started = time.monotonic()
        for attempt in range(3):
            first_start = not self._started_once
            self.launch()
            try:
                self.wait_ready(timeout)
                break
            except BrokerStartError:
                lost_port_race = "Address already in use" in self.diagnosis()
                if not (self.auto_ports and first_start and lost_port_race and attempt < 2):
                    raise
                self.progress(f"{self.name}: port {self.port}/{self.controller_port} was taken, retrying")
                self._started_once = False
                self.port, self.controller_port = free_port(), free_port()
                if self.security:
                    self.security = SecuredListeners(free_port(), self.security.pki_dir)
        self.last_start_seconds = time.monotonic() - started

    def _signal(self, sig: signal.Signals, timeout: float) -> bool:
        """Send ``sig`` to the broker and wait for it to exit; True if it did (or was not running)."""
        with self._lock:
            pid = self.pid
            if pid is None:
                return True
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            exited = self._wait_exit(pid, timeout)
            if exited:
                self._proc = None
                with contextlib.suppress(OSError):
                    self.pid_file.unlink()
            return exited

    def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT) -> None:
        """Graceful stop (SIGTERM: controlled shutdown, logs flushed); SIGKILL if the deadline passes."""
        if not self._signal(signal.SIGTERM, timeout):
            self.progress(f"{self.name}: no exit {timeout:.0f}s after SIGTERM, sending SIGKILL")
            if not self._signal(signal.SIGKILL, 15.0):
                raise RuntimeError(f"cluster {self.name}: pid {self.pid} survived SIGKILL")

    def kill(self) -> None:
        """Hard crash (SIGKILL), as a power cut of the JVM would be; waits until it is gone."""
        if not self._signal(signal.SIGKILL, 15.0):
            raise RuntimeError(f"cluster {self.name}: pid {self.pid} survived SIGKILL")

    def restart(self, timeout: float = DEFAULT_STARTUP_TIMEOUT) -> None:
        self.stop()
        self.start(timeout)

    def describe(self) -> dict[str, Any]:
        return {
            "bootstrap": self.bootstrap,
            "port": self.port,
            "controller_port": self.controller_port,
            "pid": self.pid,
            "cluster_id": self.cluster_id,
            "ssl_port": self.security.ssl_port if self.security else None,
            "directory": str(self.directory),
            "log": str(self.log_path),
        }


# --------------------------------------------------------------------------- several clusters


class LocalKafka(Mapping[str, LocalCluster]):
    """Several independent local clusters under one run dir; a ``Mapping`` of name -> :class:`LocalCluster`.

    ``ports`` maps names to fixed broker ports (``None`` = choose a free one); ``names`` alone
    means all ports are chosen automatically. Re-opening an existing run dir reuses the ports
    recorded in ``state.json`` and the data dirs, so a restart keeps topics and cluster ids.

    ``owner_pid`` is recorded in the state file: clusters whose owner died without stopping
    them (a killed test run) can be found and stopped by :func:`reap_orphans`. Detached (CLI)
    clusters have no owner and are never reaped.
    """

    STATE_NAME = "state.json"

    def __init__(
        self,
        run_dir: Path | str,
        names: Sequence[str] | None = None,
        ports: Mapping[str, int | None] | None = None,
        *,
        version: str = KAFKA_VERSION,
        distribution: KafkaDistribution | None = None,
        broker_config: Mapping[str, str] | None = None,
        heap_max: str = DEFAULT_HEAP_MAX,
        heap_min: str = DEFAULT_HEAP_MIN,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        jvm_options: Sequence[str] = (),
        owner_pid: int | None = None,
        progress: Progress = _stderr,
        secured: bool = False,
    ) -> None:
        self.run_dir = Path(run_dir).resolve()
        self.secured = secured
        self.version = distribution.version if distribution else version
        self._distribution = distribution
        self.startup_timeout = startup_timeout
        self.owner_pid = owner_pid
        self.progress = progress
        ports = dict(ports or {})
        wanted = list(names) if names is not None else (list(ports) or list(DEFAULT_NAMES))
        for extra in ports:
            if extra not in wanted:
                wanted.append(extra)
        if len(set(wanted)) != len(wanted):
            raise ValueError(f"duplicate cluster names: {wanted}")
        recorded = self._read_state().get("clusters", {})
        if secured:
            # One CA and one admin certificate for the set, made here (clusters start in threads).
            SecuredListeners(0, self.run_dir / "pki").client_certificate(ADMIN_PRINCIPAL)
        self.clusters: dict[str, LocalCluster] = {}
        for name in wanted:
            old = recorded.get(name, {})
            port = ports.get(name) or old.get("port")
            controller_port = old.get("controller_port")
            auto = ports.get(name) is None and not old
            security = (SecuredListeners(old.get("ssl_port") or free_port(), self.run_dir / "pki")
                        if secured else None)
            self.clusters[name] = LocalCluster(
                name,
                self.run_dir / name,
                port or free_port(),
                controller_port or free_port(),
                distribution,
                config=broker_config,
                heap_max=heap_max,
                heap_min=heap_min,
                auto_ports=auto,
                jvm_options=jvm_options,
                progress=progress,
                security=security,
            )

    # -- Mapping
    def __getitem__(self, name: str) -> LocalCluster:
        return self.clusters[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.clusters)

    def __len__(self) -> int:
        return len(self.clusters)

    # -- distribution
    @property
    def distribution(self) -> KafkaDistribution:
        if self._distribution is None:
            self._distribution = KafkaDistribution.fetch(self.version, progress=self.progress)
        for cluster in self.clusters.values():
            if cluster.distribution is None:
                cluster.distribution = self._distribution
        return self._distribution

    # -- state file
    @property
    def state_path(self) -> Path:
        return self.run_dir / self.STATE_NAME

    def _read_state(self) -> dict[str, Any]:
        try:
            return json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return {}

    def write_state(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        state = {
            "version": self.version,
            "owner_pid": self.owner_pid,
            "secured": self.secured,
            "clusters": {name: c.describe() for name, c in self.clusters.items()},
        }
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        os.replace(tmp, self.state_path)

    @classmethod
    def open(cls, run_dir: Path | str, *, progress: Progress = _stderr) -> LocalKafka:
        """Rebuild the clusters recorded in ``run_dir/state.json`` (for ``stop``/``status`` from another process)."""
        run_dir = Path(run_dir).resolve()
        try:
            state = json.loads((run_dir / cls.STATE_NAME).read_text())
        except (OSError, ValueError) as exc:
            raise FileNotFoundError(f"no readable {cls.STATE_NAME} in {run_dir}: {exc}") from exc
        ports = {name: c["port"] for name, c in state.get("clusters", {}).items()}
        return cls(
            run_dir,
            names=list(ports),
            ports=ports,
            version=state.get("version", KAFKA_VERSION),
            owner_pid=state.get("owner_pid"),
            progress=progress,
            secured=bool(state.get("secured")),
        )

    # -- lifecycle
    def _check_ports(self, selected: Sequence[LocalCluster]) -> None:
        for c in selected:
            if c.is_running():
                continue
            extra = [c.security.ssl_port] if c.security else []
            if c.auto_ports and not c._started_once:
                if not all(port_free(p) for p in (c.port, c.controller_port, *extra)):
                    c.port, c.controller_port = free_port(), free_port()
                    if c.security:
                        c.security = SecuredListeners(free_port(), c.security.pki_dir)
                continue
            for port in (c.port, c.controller_port, *extra):
                if not port_free(port):
                    raise PortInUseError(
                        f"cluster {c.name}: port {port} on {HOST} is already in use by another process "
                        f"(stop it, or choose other ports)"
                    )

    def start(self, names: Sequence[str] | None = None) -> LocalKafka:
        """Start the named clusters (default: all) in parallel and wait until each is ready.

        JVM start-up dominates (seconds each), so clusters boot concurrently. If any fails, the
        ones started by this call are stopped again and one error lists every failure.
        """
        selected = [self.clusters[n] for n in (names or list(self.clusters))]
        _ = self.distribution  # fetch once, before threads race for it
        self._check_ports(selected)
        already = {c.name for c in selected if c.is_running()}
        self.run_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        to_start = [c.name for c in selected if c.name not in already]
        self.progress(
            f"starting {', '.join(to_start) or 'nothing'} (Kafka {self.version}) under {self.run_dir}"
            + (f"; already running: {', '.join(sorted(already))}" if already else "")
        )
        errors: dict[str, Exception] = {}
        with ThreadPoolExecutor(max_workers=max(1, len(selected))) as pool:
            futures = {c.name: pool.submit(c.start, self.startup_timeout) for c in selected}
            for name, future in futures.items():
                try:
                    future.result()
                except Exception as exc:  # noqa: BLE001 - collected and re-raised below
                    errors[name] = exc
        self.write_state()
        if errors:
            for c in selected:
                if c.name not in already and c.name not in errors:
                    with contextlib.suppress(Exception):
                        c.stop()
            self.write_state()
            raise BrokerStartError("\n\n".join(f"{n}: {e}" for n, e in errors.items()))
        self.progress(
            f"ready in {time.monotonic() - started:.1f}s: "
            + ", ".join(f"{c.name}={c.bootstrap}" for c in selected)
        )
        return self

    def ensure_running(self) -> None:
        """Restart any cluster that is down (e.g. a test killed it and failed before restarting it)."""
        down = [name for name, c in self.clusters.items() if not c.is_running()]
        if down:
            self.start(down)

    def stop(self, names: Sequence[str] | None = None, timeout: float = DEFAULT_STOP_TIMEOUT) -> None:
        """Stop the named clusters (default: all) in parallel: SIGTERM, then SIGKILL past ``timeout``."""
        selected = [self.clusters[n] for n in (names or list(self.clusters))]
        with ThreadPoolExecutor(max_workers=max(1, len(selected))) as pool:
            list(pool.map(lambda c: c.stop(timeout), selected))
        if self.run_dir.exists():
            self.write_state()

    def kill(self, name: str) -> None:
        self.clusters[name].kill()

    def status(self) -> dict[str, dict[str, Any]]:
        return {name: {**c.describe(), "running": c.is_running()} for name, c in self.clusters.items()}

    def __enter__(self) -> LocalKafka:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def reap_orphans(root: Path, progress: Progress = _stderr) -> list[Path]:
    """Stop clusters under ``root`` (run dirs one or two levels down) whose owner process is gone.

    A test session killed hard (SIGKILL, a crashed CI step) cannot stop its brokers; the next
    session calls this so orphaned JVMs do not pile up. Clusters without an owner (started by
    the CLI for the demo) and clusters of a still-running owner (a parallel session) are left alone.
    """
    reaped: list[Path] = []
    for state_path in [*root.glob(f"*/{LocalKafka.STATE_NAME}"), *root.glob(f"*/*/{LocalKafka.STATE_NAME}")]:
        try:
            owner = json.loads(state_path.read_text()).get("owner_pid")
        except (OSError, ValueError):
            continue
        if owner is None or pid_alive(int(owner)):
            continue
        try:
            kafka = LocalKafka.open(state_path.parent, progress=progress)
        except (FileNotFoundError, ValueError):
            continue
        if any(c.is_running() for c in kafka.values()):
            progress(f"stopping orphaned clusters of dead pid {owner} in {state_path.parent}")
            kafka.stop(timeout=10.0)
            reaped.append(state_path.parent)
    return reaped


# --------------------------------------------------------------------------- CLI


def _parse_cluster_spec(spec: str) -> tuple[str, int | None]:
    name, _, port = spec.partition("=")
    if not name:
        raise argparse.ArgumentTypeError(f"bad --cluster {spec!r}: expected NAME or NAME=PORT")
    if not port:
        return name, None
    try:
        value = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad --cluster {spec!r}: port {port!r} is not a number") from None
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"bad --cluster {spec!r}: port {value} out of range")
    return name, value


def _recorded_security(run_dir: Path) -> bool | None:
    """Whether the clusters recorded in ``run_dir`` are secured (None: nothing recorded yet).

    Their data dirs were formatted for that mode, and a secured set's SCRAM users and ACLs live
    in them: the run dir keeps its mode.
    """
    try:
        state = json.loads((run_dir / LocalKafka.STATE_NAME).read_text())
    except (OSError, ValueError):
        return None
    return bool(state.get("secured")) if state.get("clusters") else None


def _print_status(kafka: LocalKafka) -> bool:
    all_up = True
    for name, info in kafka.status().items():
        all_up &= info["running"]
        state = f"running pid={info['pid']}" if info["running"] else "stopped"
        tls = f"\tssl={HOST}:{info['ssl_port']}" if info.get("ssl_port") else ""
        print(f"{name}\t{info['bootstrap']}{tls}\t{state}\tcluster_id={info['cluster_id']}\tlog={info['log']}")
    return all_up


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mirrorflow_dev.kafka",
        description="Fetch Apache Kafka from Maven Central and run local single-node KRaft clusters.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p_fetch = sub.add_parser("fetch", help="resolve the Kafka jars into the cache (no-op when cached)")
    p_fetch.add_argument("--version", default=KAFKA_VERSION)
    p_fetch.add_argument("--cache-dir", type=Path, default=None, help="default: <repo>/.cache")

    p_start = sub.add_parser("start", help="start clusters detached; returns once all are ready")
    p_start.add_argument("--run-dir", type=Path, required=True)
    p_start.add_argument(
        "--cluster", action="append", type=_parse_cluster_spec, default=[], metavar="NAME[=PORT]",
        help="repeatable; without PORT a free port is chosen (default: c1..c4, free ports)",
    )
    p_start.add_argument("--version", default=KAFKA_VERSION)
    p_start.add_argument("--heap-max", default=DEFAULT_HEAP_MAX)
    p_start.add_argument("--heap-min", default=DEFAULT_HEAP_MIN)
    p_start.add_argument("--timeout", type=float, default=DEFAULT_STARTUP_TIMEOUT)
    p_start.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="extra broker setting (repeatable)"
    )
    p_start.add_argument(
        "--kafka-defaults", action="store_true",
        help="Kafka's own thread counts and JIT instead of the lighter ones for a shared machine "
        "(SHARED_MACHINE_CONFIG, SHARED_MACHINE_JVM_OPTIONS)",
    )
    p_start.add_argument(
        "--secured", action="store_true",
        help="SASL_SSL (SCRAM-SHA-512) on each cluster's port, mutual TLS on a second port, ACLs enforced; "
        "the CA and the admin certificate go to RUN_DIR/pki (mirrorflow_dev.secured)",
    )

    p_stop = sub.add_parser("stop", help="stop clusters recorded in the run dir")
    p_stop.add_argument("--run-dir", type=Path, required=True)
    p_stop.add_argument("--cluster", action="append", default=[], metavar="NAME", help="only these (repeatable)")
    p_stop.add_argument("--kill", action="store_true", help="SIGKILL instead of a graceful stop")
    p_stop.add_argument("--timeout", type=float, default=DEFAULT_STOP_TIMEOUT)

    p_status = sub.add_parser("status", help="show clusters; exit 0 only if all are running")
    p_status.add_argument("--run-dir", type=Path, required=True)
    p_status.add_argument("--json", action="store_true")

    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            dist = KafkaDistribution.fetch(args.version, cache_root=args.cache_dir)
            print(dist.libs)
            return 0
        if args.command == "start":
            recorded = _recorded_security(args.run_dir)
            if recorded is not None and recorded != args.secured:
                parser.error(
                    f"{args.run_dir} holds {'secured' if recorded else 'plaintext'} clusters: start them "
                    f"{'with' if recorded else 'without'} --secured, or use another --run-dir"
                )
            ports = dict(args.cluster) if args.cluster else {n: None for n in DEFAULT_NAMES}
            extra = {} if args.kafka_defaults else dict(SHARED_MACHINE_CONFIG)
            for item in args.config:
                key, sep, value = item.partition("=")
                if not sep:
                    parser.error(f"--config {item!r}: expected KEY=VALUE")
                extra[key] = value
            kafka = LocalKafka(
                args.run_dir,
                names=list(ports),
                ports=ports,
                version=args.version,
                broker_config=extra,
                jvm_options=() if args.kafka_defaults else SHARED_MACHINE_JVM_OPTIONS,
                heap_max=args.heap_max,
                heap_min=args.heap_min,
                startup_timeout=args.timeout,
                owner_pid=None,
                secured=args.secured,
            )
            kafka.start()
            _print_status(kafka)
            return 0
        if args.command == "stop":
            if not (args.run_dir / LocalKafka.STATE_NAME).exists():
                _stderr(f"nothing to stop: no {LocalKafka.STATE_NAME} in {args.run_dir}")
                return 0
            kafka = LocalKafka.open(args.run_dir)
            names = args.cluster or list(kafka)
            unknown = [n for n in names if n not in kafka]
            if unknown:
                parser.error(f"unknown cluster(s) {unknown}; known: {list(kafka)}")
            if args.kill:
                for n in names:
                    kafka.kill(n)
                kafka.write_state()
            else:
                kafka.stop(names, timeout=args.timeout)
            _print_status(kafka)
            return 0
        if args.command == "status":
            kafka = LocalKafka.open(args.run_dir)
            if args.json:
                status = kafka.status()
                print(json.dumps(status, indent=2))
                return 0 if all(s["running"] for s in status.values()) else 1
            return 0 if _print_status(kafka) else 1
    except (ToolMissingError, FetchError, BrokerStartError, NoFreePortError, FileNotFoundError) as exc:
        _stderr(f"error: {exc}")
        return 2
    return 1


if __name__ == "__main__":
    sys.exit(main())
