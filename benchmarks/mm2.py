"""Apache Kafka MirrorMaker 2 (dedicated mode) as a benchmark contender.

``fetch()`` resolves MirrorMaker's jars from Maven Central into ``<cache>/mm2/<version>/libs``
with the project's Maven helper; ``run_mm2()`` copies one pre-filled topic from one cluster to
another with a fresh MirrorMaker process and measures the seconds from process start until
the target topic holds every record (committed, i.e. visible to a ``read_committed`` reader).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from mirrorflow.cache_root import default_cache_root
from mirrorflow_dev.kafka import (
    KAFKA_VERSION,
    LOG4J2_XML,
    LOG4J_VERSION,
    SLF4J_VERSION,
    KafkaDistribution,
    log_diagnosis,
)
from mirrorflow_dev.maven import Artifact, fetch_jars
from mirrorflow_dev.process import free_port

Progress = Callable[[str], None]

MM2_VERSION = KAFKA_VERSION  # 4.3.1: the release whose modules are all on Maven Central
MM2_MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"


def mm2_artifacts(version: str = MM2_VERSION) -> list[Artifact]:
    """What ``MirrorMaker``'s main needs at runtime, primary first.

    connect-mirror pulls connect-mirror-client, connect-runtime (Jetty, Jersey, Jackson),
    kafka-clients and argparse4j; Kafka's poms keep the logging backend out of the runtime
    scope, so SLF4J 1.7 and log4j2 with its SLF4J-1.x binding are listed like for the broker.
    """
    return [
        Artifact("org.apache.kafka", "connect-mirror", version),
        Artifact("org.apache.kafka", "connect-mirror-client", version),
        Artifact("org.apache.kafka", "connect-runtime", version),
        Artifact("org.slf4j", "slf4j-api", SLF4J_VERSION),
        Artifact("org.apache.logging.log4j", "log4j-api", LOG4J_VERSION),
        Artifact("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION),
        Artifact("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION),
    ]


def mm2_home(version: str = MM2_VERSION, cache_root: Path | None = None) -> Path:
    return (cache_root or default_cache_root()) / "mm2" / version


def fetch(progress: Progress = print, *, version: str = MM2_VERSION, cache_root: Path | None = None,
          mvn: str | None = None) -> Path:
    """The ``libs`` folder holding MirrorMaker 2's jars, resolving them with Maven the first time."""
    return fetch_jars(f"MirrorMaker 2 {version}", mm2_home(version, cache_root), mm2_artifacts(version),
                      [f"connect-mirror-{version}.jar", f"connect-runtime-{version}.jar",
                       f"kafka-clients-{version}.jar", f"log4j-core-{LOG4J_VERSION}.jar"], mvn=mvn, progress=progress)


# --------------------------------------------------------------------------- run

SOURCE_ALIAS = "src"
TARGET_ALIAS = "dst"
# What bin/connect-mirror-maker.sh gives the JVM (KAFKA_HEAP_OPTS="-Xms256M -Xmx2G").
MM2_HEAP_MAX = "2g"
MM2_HEAP_MIN = "256m"
STOP_TIMEOUT = 30.0
_BACKOFF = threading.Event()  # never set: .wait(t) is a back-off between retries


def mm2_properties(
    source_bootstrap: str,
    target_bootstrap: str,
    topic: str,
    *,
    tasks_max: int,
    exactly_once: bool,
    run_id: str,
    rest_port: int | None = None,
) -> dict[str, str]:
    """The dedicated-mode configuration of one ``src -> dst`` flow of ``topic`` (same name on the target).

    Every run gets its own Connect group and internal topics (``run_id``): MirrorMaker keeps
    its source offsets in the target cluster, so a second run sharing them would copy nothing,
    and switching exactly-once on for an existing config topic needs the two-step
    ``preparing`` -> ``enabled`` upgrade.
    """
    s, t, flow = SOURCE_ALIAS, TARGET_ALIAS, f"{SOURCE_ALIAS}->{TARGET_ALIAS}"
    props = {
        "clusters": f"{s}, {t}",
        f"{s}.bootstrap.servers": source_bootstrap,
        f"{t}.bootstrap.servers": target_bootstrap,
        f"{flow}.enabled": "true",
        f"{t}->{s}.enabled": "false",
        "topics": topic,
        f"{flow}.topics": topic,
        "groups.exclude": ".*",  # nothing to checkpoint: no consumer groups are part of the copy
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        f"{flow}.tasks.max": str(tasks_max),
        # only the data flow: no heartbeats (which would also start a dst->src herder), no
        # checkpoints, no group offset sync, no ACL sync (the test brokers have no authorizer)
        "emit.heartbeats.enabled": "false",
        "emit.checkpoints.enabled": "false",
        "sync.group.offsets.enabled": "false",
        "sync.topic.acls.enabled": "false",
        # one-broker clusters: replication factor 1 for the remote topic and every internal topic
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        # Every plugin on this classpath has a ServiceLoader manifest, and Connect itself logs a
        # recommendation for this setting: the default (hybrid_warn) also scans the classpath by
        # reflection, once for MirrorMaker and once per herder, ~6 s of start-up here.
        # Top level for MirrorMaker's own plugin loader, target-prefixed for the herder's worker.
        "plugin.discovery": "service_load",
        f"{t}.plugin.discovery": "service_load",
        # a fresh Connect cluster per run (see above); group.id is a per-target worker setting
        f"{t}.group.id": f"mm2-bench-{run_id}",
        "offset.storage.topic": f"mm2-bench-offsets-{run_id}",
        "config.storage.topic": f"mm2-bench-configs-{run_id}",
        "status.storage.topic": f"mm2-bench-status-{run_id}",
    }
    if exactly_once:
        if rest_port is None:
            raise ValueError("exactly-once needs the internal REST server: pass rest_port")
        props.update(
            {
                # Kafka docs (Geo-replication > Exactly once): a worker setting of the *target* cluster ...
                f"{t}.exactly.once.source.support": "enabled",
                # ... plus intra-cluster communication between MirrorMaker nodes (KIP-710) ...
                "dedicated.mode.enable.internal.rest": "true",
                "listeners": f"http://127.0.0.1:{rest_port}",
                # ... and a source consumer that skips aborted transactions. MirrorSourceConnector
                # only declares exactly-once SUPPORTED when it reads read_committed.
                f"{s}.consumer.isolation.level": "read_committed",
                # fail the connector instead of silently running at-least-once
                f"{flow}.exactly.once.support": "required",
            }
        )
    return props


def write_properties(path: Path, props: dict[str, str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "# generated by benchmarks/mm2.py\n" + "".join(f"{k} = {v}\n" for k, v in props.items())
    )
    return path


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def partition_ids(bootstrap: str, topic: str, timeout: float = 10.0) -> list[int]:
    metadata = _admin(bootstrap).list_topics(topic=topic, timeout=timeout)
    info = metadata.topics.get(topic)
    if info is None or info.error is not None or not info.partitions:
        raise RuntimeError(f"topic {topic!r} not found on {bootstrap}: {info.error if info else 'missing'}")
    return sorted(info.partitions)


def end_offsets(bootstrap: str, topic: str, *, committed: bool, timeout: float = 10.0) -> dict[int, int]:
    """Per-partition end offsets: the last stable offset when ``committed``, else the high watermark.

    Offsets count transaction markers too, so under exactly-once they overstate the records.
    """
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    parts = partition_ids(bootstrap, topic, timeout)
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    admin = _admin(bootstrap)  # must outlive the futures: a destroyed handle fails them
    futures = admin.list_offsets(
        {TopicPartition(topic, p): OffsetSpec.latest() for p in parts},
        isolation_level=level,
        request_timeout=timeout,
    )
    return {tp.partition: f.result().offset for tp, f in futures.items()}


class CopyWatch:
    """Tells when MirrorMaker has copied every record, without reading the copies.

    Reading the copies as they arrive would take CPU from the copy being timed (the
    machine has two cores), so completion is judged from cheap metadata instead:

    - at least once: every target partition's end offset reached the source's (the
      target topic starts empty; duplicates would only end the wait early, and the
      exact count afterwards shows them);
    - exactly once: Connect commits each task's source offsets in the same
      transaction as its records (KIP-618), so when the committed source offset of
      every partition (read ``read_committed`` from the run's offsets topic, a few
      small records) is the source's last offset, every record is committed.
    """

    def __init__(self, target_bootstrap: str, topic: str, source_ends: dict[int, int], *, exactly_once: bool,
                 offsets_topic: str) -> None:
        self.target, self.topic, self.source_ends = target_bootstrap, topic, source_ends
        self.exactly_once, self.offsets_topic = exactly_once, offsets_topic
        self.copied: dict[int, int] = {p: 0 for p in source_ends}  # next source offset known to be copied
        self._consumer: Any = None

    def done(self, timeout: float) -> bool:
        from confluent_kafka import KafkaException

        if not self.exactly_once:
            with contextlib.suppress(RuntimeError, KafkaException):  # not ready yet: ask again
                self.copied.update(end_offsets(self.target, self.topic, committed=False, timeout=10))
            _BACKOFF.wait(timeout)
        else:
            self._read_offsets(timeout)
        return all(self.copied.get(p, 0) >= end for p, end in self.source_ends.items())

    def _read_offsets(self, timeout: float) -> None:
        from confluent_kafka import Consumer, TopicPartition

        if self._consumer is None:
            try:
                partitions = partition_ids(self.target, self.offsets_topic, timeout=2.0)
            except RuntimeError:
                _BACKOFF.wait(timeout)  # MirrorMaker has not created it yet
                return
            self._consumer = Consumer({"bootstrap.servers": self.target, "group.id": f"mm2-watch-{uuid.uuid4().hex[:8]}",
                                       "enable.auto.commit": False, "isolation.level": "read_committed",
                                       "fetch.wait.max.ms": 50, "log_level": 3})
            self._consumer.assign([TopicPartition(self.offsets_topic, p, 0) for p in partitions])
        for msg in self._consumer.consume(1000, timeout=timeout):
            if msg.error() is not None or not msg.key() or not msg.value():
                continue
            try:
                _, where = json.loads(msg.key())
                offset = json.loads(msg.value())["offset"]
            except (ValueError, TypeError, KeyError):
                continue
            if isinstance(where, dict) and where.get("topic") == self.topic:
                p = int(where["partition"])
                self.copied[p] = max(self.copied.get(p, 0), int(offset) + 1)  # MirrorMaker stores the last offset

    def close(self) -> None:
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                self._consumer.close()


def stop_process(proc: subprocess.Popen[bytes], timeout: float = STOP_TIMEOUT) -> int | None:
    """SIGTERM (MirrorMaker's shutdown hook stops the connectors), SIGKILL past ``timeout``."""
    if proc.poll() is not None:
        return proc.returncode
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        return proc.wait(timeout=15)


def run_mm2(
    source_bootstrap: str,
    target_bootstrap: str,
    topic: str,
    expected_records: int,
    *,
    tasks_max: int,
    exactly_once: bool,
    workdir: Path,
    timeout: float = 600,
    libs: Path | None = None,
    progress: Progress = print,
) -> dict[str, Any]:
    """Copy ``topic`` (written without transactions, from offset 0) with a fresh dedicated MirrorMaker 2.

    ``seconds`` runs from just before the JVM is started until :class:`CopyWatch` sees every
    record committed on the target, so JVM start, Connect group join, task start-up and the
    copy are all included. The target topic should exist and be empty (the benchmark
    recreates it); the caller counts the copies afterwards, which shows duplicates or losses.
    """
    libs = libs or fetch(progress=progress)
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    run_id = f"{time.strftime('%Y%m%d%H%M%S')}-{uuid.uuid4().hex[:6]}"
    props = mm2_properties(
        source_bootstrap, target_bootstrap, topic, tasks_max=tasks_max, exactly_once=exactly_once,
        run_id=run_id, rest_port=free_port() if exactly_once else None,
    )
    config = write_properties(workdir / "mm2.properties", props)
    log4j = workdir / "log4j2.xml"
    log4j.write_text(LOG4J2_XML.format(log_name="mm2.log", root_level="INFO"))
    log_path = workdir / "mm2.log"
    dist = KafkaDistribution(version=MM2_VERSION, home=libs.parent, tools_version=MM2_VERSION)
    cmd = dist.java_command(
        # MirrorMaker's main takes the properties file as its positional argument (no --config flag)
        MM2_MAIN, str(config), heap_max=MM2_HEAP_MAX, heap_min=MM2_HEAP_MIN, log4j_config=log4j,
        jvm_options=[f"-Dkafka.logs.dir={workdir}"],
    )

    source_ends = end_offsets(source_bootstrap, topic, committed=True)
    if sum(source_ends.values()) != expected_records:
        raise ValueError(f"{topic}: the source holds {sum(source_ends.values())} offsets, expected {expected_records} "
                         "(the benchmark copies a topic written without transactions, from offset 0)")
    watch = CopyWatch(target_bootstrap, topic, source_ends, exactly_once=exactly_once,
                      offsets_topic=props["offset.storage.topic"])
    done_at: float | None = None
    progress(f"mm2: starting (exactly_once={exactly_once}, tasks.max={tasks_max}), log {log_path}")
    with log_path.open("ab") as out:
        out.write(f"\n===== benchmarks/mm2.py run {run_id} {cmd} =====\n".encode())
        out.flush()
        started = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=workdir, start_new_session=True, close_fds=True)
    try:
        deadline = started + timeout
        while True:
            if watch.done(timeout=0.1):
                done_at = time.monotonic()
                break
            now = time.monotonic()
            if proc.poll() is not None:
                raise RuntimeError(f"MirrorMaker exited with {proc.returncode} after {now - started:.1f}s, having "
                                   f"copied {watch.copied} of {source_ends}.\n{log_diagnosis(log_path)}")
            if now >= deadline:
                raise TimeoutError(f"MirrorMaker copied {watch.copied} of {source_ends} in {timeout:.0f}s."
                                   f"\n{log_diagnosis(log_path)}")
    finally:
        returncode = stop_process(proc)
        watch.close()
    seconds = done_at - started
    progress(f"mm2: every record copied after {seconds:.2f}s; stopped (exit {returncode})")
    return {
        "seconds": seconds,
        "exactly_once": exactly_once,
        "tasks_max": tasks_max,
        "log": str(log_path),
        "exit_code": returncode,
        "properties": str(config),
    }


# --------------------------------------------------------------------------- CLI


def recreate_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """Delete ``topic`` (if present) and create it empty with ``partitions`` partitions, RF 1."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)
    deadline = time.monotonic() + timeout
    if topic in admin.list_topics(timeout=10).topics:
        admin.delete_topics([topic], operation_timeout=30)[topic].result()
    while True:
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)[topic].result()
            break
        except KafkaException:  # deletion is asynchronous: "already exists" / "marked for deletion"
            if time.monotonic() >= deadline:
                raise
            _BACKOFF.wait(0.2)
    from benchmarks.common import wait_for_leaders

    wait_for_leaders(admin, bootstrap, topic, partitions, timeout=max(1.0, deadline - time.monotonic()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/mm2.py",
        description="Copy a pre-filled topic with MirrorMaker 2 (dedicated mode), with and without exactly-once.",
    )
    parser.add_argument("source_bootstrap")
    parser.add_argument("target_bootstrap")
    parser.add_argument("topic", help="exists on the source with the records to copy")
    parser.add_argument("--tasks-max", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--workdir", type=Path, default=Path(".run/bench-mm2"))
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--keep-target", action="store_true",
                        help="do not empty the target topic before each run (default: recreate it)")
    args = parser.parse_args(argv)

    source_ends = end_offsets(args.source_bootstrap, args.topic, committed=True)
    expected = sum(source_ends.values())  # a topic pre-filled without transactions and never trimmed
    progress = lambda m: print(f"[mm2] {m}", file=sys.stderr, flush=True)  # noqa: E731
    results = []
    for eos in (False, True):
        if not args.keep_target:
            recreate_topic(args.target_bootstrap, args.topic, len(source_ends))
        r = run_mm2(args.source_bootstrap, args.target_bootstrap, args.topic, expected,
                    tasks_max=args.tasks_max, exactly_once=eos, workdir=args.workdir / ("eos" if eos else "plain"),
                    timeout=args.timeout, progress=progress)
        results.append(r)
        print(f"exactly_once={eos}: {expected} records in {r['seconds']:.2f}s = "
              f"{expected / r['seconds']:.0f} records/s", flush=True)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
