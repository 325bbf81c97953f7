"""Copy throughput and the empty micro-batch with one cluster far away: 0, 50 and 100 ms of round trip.

One cluster of the pair is reached only through :mod:`mirrorflow_dev.shaper` (its broker
advertises the shaper's port); the shaper is started again with each round trip, the
contenders run side by side in one run, rounds alternated:

- ``mirrorflow``: the copier as one Spark task runs it (``copy_tasks``, exactly once,
  the default ``copy_threads``), every partition of the topic;
- ``raw loop``: one consume-and-produce loop of confluent-kafka, not exactly once (the
  client's own ceiling);
- ``mm2 eos``: MirrorMaker 2, dedicated mode, exactly once (its JVM start included,
  as in the throughput matrix);
- ``empty batch``: a whole level run (``run_job`` in this process: plan, checkpoints,
  end offsets) with nothing to copy, the fixed cost every micro-batch pays.

``--far src`` (the default) puts the source away, MirrorMaker 2's advised layout
(consume remote, produce local); ``--far dst`` the target, where every commit
crosses the distance. Numbers to stdout and, with ``--record``, to
``benchmarks/results/<date>-distance.json`` and ``.md``.

    python -m benchmarks.distance --megabytes 100 --sizes 1000,10000 --rtts 0,50,100 --record
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.common import Case, create_topic, prefill, warm_up
from benchmarks.engine import engine_copy_many
from benchmarks.mm2 import recreate_topic, run_mm2
from benchmarks.raw_loop import raw_copy
from mirrorflow.copy.job import run_job
from mirrorflow.copy.spec import JobSpec, LinkJob
from mirrorflow_dev.kafka import KafkaDistribution, LocalCluster
from mirrorflow_dev.process import free_port
from mirrorflow_dev.shaper import Shape, Shaper

RESULTS = Path(__file__).resolve().parent / "results"
PARTITIONS = 8


def progress(message: str) -> None:
    print(f"[distance {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def request_seconds(bootstrap: str, count: int = 20) -> float:
    """The median of ``count`` metadata requests on an open connection: the round trip a client sees."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=30)
    times = []
    for _ in range(count):
        started = time.monotonic()
        admin.list_topics(timeout=30)
        times.append(time.monotonic() - started)
    return statistics.median(times)


def empty_batch(src: str, dst: str, topic: str) -> float:
    """One level run that finds everything copied already: the fixed cost of a micro-batch."""
    spec = JobSpec(level=1, run_id=f"distance-{uuid.uuid4().hex[:6]}", topics=(topic,), slots=1,
                   clusters={"src": {"bootstrap.servers": src}, "dst": {"bootstrap.servers": dst}},
                   links=(LinkJob("src.L1", 1, "src", "dst"),))
    started = time.monotonic()
    result = run_job(spec)
    seconds = time.monotonic() - started
    if not result.ok:
        raise RuntimeError(f"empty batch: {result.summary()['errors']}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.distance", description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=100.0, help="copied per case (records: MB / size)")
    parser.add_argument("--sizes", default="1000,10000", help="record sizes in bytes, comma-separated")
    parser.add_argument("--rtts", default="0,50,100", help="round trips in ms, comma-separated")
    parser.add_argument("--far", choices=("src", "dst"), default="src")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-mm2", action="store_true")
    parser.add_argument("--record", action="store_true", help="write benchmarks/results/<date>-distance.*")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rtts = [float(r) for r in args.rtts.split(",")]
    run_dir = Path(tempfile.mkdtemp(prefix="mirrorflow-distance-"))
    distribution = KafkaDistribution.fetch()
    proxy = free_port()
    clusters = {name: LocalCluster(name, run_dir / name, free_port(), free_port(), distribution,
                                   advertised_port=proxy if name == args.far else None, progress=progress)
                for name in ("src", "dst")}
    far = clusters[args.far]
    shaper = Shaper(proxy, far.own_bootstrap, Shape(0.0)).start()
    rows: list[dict[str, Any]] = []
    try:
        for cluster in clusters.values():
            cluster.start()
        src, dst = clusters["src"].bootstrap, clusters["dst"].bootstrap
        warm_up(src, dst)
        topics, records = {}, {size: int(args.megabytes * 1e6 / size) for size in sizes}
        for size in sizes:
            topics[size] = create_topic(src, PARTITIONS)
            prefill(src, topics[size], Case(size, PARTITIONS, records[size]))
        for round_no in range(args.rounds):
            for rtt in (rtts if round_no % 2 == 0 else list(reversed(rtts))):
                shaper.stop()
                shaper = Shaper(proxy, far.own_bootstrap, Shape(rtt / 1000)).start()
                near = clusters["dst" if args.far == "src" else "src"]
                for where, cluster in (("far", far), ("near", near)):
                    rows.append({"rtt_ms": rtt, "size": 0, "contender": f"request {where}", "round": round_no,
                                 "seconds": request_seconds(cluster.bootstrap)})
                for size in sizes:
                    topic, count = topics[size], records[size]
                    mb = size * count / 1e6

                    def row(contender: str, seconds: float, **extra: Any) -> None:
                        rows.append({"rtt_ms": rtt, "size": size, "contender": contender, "seconds": seconds,
                                     "mb_per_s": mb / seconds, "round": round_no, **extra})
                        progress(f"rtt {rtt:g} ms, {size} B x {PARTITIONS}: {contender} {seconds:.2f}s "
                                 f"({mb / seconds:.1f} MB/s)")

                    recreate_topic(dst, topic, PARTITIONS)
                    row("raw loop", raw_copy(src, dst, topic, PARTITIONS, count)["seconds"])
                    recreate_topic(dst, topic, PARTITIONS)
                    result = engine_copy_many(src, dst, topic, PARTITIONS, count, exactly_once=True,
                                              threads=4)
                    row("mirrorflow", result["seconds"], transactions=result["transactions"])
                    if not args.no_mm2:
                        recreate_topic(dst, topic, PARTITIONS)
                        mm2 = run_mm2(src, dst, topic, count, tasks_max=PARTITIONS, exactly_once=True,
                                      workdir=run_dir / f"mm2-{round_no}-{rtt:g}-{size}", progress=progress)
                        row("mm2 eos", mm2["seconds"])
                empty_topic = topics[sizes[0]]
                recreate_topic(dst, empty_topic, PARTITIONS)
                empty_batch(src, dst, empty_topic)  # copies everything once: the link's checkpoints, not timed
                for _ in range(3):  # three, the median kept
                    rows.append({"rtt_ms": rtt, "size": 0, "contender": "empty batch", "round": round_no,
                                 "seconds": empty_batch(src, dst, empty_topic)})
                progress(f"rtt {rtt:g} ms: empty batch {rows[-1]['seconds']:.2f}s")
    finally:
        shaper.stop()
        for cluster in clusters.values():
            cluster.stop()
    summary = summarize(rows, args.far)
    print(summary)
    if args.record:
        stem = RESULTS / f"{dt.date.today().isoformat()}-distance-{args.far}"
        stem.with_suffix(".json").write_text(json.dumps({"far": args.far, "megabytes": args.megabytes,
                                                         "partitions": PARTITIONS, "rows": rows}, indent=1))
        stem.with_suffix(".md").write_text(summary + "\n")
        progress(f"written {stem}.json and .md")
    return 0


def summarize(rows: list[dict[str, Any]], far: str) -> str:
    """Medians per round trip: MB/s of each contender by size, and the empty batch, with the ratios the goals use."""
    def median(rtt: float, contender: str, size: int, key: str) -> float | None:
        values = [r[key] for r in rows if r["rtt_ms"] == rtt and r["contender"] == contender and r["size"] == size]
        return statistics.median(values) if values else None

    rtts = sorted({r["rtt_ms"] for r in rows})
    sizes = sorted({r["size"] for r in rows if r["size"]})
    lines = [f"# Distance: the {far} cluster away ({PARTITIONS} partitions, medians)", "",
             "| rtt ms | size B | mirrorflow MB/s | raw loop MB/s | mm2 eos MB/s | mirrorflow / its 0 ms | "
             "mirrorflow / mm2 |", "|---|---|---|---|---|---|---|"]
    for rtt in rtts:
        for size in sizes:
            mf, raw, mm2 = (median(rtt, c, size, "mb_per_s") for c in ("mirrorflow", "raw loop", "mm2 eos"))
            base = median(rtts[0], "mirrorflow", size, "mb_per_s")
            lines.append(f"| {rtt:g} | {size} | {_f(mf)} | {_f(raw)} | {_f(mm2)} | "
                         f"{_f(mf / base if mf and base else None, 2)} | {_f(mf / mm2 if mf and mm2 else None, 2)} |")
    lines += ["", "| rtt ms | metadata request far ms | near ms | empty batch s | / its 0 ms |",
              "|---|---|---|---|---|"]
    base = median(rtts[0], "empty batch", 0, "seconds")
    for rtt in rtts:
        s = median(rtt, "empty batch", 0, "seconds")
        far_ms, near_ms = (median(rtt, f"request {w}", 0, "seconds") for w in ("far", "near"))
        lines.append(f"| {rtt:g} | {_f(far_ms * 1000 if far_ms else None)} | {_f(near_ms * 1000 if near_ms else None)}"
                     f" | {_f(s, 2)} | {_f(s / base if s and base else None, 2)} |")
    return "\n".join(lines)


def _f(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


if __name__ == "__main__":
    raise SystemExit(main())
