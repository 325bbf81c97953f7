"""A first audit of many small topics: what onboarding a large cluster to the audit costs per topic.

One fresh cluster, ``--topics`` topics of 10 partitions with one record each;
:func:`mirrorflow.completeness.count.count_cluster` from empty state, ``--rounds``
times (each round another window length, so each counts everything again).
Seconds to stdout. To compare two versions, run it from each with that
version's ``include`` first on ``PYTHONPATH`` (the line says which module ran)::

    PYTHONPATH=.:include python -m benchmarks.first_audit --topics 50
"""

from __future__ import annotations

import argparse
import sys
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import mirrorflow.completeness.count as count
from benchmarks.common import local_clusters, wait_for_leaders
from mirrorflow.completeness.store import read_state
from mirrorflow.kafka import ClusterClient

PARTITIONS = 10


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.first_audit", description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    with local_clusters("mirrorflow-first-audit-", ("a",)) as kafka:
        bootstrap = kafka.clusters["a"].bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        names = [f"audit-{i:05d}" for i in range(args.topics)]
        for future in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names]).values():
            future.result(60)
        for name in names:
            wait_for_leaders(admin, bootstrap, name, PARTITIONS)
        producer = Producer({"bootstrap.servers": bootstrap})
        for name in names:
            for partition in range(PARTITIONS):
                producer.produce(name, b"x", partition=partition)
        producer.flush(60)
        client, wanted = ClusterClient("a", {"bootstrap.servers": bootstrap}), set(names)
        for round_no in range(args.rounds):
            started = time.monotonic()
            counted = count.count_cluster(client, read_state(client, 600 + round_no), lambda t: t in wanted)
            seconds = time.monotonic() - started
            print(f"{count.__file__}: first audit of {args.topics} topics x {PARTITIONS} partitions: "
                  f"{seconds:.1f}s ({seconds / args.topics * 1000:.0f} ms a topic), {counted.read} records",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
