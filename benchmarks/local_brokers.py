"""What a local broker costs in CPU: Kafka's defaults against the lighter settings of a shared machine.

One single-node cluster per profile, the two profiles side by side in each round
(started at the same time, so both see the same machine):

- ``kafka-defaults``: Kafka's thread counts and JIT (the benchmarks' brokers);
- ``shared-machine``: ``SHARED_MACHINE_CONFIG`` and ``SHARED_MACHINE_JVM_OPTIONS`` of
  :mod:`mirrorflow_dev.kafka` (the demo's, platform mode's and the tests' brokers).

Measured from ``/proc/<pid>/stat`` of the broker JVM: the CPU seconds of its
start, of a minute idle (as a share of one core), and of a small workload shaped
like the tests' (240 topics of 3 partitions created, 600 transactions of 40
records of 300 bytes, everything read back read_committed)::

    python -m benchmarks.local_brokers --rounds 2 --idle 60
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO

PROFILES = ("kafka-defaults", "shared-machine")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _workload(bootstrap: str, tag: str) -> int:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    read = 0
    for rnd in range(4):
        topics = [f"r{rnd}-t{i}" for i in range(60)]
        for future in admin.create_topics([NewTopic(t, 3, 1) for t in topics]).values():
            future.result()
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{tag}-{rnd}", "linger.ms": 5})
        producer.init_transactions()
        for n in range(150):
            producer.begin_transaction()
            for m in range(40):
                producer.produce(topics[(n + m) % 60], key=str(m).encode(), value=b"x" * 300)
            producer.commit_transaction()
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{tag}-{rnd}",
                             "isolation.level": "read_committed", "enable.partition.eof": True})
        consumer.assign([TopicPartition(t, p, 0) for t in topics for p in range(3)])
        ended = 0
        while ended < len(topics) * 3:
            msg = consumer.poll(1)
            if msg is None:
                continue
            if msg.error():
                ended += 1
            else:
                read += 1
        consumer.close()
    return read


def measure_one(profile: str, idle: float) -> dict[str, float]:
    """One broker of ``profile``: CPU seconds to start, % of a core idle, CPU seconds of the workload."""
    from mirrorflow_dev.kafka import SHARED_MACHINE_CONFIG, SHARED_MACHINE_JVM_OPTIONS, KafkaDistribution, LocalKafka

    shared = profile == "shared-machine"
    with tempfile.TemporaryDirectory(prefix=f"mirrorflow-bench-{profile}-") as tmp:
        kafka = LocalKafka(Path(tmp), names=["b"], distribution=KafkaDistribution.fetch(), owner_pid=os.getpid(),
                           broker_config=dict(SHARED_MACHINE_CONFIG) if shared else {},
                           jvm_options=SHARED_MACHINE_JVM_OPTIONS if shared else (), progress=lambda m: None)
        kafka.start()
        try:
            cluster = kafka["b"]
            pid = cluster.pid
            assert pid is not None
            started = _cpu_seconds(pid)
            time.sleep(10)  # past the start's last compiles before the idle minute
            before, at = _cpu_seconds(pid), time.monotonic()
            time.sleep(idle)
            idle_share = (_cpu_seconds(pid) - before) / (time.monotonic() - at)
            before = _cpu_seconds(pid)
            records = _workload(cluster.bootstrap, profile)
            work = _cpu_seconds(pid) - before
        finally:
            kafka.stop()
    assert records == 4 * 150 * 40, records
    return {"start_cpu_s": started, "idle_pct_core": 100 * idle_share, "workload_cpu_s": work}


def measure(rounds: int, idle: float, progress=print) -> dict[str, list[dict[str, float]]]:
    results: dict[str, list[dict[str, float]]] = {p: [] for p in PROFILES}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "include")])}
    for rnd in range(rounds):
        procs = {p: subprocess.Popen([sys.executable, "-m", "benchmarks.local_brokers", "--one", p, "--idle",
                                      str(idle)], stdout=subprocess.PIPE, text=True, cwd=REPO, env=env)
                 for p in PROFILES}
        for profile, proc in procs.items():
            out, _ = proc.communicate()
            if proc.returncode != 0:
                raise SystemExit(f"{profile}: exited with {proc.returncode}")
            row = json.loads(out.strip().splitlines()[-1])
            results[profile].append(row)
            progress(f"round {rnd + 1} {profile}: start {row['start_cpu_s']:.1f} cpu-s, idle "
                     f"{row['idle_pct_core']:.2f}% of a core, workload {row['workload_cpu_s']:.1f} cpu-s")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--idle", type=float, default=60.0, help="seconds measured idle")
    parser.add_argument("--one", choices=PROFILES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_one(args.one, args.idle)))
        return
    results = measure(args.rounds, args.idle)
    print(f"\n| profile | start (CPU s) | idle (% of a core) | workload (CPU s) |  ({args.rounds} rounds, median)")
    print("|---|---|---|---|")
    for profile, rows in results.items():
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print(f"| {profile} | {med['start_cpu_s']:.1f} | {med['idle_pct_core']:.2f} | {med['workload_cpu_s']:.1f} |")


if __name__ == "__main__":
    main()
