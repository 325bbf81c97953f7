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

from mirrorflow.local.kafka import (
    _LOG4J2_XML,
    KAFKA_VERSION,
    LOG4J_VERSION,
    SLF4J_VERSION,
    KafkaDistribution,
    _diagnosis,
    default_cache_root,
    free_port,
)
from mirrorflow.local.maven import Artifact, fetch_jars

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


class CommittedCounter:
    """Counts the records that become visible to a ``read_committed`` reader, from given offsets on.

    A consumer is the only exact measure under exactly-once (offsets include transaction
    markers); it runs in the benchmark's process and costs little next to the copy itself.
    """

    def __init__(self, bootstrap: str, topic: str, start: dict[int, int]) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.topic = topic
        self.count = 0
        self.bytes = 0
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"mm2-bench-counter-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 100,
                "fetch.max.bytes": 64 * 2**20,
                "max.partition.fetch.bytes": 8 * 2**20,
                "queued.max.messages.kbytes": 256 * 1024,
                "log_level": 3,
            }
        )
        self._consumer.assign([TopicPartition(topic, p, off) for p, off in start.items()])

    def poll(self, timeout: float) -> int:
        """Consume what is available (waiting at most ``timeout`` for the first batch); new records."""
        got = 0
        messages = self._consumer.consume(10000, timeout=timeout)
        while messages:
            for m in messages:
                if m.error() is None:
                    got += 1
                    self.bytes += len(m.value() or b"") + len(m.key() or b"")
            if len(messages) < 10000:
                break
            messages = self._consumer.consume(10000, timeout=0)
        self.count += got
        return got

    def positions(self) -> dict[int, int]:
        return {tp.partition: tp.offset for tp in self._consumer.position(self._consumer.assignment())}

    def close(self) -> None:
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
    """Copy ``topic`` with a fresh dedicated MirrorMaker 2 and time it.

    ``seconds`` runs from just before the JVM is started until ``expected_records`` new committed
    records are readable (``read_committed``) on the target topic, counted from the target's
    end offsets before the start; so JVM start, Connect group join, task start-up and the
    copy are all included. The target topic may exist (MirrorMaker then only writes into it)
    or not (MirrorMaker creates it with the source's partition count). The process is then
    stopped; ``records`` is every committed record that arrived, counted after it stopped
    (more than expected would mean duplicates).
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
    log4j.write_text(_LOG4J2_XML.format(log_name="mm2.log", root_level="INFO"))
    log_path = workdir / "mm2.log"
    dist = KafkaDistribution(version=MM2_VERSION, home=libs.parent, tools_version=MM2_VERSION)
    cmd = dist.java_command(
        # MirrorMaker's main takes the properties file as its positional argument (no --config flag)
        MM2_MAIN, str(config), heap_max=MM2_HEAP_MAX, heap_min=MM2_HEAP_MIN, log4j_config=log4j,
        jvm_options=[f"-Dkafka.logs.dir={workdir}"],
    )

    try:
        partition_ids(target_bootstrap, topic)
        baseline = end_offsets(target_bootstrap, topic, committed=False)
    except RuntimeError:
        baseline = None  # MirrorMaker will create the topic; count from offset 0 once it exists
    counter: CommittedCounter | None = None
    first_record: float | None = None
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
            now = time.monotonic()
            if proc.poll() is not None:
                raise RuntimeError(
                    f"MirrorMaker exited with {proc.returncode} after {now - started:.1f}s having copied "
                    f"{counter.count if counter else 0}/{expected_records} records.\n{_diagnosis(log_path)}"
                )
            if now >= deadline:
                raise TimeoutError(
                    f"MirrorMaker copied {counter.count if counter else 0}/{expected_records} records "
                    f"in {timeout:.0f}s.\n{_diagnosis(log_path)}"
                )
            if counter is None:
                if baseline is None:
                    with contextlib.suppress(RuntimeError):
                        baseline = {p: 0 for p in partition_ids(target_bootstrap, topic, timeout=2.0)}
                if baseline is None:
                    proc_wait = min(0.2, max(deadline - time.monotonic(), 0))
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=proc_wait)
                    continue
                counter = CommittedCounter(target_bootstrap, topic, baseline)
            if counter.poll(timeout=0.2) and first_record is None:
                first_record = time.monotonic()
            if counter.count >= expected_records:
                done_at = time.monotonic()
                break
    finally:
        returncode = stop_process(proc)
    seconds = done_at - started
    progress(f"mm2: {counter.count} records after {seconds:.2f}s; stopped (exit {returncode})")
    # every committed record that arrived, now that nothing writes any more
    final_ends = end_offsets(target_bootstrap, topic, committed=True)
    drain_deadline = time.monotonic() + 60
    while time.monotonic() < drain_deadline:
        positions = counter.positions()
        if all(positions.get(p, -1) >= end for p, end in final_ends.items() if end > baseline.get(p, 0)):
            break
        counter.poll(timeout=0.5)
    records, nbytes = counter.count, counter.bytes
    counter.close()
    offsets = sum(final_ends[p] - baseline.get(p, 0) for p in final_ends)
    return {
        "seconds": seconds,
        "records": records,
        "exactly_once": exactly_once,
        "tasks_max": tasks_max,
        "log": str(log_path),
        "records_per_s": expected_records / seconds,
        "mb_per_s": nbytes * expected_records / max(records, 1) / seconds / 2**20,
        "first_record_seconds": (first_record - started) if first_record else None,
        # offsets taken by transaction markers (exactly-once) or duplicates; 0 for a plain copy
        "extra_offsets": offsets - records,
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
            return
        except KafkaException:  # deletion is asynchronous: "already exists" / "marked for deletion"
            if time.monotonic() >= deadline:
                raise
            _BACKOFF.wait(0.2)
            del exc


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
        print(f"exactly_once={eos}: {r['records']} records in {r['seconds']:.2f}s = "
              f"{r['records_per_s']:.0f} records/s, {r['mb_per_s']:.1f} MiB/s "
              f"(first record after {r['first_record_seconds'] or float('nan'):.2f}s, "
              f"extra offsets {r['extra_offsets']})", flush=True)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
