"""``make bench``: every benchmark against local real clusters, in one run, results kept in the repo.

    python -m benchmarks.run                 # everything (about an hour on 2 cores, half of it latency)
    python -m benchmarks.run --quick         # a tenth of the records per case: a smoke run
    python -m benchmarks.run --only throughput --sizes 1000 --partitions 8

Two single-broker KRaft clusters (``src``, ``dst``) are started for the run and
stopped at its end, and a local Spark Connect server for the contenders that run
on one (its start and first jobs are measured once, before any other clock). Results go to ``benchmarks/results/<date>.json``, ``.md`` and
``.png``, and the latest run replaces the generated block of
``docs/benchmarks.md``. Nothing here is a pass/fail test: the numbers are for
reading, side by side.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import fixed_cost, latency, report, spark_start, throughput
from benchmarks.common import Case, stop_on_sigterm, warm_up
from mirrorflow_dev.kafka import KafkaDistribution, LocalKafka
from mirrorflow_dev.spark import LocalConnectServer

SECTIONS = ("spark_start", "threads", "throughput", "volume", "empty_batch", "planning", "latency")
#: What --carry may take from an earlier record: everything but the throughput tables.
CARRIABLE = ("spark_start", "threads", "empty_batch", "planning", "latency", "peak_memory", "peak_memory_connect",
             "connect_server")
#: The sections whose contenders may run on the Spark Connect server.
CONNECT_SECTIONS = ("throughput", "volume", "empty_batch")
#: The default schedule (replication.schedule) and the shortest the level runs keep up with here.
LATENCY_SCHEDULES = ("5m", "30s", "15s")
#: The same on a Spark Connect server, where a level run costs about a second instead of a Spark start.
LATENCY_CONNECT_SCHEDULES = ("15s", "10s")  # 10 s: the shortest a topology allows
PLANNING_SIZES = (100, 1000, 10_000)


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def start_connect_server(run_dir: Path) -> tuple[LocalConnectServer, dict[str, Any]]:
    """Start the Spark Connect server and run two trivial jobs: its one-time costs, measured apart."""
    from mirrorflow.spark import session

    def job(spark: Any) -> float:
        import pyarrow as pa

        started = time.monotonic()
        spark.range(0, 2, 1, 2).mapInArrow(
            lambda batches: (pa.RecordBatch.from_pydict({"n": [b.num_rows]}) for b in batches), "n long").collect()
        return time.monotonic() - started

    started = time.monotonic()
    server = LocalConnectServer(run_dir=run_dir / "spark-connect").start()
    start_s = time.monotonic() - started
    with session(server.url) as spark:
        first = job(spark)  # the session's Python workers start here
    with session(server.url) as spark:  # a later client of the same session: warm workers
        warm = job(spark)
    measured = {"start_s": round(start_s, 2), "first_job_s": round(first, 2), "warm_job_s": round(warm, 3)}
    progress(f"Spark Connect server on {server.url}: up in {start_s:.1f}s, first job {first:.2f}s, "
             f"a later client's job {warm:.3f}s")
    return server, measured


def contenders_of(args: argparse.Namespace) -> tuple[str, ...]:
    return tuple(c.strip() for c in args.contenders.split(",")) if args.contenders else throughput.CONTENDERS


def main(argv: list[str] | None = None) -> int:
    stop_on_sigterm()
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the records per case")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}")
    parser.add_argument("--sizes", default=None, help="message sizes, e.g. 100,1000")
    parser.add_argument("--partitions", default=None, help="partition counts, e.g. 1,8")
    parser.add_argument("--rounds", type=int, default=1,
                        help="throughput and volume: run the contenders this many times each, keep the medians")
    parser.add_argument("--contenders", default=None, help=f"subset of {throughput.CONTENDERS}, comma-separated")
    parser.add_argument("--schedules", default=",".join(LATENCY_SCHEDULES), help="latency: schedules to measure")
    parser.add_argument("--connect-schedules", default=",".join(LATENCY_CONNECT_SCHEDULES),
                        help="latency: schedules to measure with the level runs on a Spark Connect server")
    parser.add_argument("--record", default=None,
                        help="the dated record to write or extend (default: today; a run past midnight keeps its day)")
    parser.add_argument("--out", type=Path, default=report.REPO / "benchmarks" / "results")
    parser.add_argument("--carry", type=Path, default=None,
                        help="an earlier record (JSON) to take the sections this run skips from; they are marked "
                             "as carried over with their date")
    parser.add_argument("--no-docs", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args(argv)
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown section(s) {sorted(unknown)}; choose from {SECTIONS}")

    started = time.monotonic()
    results: dict[str, Any] = {"date": args.record or dt.date.today().isoformat(), "command": " ".join(["make bench", *(argv or sys.argv[1:])]),
                               "machine": report.machine(), "quick": args.quick}
    throughput.prepare(progress)
    run_dir = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-"))
    kafka = LocalKafka(run_dir, names=("src", "dst"), distribution=KafkaDistribution.fetch(), heap_max="1g",
                       progress=progress)
    kafka.start()
    connect: LocalConnectServer | None = None
    try:
        src, dst = kafka.clusters["src"].bootstrap, kafka.clusters["dst"].bootstrap
        warm_up(src, dst)
        connect_url = None
        if set(sections) & set(CONNECT_SECTIONS) and any("Connect" in c for c in contenders_of(args)):
            connect, results["connect_server"] = start_connect_server(run_dir)
            connect_url = connect.url
        if "spark_start" in sections:
            results["spark_start"] = spark_start.measure(progress=progress)
        if "threads" in sections:
            results["threads"] = throughput.threads_ablation(src, dst, progress=progress)
        if "throughput" in sections:
            cases = throughput.cases(args.quick)
            if args.sizes:
                cases = [c for c in cases if c.size in {int(x) for x in args.sizes.split(",")}]
            if args.partitions:
                cases = [c for c in cases if c.partitions in {int(x) for x in args.partitions.split(",")}]
            contenders = contenders_of(args)
            largest: Case = max(cases, key=lambda c: (c.bytes, c.partitions))
            rows = []
            for case in cases:
                rows.append(throughput.measure_case(src, dst, case, progress=progress, contenders=contenders,
                                                    memory_for="mirrorflow EOS" if case == largest else None,
                                                    rounds=args.rounds, connect_url=connect_url,
                                                    connect_pid=connect.pid if connect else None))
                results["throughput"] = rows
            memory = rows[cases.index(largest)]["runs"].get("mirrorflow EOS", {}).get("memory")
            case_name = f"{largest.size:,} B x {largest.partitions} partitions, {largest.records:,} records"
            if memory:
                results["peak_memory"] = {"case": case_name, **memory}
            memory = rows[cases.index(largest)]["runs"].get("mirrorflow EOS (Connect)", {}).get("memory")
            if memory:
                results["peak_memory_connect"] = {"case": case_name, **memory}
        if "volume" in sections:
            scale = 10 if args.quick else 1
            results["volume"] = [throughput.measure_case(src, dst, Case(c.size, c.partitions, c.records // scale),
                                                         progress=progress, contenders=contenders_of(args),
                                                         rounds=args.rounds, connect_url=connect_url)
                                 for c in throughput.VOLUME]
        if "empty_batch" in sections:
            results["empty_batch"] = fixed_cost.empty_batch(src, dst, runs=3, progress=progress,
                                                            connect_url=connect_url)
        if "planning" in sections:
            results["planning"] = [fixed_cost.planning(src, dst, n, progress=progress) for n in PLANNING_SIZES]
        kafka.stop()
        if "latency" in sections:
            kafka = LocalKafka(run_dir / "tree", names=latency.NAMES, distribution=KafkaDistribution.fetch(),
                               progress=progress)
            kafka.start()
            clusters = {n: kafka.clusters[n].bootstrap for n in latency.NAMES}
            warm_up(*clusters.values())
            # Into the results only once every schedule is measured: a run that fails half-way must
            # not replace a record's latency (or the one it carries) with an empty list.
            measured_latency = []
            for schedule in (s.strip() for s in args.schedules.split(",") if s.strip()):
                measured_latency.append(latency.measure(clusters, schedule, progress=progress))
            connect_schedules = [s.strip() for s in args.connect_schedules.split(",") if s.strip()]
            if connect_schedules:
                if connect is None:
                    connect, results["connect_server"] = start_connect_server(run_dir)
                for schedule in connect_schedules:
                    measured_latency.append(latency.measure(clusters, schedule, progress=progress,
                                                            connect_url=connect.url))
            results["latency"] = measured_latency
    except BaseException:
        progress(f"the brokers' data and logs are kept in {run_dir} for a look; delete it after")
        raise
    else:
        kafka.stop()
        shutil.rmtree(run_dir, ignore_errors=True)  # gigabytes of copies; nothing in it is kept
    finally:
        if connect is not None:
            connect.stop()
        kafka.stop()
        results["total_minutes"] = round((time.monotonic() - started) / 60, 1)
        measured = [key for key in results if key not in ("date", "command", "machine", "quick", "total_minutes")]
        if measured:
            merged = report.merge_same_day(results, args.out)
            if args.carry:
                merged = report.carry(merged, args.carry, CARRIABLE)
            written = report.write(merged, args.out, **({"docs": None} if args.no_docs else {}))
            progress(f"results: {', '.join(str(p) for p in written.values() if p)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
