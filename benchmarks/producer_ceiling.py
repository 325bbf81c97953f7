"""The brokers' own produce ceiling: Kafka's ProducerPerformance tool from the fetched 4.3.1 jars.

Usage from Python::

    from mirrorflow_dev.kafka import KafkaDistribution
    dist = KafkaDistribution.fetch()
    producer_ceiling("127.0.0.1:9092", "bench-1k", 200_000, 1024, classpath=dist.classpath)
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

from mirrorflow_dev.kafka import JVM_OPTIONS
from mirrorflow_dev.maven import find_java

PERF_MAIN = "org.apache.kafka.tools.ProducerPerformance"

# The final summary, e.g. "200000 records sent, 91324.2 records/sec (89.18 MB/sec), 250.1 ms avg latency,
# 702.0 ms max latency, 221 ms 50th, 520 ms 95th, 640 ms 99th, 700 ms 99.9th." (interim lines lack "50th").
_SUMMARY = re.compile(
    r"(?P<records>\d+) records sent, (?P<rps>[\d.]+) records/sec \((?P<mbps>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, "
    r"(?P<p50>\d+) ms 50th, (?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99\.9th"
)


def parse_summary(output: str) -> dict[str, float]:
    """Numbers of the last summary line in ProducerPerformance's output (ValueError if there is none)."""
    matches = list(_SUMMARY.finditer(output))
    if not matches:
        raise ValueError("no ProducerPerformance summary line in the output:\n" + output[-3000:])
    m = matches[-1]
    return {
        "records": int(m["records"]),
        "records_per_s": float(m["rps"]),
        # the tool divides bytes by 1024 * 1024, so this is MiB/s
        "mb_per_s": float(m["mbps"]),
        "avg_latency_ms": float(m["avg"]),
        "max_latency_ms": float(m["max"]),
        "p50_ms": float(m["p50"]),
        "p95_ms": float(m["p95"]),
        "p99_ms": float(m["p99"]),
        "p999_ms": float(m["p999"]),
    }


def producer_ceiling(
    bootstrap: str,
    topic: str,
    records: int,
    record_size: int,
    *,
    classpath: str,
    producer_props: Mapping[str, str] | None = None,
    heap_max: str = "1g",
    timeout: float = 900,
) -> dict[str, Any]:
    """Produce ``records`` random records of ``record_size`` bytes to ``topic`` as fast as possible (acks=all).

    ``classpath`` is the Kafka distribution's (``KafkaDistribution.classpath``); extra
    ``producer_props`` go after ``bootstrap.servers`` and ``acks=all``. The topic must exist
    (the local brokers do not auto-create topics).
    """
    props = {"bootstrap.servers": bootstrap, "acks": "all", **(producer_props or {})}
    cmd = [
        find_java(), f"-Xmx{heap_max}", "-Xms256m", *JVM_OPTIONS, "-cp", classpath, PERF_MAIN,
        "--topic", topic,
        "--num-records", str(records),
        "--record-size", str(record_size),
        "--throughput", "-1",
        "--producer-props", *(f"{k}={v}" for k, v in props.items()),
    ]
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    wall = time.monotonic() - started
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise RuntimeError(f"ProducerPerformance exited with {done.returncode}:\n{output[-3000:]}")
    result: dict[str, Any] = parse_summary(done.stdout)
    result.update({"record_size": record_size, "wall_seconds": wall, "producer_props": props})
    return result


def main(argv: list[str] | None = None) -> int:
    from mirrorflow_dev.kafka import KafkaDistribution

    parser = argparse.ArgumentParser(prog="python benchmarks/producer_ceiling.py", description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap")
    parser.add_argument("topic", help="must exist")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-size", type=int, default=1024)
    args = parser.parse_args(argv)
    dist = KafkaDistribution.fetch()
    print(json.dumps(producer_ceiling(args.bootstrap, args.topic, args.records, args.record_size,
                                      classpath=dist.classpath), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
