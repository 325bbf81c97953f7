"""What the completeness audit costs per million messages, next to what copying them costs.

One source and one target cluster on this machine. The source gets ``--records``
records over ``--partitions`` partitions; one level run copies them to the
target (in this process, no Spark: the planner and ``copy_tasks`` as one Spark
task runs them). Then, rounds alternated, on the target:

- ``read``: a plain ``read_committed`` consumer reading every record, nothing else
  (the floor any audit pays);
- ``audit``: a first audit of the target, :func:`mirrorflow.completeness.count.count_cluster`
  from empty state (provenance, hashes, tallies, the state written in one
  transaction per topic). Each round uses another window length, so each one
  counts everything again;

and once at the end a second audit with nothing new, which is what a scheduled
run costs when no data arrived. Prints each time, the medians, seconds per
million records, and the ratio to the plain read::

    python -m benchmarks.audit_cost --records 1000000 --partitions 8 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid

from benchmarks.common import Case, create_topic, local_clusters, prefill, records_on, warm_up
from mirrorflow.completeness.count import count_cluster
from mirrorflow.completeness.store import read_state
from mirrorflow.copy.job import run_job
from mirrorflow.copy.spec import JobSpec, LinkJob
from mirrorflow.kafka import ClusterClient


def _copy(src: str, dst: str, topic: str) -> tuple[float, int]:
    spec = JobSpec(level=1, run_id=f"bench-{uuid.uuid4().hex[:6]}", topics=(topic,),
                   clusters={"src": {"bootstrap.servers": src}, "dst": {"bootstrap.servers": dst}}, slots=1,
                   links=(LinkJob(f"audit-{uuid.uuid4().hex[:6]}.L1", 1, "src", "dst"),), copy_threads=4)
    started = time.monotonic()
    result = run_job(spec)
    if result.errors:
        raise RuntimeError(f"level run failed: {result.errors[:3]}")
    return time.monotonic() - started, result.copied


def _read(bootstrap: str, topic: str, partitions: int) -> tuple[float, int]:
    started = time.monotonic()
    read = records_on(bootstrap, topic, partitions)
    return time.monotonic() - started, read


def _audit(client: ClusterClient, topic: str, window_s: int) -> tuple[float, int]:
    started = time.monotonic()
    state = read_state(client, window_s)
    counted = count_cluster(client, state, lambda t: t == topic)
    return time.monotonic() - started, counted.read


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.audit_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--size", type=int, default=100, help="value bytes per record")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    million = 1_000_000 / args.records

    with local_clusters("mirrorflow-audit-") as kafka:
        src, dst = kafka.clusters["src"].bootstrap, kafka.clusters["dst"].bootstrap
        warm_up(src, dst)
        topic = create_topic(src, args.partitions)
        create_topic(dst, args.partitions, name=topic)
        prefill(src, topic, Case(args.size, args.partitions, args.records))
        copy_s, copied = _copy(src, dst, topic)
        print(f"copy   {copy_s:7.2f}s  {copied} records  ({copy_s * million:.2f}s per million)", flush=True)
        target = ClusterClient("dst", {"bootstrap.servers": dst})
        times: dict[str, list[float]] = {"read": [], "audit": []}
        for i in range(args.rounds):
            seconds, n = _read(dst, topic, args.partitions)
            times["read"].append(seconds)
            print(f"read   {seconds:7.2f}s  {n} records", flush=True)
            seconds, n = _audit(target, topic, 600 + i)  # another window length: counted from the start
            times["audit"].append(seconds)
            if n != copied:
                raise RuntimeError(f"the audit counted {n} records, the copy made {copied}")
            print(f"audit  {seconds:7.2f}s  {n} records", flush=True)
        idle_s, idle_n = _audit(target, topic, 600 + args.rounds - 1)
        read, audit = statistics.median(times["read"]), statistics.median(times["audit"])
        print(f"{args.records} records x {args.size} B over {args.partitions} partitions, {args.rounds} rounds "
              f"alternated: copy {copy_s * million:.2f}s per million; plain read {read * million:.2f}s per million; "
              f"first audit {audit * million:.2f}s per million (median; {audit / read:.2f} of the plain read, "
              f"{audit / copy_s:.2f} of the copy); an audit with nothing new {idle_s:.2f}s ({idle_n} read)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
