"""What compressing copies costs and saves: copy throughput by codec, and bytes stored on the target against the source.

The copier compresses its copies (mirrorflow.kafka.compression). Two measurements,
in one run on fresh local clusters (the copier in this process, no Spark: one Spark
task's ``copy_tasks``, as ``benchmarks.engine --partitions`` runs it):

- throughput: the copy matrix's sizes (a tenth of its records by default) and
  partition counts, each case copied with every ``--codecs`` in turn, ``--rounds``
  times, medians side by side; once with the matrix's random values (nothing to
  gain, the CPU spent is the whole cost) and once with JSON order records;
- storage: JSON order records produced with each ``--sources`` codec, copied with
  each copy codec; the bytes of the partitions' log segments on both brokers' disks.

Numbers go to stdout; the record is kept by hand in ``results/`` (docs/benchmarks.md,
"Compression of copies")::

    python -m benchmarks.compression --rounds 3
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import Case, create_topic, local_clusters, prefill, warm_up
from benchmarks.mm2 import recreate_topic
from benchmarks.throughput import PARTITIONS, RECORDS, SIZES
from mirrorflow.copy.engine.executor import copy_tasks
from mirrorflow.copy.task import PartitionTask


def order_values(size: int, seed: int = 44) -> Callable[[int], bytes]:
    """JSON order records of about ``size`` bytes (at least 100): the same fields, varying ids, amounts and items.

    Every record is made fresh: repeating a pool of records would let a codec find whole
    records again inside one batch, and compress better than any real topic.
    """
    rng = random.Random(seed)
    skus = [f"SKU-{rng.randrange(10**6):06d}" for _ in range(500)]

    def one(i: int) -> bytes:
        order: dict = {"order_id": f"o-{i:09d}", "customer_id": f"c-{rng.randrange(10**5):05d}",
                       "status": rng.choice(["CREATED", "PAID", "SHIPPED"]), "currency": "EUR",
                       "created_at": 1_764_000_000_000 + i * 37 + rng.randrange(37),
                       "items": [{"sku": rng.choice(skus), "quantity": rng.randint(1, 5),
                                  "unit_price": rng.randint(99, 99_999) / 100}
                                 for _ in range(max(0, (size - 170) // 62))]}
        if size >= 250:
            order["shipping"] = {"country": rng.choice(["DE", "FR", "NL", "IT", "ES"]), "method": "standard"}
        return json.dumps(order).encode()

    return one


def log_bytes(data_dir: Path, topic: str, partitions: int) -> int:
    """Bytes of the topic's log segments on one broker's disk (indexes are preallocated: left out)."""
    return sum(f.stat().st_size for p in range(partitions) for f in (data_dir / f"{topic}-{p}").glob("*.log"))


def copy_all(src: str, dst: str, topic: str, partitions: int, records: int, codec: str, threads: int = 4) -> float:
    """Every partition of ``topic`` into a fresh target topic, as one Spark task copies them; the seconds."""
    recreate_topic(dst, topic, partitions)
    link = f"compression-{uuid.uuid4().hex[:8]}.L1"
    per = [records // partitions + (1 if p < records % partitions else 0) for p in range(partitions)]
    tasks = [PartitionTask(link_id=link, level=1, source="src", target="dst", topic=topic, partition=p,
                           end_offset=per[p], max_message_bytes=1_048_588) for p in range(partitions)]
    clusters = {"src": {"bootstrap.servers": src}, "dst": {"bootstrap.servers": dst, "compression.type": codec}}
    started = time.monotonic()
    results = list(copy_tasks(clusters, tasks, threads))
    seconds = time.monotonic() - started
    errors = [r["error"] for r in results if r["error"]]
    if errors or sum(r["copied"] for r in results) != records:
        raise RuntimeError(f"copy with {codec}: {errors[:3]}, {sum(r['copied'] for r in results)} of {records}")
    return seconds


def throughput(src: str, dst: str, args: argparse.Namespace) -> None:
    codecs = args.codecs.split(",")
    print(f"\nthroughput: MB/s of values copied (median of {args.rounds}, codecs alternated), "
          f"and each codec's time against none's", flush=True)
    print(f"{'values':7s} {'case':12s} {'records':>8s} " + " ".join(f"{c:>8s}" for c in codecs)
          + " " + " ".join(f"{c + '/none':>10s}" for c in codecs if c != "none"), flush=True)
    for values in args.values.split(","):
        for size in args.sizes:
            for partitions in args.partitions:
                case = Case(size, partitions, RECORDS[size] // args.scale)
                topic = create_topic(src, partitions)
                prefill(src, topic, case, value_of=order_values(size) if values == "json" else None)
                sample = order_values(size, seed=1)
                megabytes = (sum(len(sample(i)) for i in range(1000)) / 1000 if values == "json" else size) \
                    * case.records / 1e6
                times: dict[str, list[float]] = {c: [] for c in codecs}
                for _ in range(args.rounds):
                    for codec in codecs:
                        times[codec].append(copy_all(src, dst, topic, partitions, case.records, codec))
                median = {c: statistics.median(t) for c, t in times.items()}
                print(f"{values:7s} {f'{size} B x {partitions}':12s} {case.records:8d} "
                      + " ".join(f"{megabytes / median[c]:8.1f}" for c in codecs) + " "
                      + " ".join(f"{median[c] / median['none']:10.2f}" for c in codecs if c != "none"),
                      flush=True)


def storage(kafka, src: str, dst: str, args: argparse.Namespace) -> None:
    codecs = args.codecs.split(",")
    print(f"\nstorage: {args.storage_records:,} JSON order records of about {args.storage_size} B, one partition; "
          f"bytes of the log segments on disk, and the target's against the source's", flush=True)
    print(f"{'source':7s} {'uncompressed':>12s} {'source':>10s} " + " ".join(f"{c:>18s}" for c in codecs), flush=True)
    value_of = order_values(args.storage_size)
    raw = sum(len(value_of(i)) + 16 for i in range(args.storage_records))
    for source_codec in args.sources.split(","):
        topic = create_topic(src, 1)
        prefill(src, topic, Case(args.storage_size, 1, args.storage_records), codec=source_codec, value_of=value_of)
        source = log_bytes(kafka.clusters["src"].data_dir, topic, 1)
        stored = {}
        for codec in codecs:
            copy_all(src, dst, topic, 1, args.storage_records, codec)
            stored[codec] = log_bytes(kafka.clusters["dst"].data_dir, topic, 1)
        print(f"{source_codec:7s} {raw:12,d} {source:10,d} "
              + " ".join(f"{stored[c]:10,d} ({stored[c] / source:4.2f}x)" for c in codecs), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compression", description=__doc__.splitlines()[0])
    parser.add_argument("--codecs", default="none,lz4,zstd", help="copy codecs, the first one the baseline")
    parser.add_argument("--sources", default="zstd,lz4", help="source codecs of the storage measurement")
    parser.add_argument("--values", default="random,json", help="value kinds of the throughput measurement")
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=list(SIZES))
    parser.add_argument("--partitions", type=lambda s: [int(x) for x in s.split(",")], default=list(PARTITIONS))
    parser.add_argument("--scale", type=int, default=10, help="the matrix's records divided by this")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--storage-records", type=int, default=20_000)
    parser.add_argument("--storage-size", type=int, default=800, help="bytes per JSON record, about")
    parser.add_argument("--only", choices=["throughput", "storage"], default=None)
    args = parser.parse_args(argv)
    if args.codecs.split(",")[0] != "none":
        parser.error("--codecs must start with none, the baseline")
    with local_clusters("mirrorflow-compression-") as kafka:
        src, dst = kafka.clusters["src"].bootstrap, kafka.clusters["dst"].bootstrap
        warm_up(src, dst)
        if args.only != "throughput":
            storage(kafka, src, dst, args)
        if args.only != "storage":
            throughput(src, dst, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
