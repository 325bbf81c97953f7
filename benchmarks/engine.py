"""The copy engine alone: ``copy_partition`` in this process, no Spark, against real brokers.

What the throughput table cannot separate: the per-record cost of the copier
and what the transaction size costs, without Spark's start-up around them.
Used to check a change to ``mirrorflow.copy.engine.partition`` before the full
benchmark; its numbers go to stdout, not to the record.

    python -m benchmarks.engine --size 100 --records 1000000 --txn-records 5000,20000
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

from benchmarks.common import Case, create_topic, prefill, start_clusters, warm_up
from benchmarks.mm2 import recreate_topic
from benchmarks.raw_loop import raw_copy
from mirrorflow.copy.engine.executor import copy_tasks
from mirrorflow.copy.engine.partition import copy_partition
from mirrorflow.copy.task import PartitionTask
from mirrorflow.kafka import ClusterClient


def engine_copy(src: str, dst: str, topic: str, records: int, *, exactly_once: bool, txn_records: int,
                txn_seconds: float | None = None, source_config: dict | None = None) -> dict:
    """One copy of partition 0 of ``topic`` into a fresh, empty target topic."""
    recreate_topic(dst, topic, 1)
    task = PartitionTask(link_id=f"engine-{uuid.uuid4().hex[:8]}.L1", level=1, source="src", target="dst",
                         topic=topic, partition=0, end_offset=records, txn_records=txn_records,
                         start_offset=0, exactly_once=exactly_once,
                         **({} if txn_seconds is None else {"txn_max_seconds": txn_seconds}))
    started = time.monotonic()
    result = copy_partition(task, ClusterClient("src", {"bootstrap.servers": src, **(source_config or {})}),
                            ClusterClient("dst", {"bootstrap.servers": dst}))
    seconds = time.monotonic() - started
    if not result.ok or result.copied != records:
        raise RuntimeError(f"engine copy: {result.error or ''} copied {result.copied} of {records}")
    return {"seconds": seconds, "transactions": result.transactions}


def engine_copy_many(src: str, dst: str, topic: str, partitions: int, records: int, *, exactly_once: bool,
                     threads: int) -> dict:
    """Every partition of ``topic`` as one Spark task would copy it: ``copy_tasks`` with ``threads``."""
    recreate_topic(dst, topic, partitions)
    link = f"engine-{uuid.uuid4().hex[:8]}.L1"
    per = [records // partitions + (1 if p < records % partitions else 0) for p in range(partitions)]
    tasks = [PartitionTask(link_id=link, level=1, source="src", target="dst", topic=topic, partition=p,
                           end_offset=per[p], exactly_once=exactly_once)
             for p in range(partitions)]
    started = time.monotonic()
    results = list(copy_tasks({"src": {"bootstrap.servers": src}, "dst": {"bootstrap.servers": dst}}, tasks,
                              threads))
    seconds = time.monotonic() - started
    copied = sum(r["copied"] for r in results)
    errors = [r["error"] for r in results if r["error"]]
    if errors or copied != records:
        raise RuntimeError(f"engine copy: {errors[:3]} copied {copied} of {records}")
    return {"seconds": seconds, "transactions": sum(r["transactions"] for r in results)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.engine", description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--txn-records", default="5000")
    parser.add_argument("--txn-seconds", default="", help="comma-separated; empty: the copier's default")
    parser.add_argument("--partitions", type=int, default=1,
                        help="more than 1: copy every partition through copy_tasks (one Spark task's path)")
    parser.add_argument("--threads", type=int, default=4, help="copy_threads, with --partitions")
    parser.add_argument("--source-config", default="",
                        help="librdkafka settings for the reader, k=v,k=v (one partition only)")
    parser.add_argument("--rounds", type=int, default=2, help="alternate the variants this many times")
    parser.add_argument("--no-raw", action="store_true", help="leave the raw loop out (to profile the copier alone)")
    args = parser.parse_args(argv)
    run_dir = Path(tempfile.mkdtemp(prefix="mirrorflow-engine-"))
    kafka = start_clusters(run_dir)
    try:
        src, dst = kafka.clusters["src"].bootstrap, kafka.clusters["dst"].bootstrap
        warm_up(src, dst)
        topic = create_topic(src, args.partitions)
        prefill(src, topic, Case(args.size, args.partitions, args.records))

        cpu = [time.process_time()]

        def show(name: str, seconds: float, extra: str = "") -> None:
            # CPU of this process (every thread, librdkafka's included) since the previous line
            used, cpu[0] = time.process_time() - cpu[0], time.process_time()
            print(f"{name:28s} {seconds:6.2f}s  {seconds / args.records * 1e6:5.1f} us/record  cpu {used:5.2f}s"
                  f"{extra}", flush=True)

        for _ in range(args.rounds):
            recreate_topic(dst, topic, args.partitions)
            cpu[0] = time.process_time()
            if not args.no_raw:
                show("raw loop", raw_copy(src, dst, topic, args.partitions, args.records)["seconds"])
            if args.partitions > 1:
                for eos in (True, False):
                    r = engine_copy_many(src, dst, topic, args.partitions, args.records, exactly_once=eos,
                                         threads=args.threads)
                    show(f"{'EOS' if eos else 'ALO'} {args.partitions} partitions, {args.threads} threads",
                         r["seconds"], f"  ({r['transactions']} commits)")
                continue
            source_config = dict(kv.split("=", 1) for kv in args.source_config.split(",") if kv)
            seconds_choices = [float(x) for x in args.txn_seconds.split(",") if x] or [None]
            for txn in (int(x) for x in args.txn_records.split(",")):
                for txn_s in seconds_choices:
                    for eos in (True, False):
                        r = engine_copy(src, dst, topic, args.records, exactly_once=eos, txn_records=txn,
                                        txn_seconds=txn_s, source_config=source_config)
                        label = f"{'EOS' if eos else 'ALO'} txn_records={txn}" + (f" {txn_s}s" if txn_s else "")
                        show(label, r["seconds"], f"  ({r['transactions']} commits)")
    finally:
        kafka.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
