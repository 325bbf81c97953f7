"""Latency to convergence through the real scheduler: platform mode, the level DAGs on their schedule.

benchmarks/latency.py starts the level jobs itself, on a clock, and leaves
Airflow out. This one leaves nothing out. In ``platform`` mode ``scripts/platform_mode.py`` starts
platform mode (PostgreSQL, Redis, two Celery workers, Spark standalone with the
Connect server) on free ports, with the demo's topology and its levels on
``schedule``, and the scheduler alone starts the runs; in ``demo`` mode ``make
demo`` does (Airflow standalone on SQLite, the same Connect server), and after
its first triggered rounds the scheduler alone starts them. Producers write ``rate``
messages per second on each of the four clusters, to a topic the topology
selects (``payments.<id>``); a watcher per cluster records when each becomes
readable there (``read_committed``). A message's latency is the time from its
produce until it is readable on all four.

Where the time goes comes from the metadata database, per level run: the
scheduling delay (the run's start after its ``run_after``), each task's wait in
the queue (queued to started on a Celery worker), and the two tasks' own
durations (``plan``; ``copy``, which includes its Spark job).

    python -m benchmarks.scheduler_latency --modes platform,demo --schedules 10s,1m --rate 2

A schedule may be ``on_data``: the levels are started by their data watcher
(docs/levels.md), and the goal is issue 34's p99 of 15 s; its runs' time is
then split further (:mod:`benchmarks.ondata_breakdown`). ``--loads quiet,busy``
measures each case also with another copy running on the machine
(:mod:`benchmarks.busy_copy`) from the stack's start to the window's end.

``--rtts 0,50,100`` (demo mode) puts the ``--far`` clusters (default c3 and c4,
the second pair: a region of their own) behind :mod:`mirrorflow_dev.shaper` with
that round trip, from everything else on the machine: Airflow, Spark, the other
pair, and this benchmark's own producers and watchers. The benchmark starts the
demo's brokers itself before ``make demo`` (which finds them running and keeps
them), the far ones advertising their shaper's port, which is the port the
topology names; 0 ms goes through the shapers too.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import ondata_breakdown
from benchmarks.common import create_topic
from benchmarks.latency import NAMES, _Produce, _Watch, converged
from mirrorflow.topology.replication import ON_DATA, parse_schedule
from mirrorflow_dev.kafka import SHARED_MACHINE_CONFIG, SHARED_MACHINE_JVM_OPTIONS, LocalKafka
from mirrorflow_dev.platform import isolated_platform, metadata_query
from mirrorflow_dev.process import free_port
from mirrorflow_dev.shaper import Shape, Shaper

REPO = Path(__file__).resolve().parents[1]
PLATFORM = [sys.executable, str(REPO / "scripts" / "platform_mode.py")]
RESULTS = REPO / "benchmarks" / "results"


RUN_ROWS = """
    SELECT r.dag_id, r.run_after, r.start_date, r.end_date, p.queued_dttm, p.start_date, p.end_date,
           c.queued_dttm, c.start_date, c.end_date
    FROM dag_run r
    LEFT JOIN task_instance p ON p.dag_id = r.dag_id AND p.run_id = r.run_id AND p.task_id = 'plan'
    JOIN task_instance c ON c.dag_id = r.dag_id AND c.run_id = r.run_id AND c.task_id = 'copy'
    WHERE r.dag_id LIKE 'mirror_level_%' AND r.state = 'success'
"""


def _moment(value: Any) -> datetime | None:
    """A timestamp as PostgreSQL (aware) or SQLite (a naive UTC string) returns it."""
    if value is None:
        return None
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def breakdown(rows: list[tuple], since: datetime, until: datetime) -> dict[str, Any]:
    """Per level, medians over its runs started in the window: scheduling delay, queue waits, task durations."""
    # times: run_after, run start, run end, plan queued/started/ended, copy queued/started/ended
    spans = {"scheduling_delay_s": (0, 1), "plan_queue_s": (3, 4), "plan_s": (4, 5), "between_tasks_s": (5, 6),
             "copy_queue_s": (6, 7), "copy_s": (7, 8), "run_s": (1, 2)}
    per_level: dict[str, dict[str, list[float]]] = {}
    for dag_id, *raw in rows:
        times = [_moment(v) for v in raw]  # run_after, run start, run end, plan q/s/e, copy q/s/e
        if times[1] is None or not since <= times[1] <= until:
            continue
        level = per_level.setdefault(dag_id, {name: [] for name in spans})
        for name, (first, second) in spans.items():
            begin, end = times[first], times[second]
            if begin is not None and end is not None:
                level[name].append((end - begin).total_seconds())
    return {dag_id: {"runs": len(v["run_s"]), **{name: _median(v[name]) for name in spans}}
            for dag_id, v in sorted(per_level.items())}


class PlatformStack:
    """Platform mode on free ports (scripts/platform_mode.py), its runs in PostgreSQL."""

    mode = "platform"

    def __init__(self, run_dir: Path, schedule: str) -> None:
        self.run_dir = run_dir
        self.env, self.bootstraps = isolated_platform(run_dir, (REPO / "topologies" / "demo.yaml").read_text(),
                                                      schedule, MIRRORFLOW_DEMO_PASSWORD="bench-only-password")

    def start(self) -> None:
        out = subprocess.run([*PLATFORM, "start", "--no-traffic"], env=self.env, capture_output=True, text=True,
                             timeout=1500)
        if out.returncode != 0:
            raise RuntimeError(f"platform mode did not start:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")

    def stop(self) -> None:
        subprocess.run([*PLATFORM, "stop"], env=self.env, capture_output=True, text=True, timeout=600)

    def rows(self, sql: str = RUN_ROWS) -> list[tuple]:
        return metadata_query(self.env, sql)


class DemoStack:
    """``make demo`` (scripts/demo.py: Airflow standalone on SQLite) on free ports, its levels on ``schedule``.

    The demo triggers its first rounds itself; from then on the scheduler alone
    starts the level runs, which is what is measured.
    """

    mode = "demo"

    def __init__(self, run_dir: Path, schedule: str) -> None:
        self.run_dir = run_dir
        text = (REPO / "topologies" / "demo.yaml").read_text() + f"replication:\n  schedule: {schedule}\n"
        env, self.bootstraps = isolated_platform(run_dir, text, schedule)
        self.env = {k: v for k, v in env.items() if not k.startswith("MIRRORFLOW_PLATFORM")}
        self.env.update({
            "MIRRORFLOW_DEMO_RUN_DIR": str(run_dir), "MIRRORFLOW_DEMO_TOPOLOGY": env["MIRRORFLOW_PLATFORM_TOPOLOGY"],
            "MIRRORFLOW_DEMO_UI_PORT": env["MIRRORFLOW_PLATFORM_UI_PORT"],
            "MIRRORFLOW_DEMO_S3_PORT": env["MIRRORFLOW_PLATFORM_S3_PORT"],
            "MIRRORFLOW_DEMO_SPARK_CONNECT_PORT": env["MIRRORFLOW_PLATFORM_SPARK_CONNECT_PORT"],
            "MIRRORFLOW_DEMO_PASSWORD": "bench-only-password", "MIRRORFLOW_DEMO_MESSAGES": "20"})

    def start(self) -> None:
        out = subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py"), "start"], env=self.env,
                             capture_output=True, text=True, timeout=1800)
        if out.returncode != 0:
            raise RuntimeError(f"the demo did not start:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")

    def stop(self) -> None:
        subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py"), "stop"], env=self.env,
                       capture_output=True, text=True, timeout=600)

    def rows(self, sql: str = RUN_ROWS) -> list[tuple]:
        import sqlite3

        conn = sqlite3.connect(self.run_dir / "airflow" / "airflow.db")
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()


STACKS = {"platform": PlatformStack, "demo": DemoStack}


class FarBrokers:
    """The demo's four brokers, started before the demo, ``far`` ones behind a shaper of ``rtt_ms`` each.

    Started as ``make demo`` starts them (``python -m mirrorflow_dev.kafka start``: detached, the
    lighter settings for a shared machine), so the demo's own start finds them running by their pid
    files and keeps them; ``make stop`` stops them. A far broker listens on a free port and advertises
    its shaper's, the port its topology entry names, so every client of it crosses the distance.
    """

    def __init__(self, kafka_run: Path, bootstraps: dict[str, str], far: list[str], rtt_ms: float) -> None:
        unknown = sorted(set(far) - set(bootstraps))
        if unknown:
            raise ValueError(f"--far: no cluster {unknown} in the demo's topology ({sorted(bootstraps)})")
        self.kafka_run, self.bootstraps, self.far, self.rtt_ms = kafka_run, bootstraps, far, rtt_ms
        self.shapers: list[Shaper] = []

    def start(self) -> None:
        ports: dict[str, int | None] = {}
        advertised: dict[str, int] = {}
        for name, bootstrap in self.bootstraps.items():
            port = int(bootstrap.rsplit(":", 1)[1])
            if name in self.far:
                own = free_port()
                self.shapers.append(Shaper(port, f"127.0.0.1:{own}", Shape(self.rtt_ms / 1000)).start())
                ports[name], advertised[name] = own, port
            else:
                ports[name] = port
        kafka = LocalKafka(self.kafka_run, names=list(ports), ports=ports, broker_config=dict(SHARED_MACHINE_CONFIG),
                           jvm_options=SHARED_MACHINE_JVM_OPTIONS, owner_pid=None)
        for name, port in advertised.items():
            kafka[name].advertised_port = port
        kafka.start()

    def stop(self) -> None:
        for shaper in self.shapers:
            shaper.stop()
        self.shapers.clear()


def duplicates(bootstrap: str, topic: str, partitions: int) -> int:
    """Copies beyond the first of any message on one cluster (read_committed, up to the high watermarks)."""
    from collections import Counter

    from confluent_kafka import Consumer, KafkaError, TopicPartition

    # enable.partition.eof: a partition whose last offsets are transaction markers ends with an EOF event.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-dups-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False, "log_level": 3,
                         "enable.partition.eof": True})
    try:
        tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=15)[1] for tp in tps}
        consumer.assign(tps)
        counts: Counter = Counter()
        left = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + 120
        while left:
            if time.monotonic() > deadline:
                raise TimeoutError(f"counting duplicates on {bootstrap}: partitions {sorted(left)} not read to "
                                   "their end")
            for msg in consumer.consume(500, 0.5):
                if msg.error() is None:
                    counts[msg.value()] += 1
                    if msg.offset() + 1 >= ends[msg.partition()]:
                        left.discard(msg.partition())
                elif msg.error().code() == KafkaError._PARTITION_EOF:
                    left.discard(msg.partition())
        return sum(n - 1 for n in counts.values())
    finally:
        consumer.close()


#: For ``on_data`` levels (issue 34): the goal p99, and the interval the warm-up and the window are sized by
#: (the watcher's default floor).
ON_DATA_GOAL_P99_S = 15.0
#: Seconds the window waits after the first messages reached every cluster (see measure).
WARM_S = 60.0
ON_DATA_EVERY_S = 2.0


def interval(schedule: str) -> float:
    """Seconds between runs a schedule allows (``on_data``: the watcher's default floor)."""
    return ON_DATA_EVERY_S if schedule == ON_DATA else parse_schedule(schedule).total_seconds()


def goal_p99(schedule: str) -> float:
    """Issue 32's goal for a clock (two intervals plus 10 s), issue 34's for ``on_data`` (15 s)."""
    return ON_DATA_GOAL_P99_S if schedule == ON_DATA else round(2 * interval(schedule) + 10, 1)


class BusyCopy:
    """:mod:`benchmarks.busy_copy` in a process of its own, copying until stopped."""

    def __init__(self, progress) -> None:
        self.progress = progress
        self.process: subprocess.Popen | None = None
        self.lines: list[str] = []
        self.copying, self.ended = threading.Event(), threading.Event()

    def start(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "benchmarks.busy_copy"], cwd=REPO,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + 300
        while not self.copying.wait(1.0):
            if self.ended.is_set() or time.monotonic() > deadline:
                raise RuntimeError(f"the busy copy did not start: {self.lines[-5:]}")
        self.progress("busy: another copy is running beside the stack")

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.strip())
            if line.startswith("busy: copying"):
                self.copying.set()
        self.ended.set()

    def stop(self) -> list[float]:
        """Stop it; the seconds of each copy it finished."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(120)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return [float(line.split(" took ")[1].split("s ")[0]) for line in self.lines if " took " in line]


def measure(mode: str, schedule: str, rate: float, run_dir: Path, progress, busy: bool = False,
            far: list[str] | None = None, rtt_ms: float | None = None) -> dict[str, Any]:
    every = interval(schedule)
    # A case starts clean: an earlier attempt's Airflow database, topics and run rows would be measured along.
    shutil.rmtree(run_dir, ignore_errors=True)
    stack = STACKS[mode](run_dir, schedule)
    bootstraps = stack.bootstraps
    load = BusyCopy(progress) if busy else None
    distance = None
    if rtt_ms is not None:
        if mode != "demo":
            raise ValueError("--rtts: the far clusters are placed in demo mode only")
        distance = FarBrokers(run_dir / "kafka", bootstraps, far or [], rtt_ms)
    where = f", {'+'.join(far or [])} {rtt_ms:g} ms away" if distance else ""
    progress(f"{mode}, schedule {schedule}{', busy' if busy else ''}{where}: starting ({run_dir})")
    try:
        if distance is not None:
            distance.start()
        stack.start()
        if load is not None:
            load.start()
        topic = f"payments.bench{uuid.uuid4().hex[:8]}"
        for bootstrap in bootstraps.values():
            create_topic(bootstrap, 2, name=topic)
        lock, stop_produce, stop_all = threading.Lock(), threading.Event(), threading.Event()
        produced: dict[bytes, float] = {}
        seen: dict[bytes, dict[str, float]] = {}
        watches = [_Watch(n, bootstraps[n], topic, 2, seen, lock, stop_all) for n in NAMES]
        producers = [_Produce(n, bootstraps[n], topic, rate, produced, lock, stop_produce) for n in NAMES]
        for thread in (*watches, *producers):
            thread.start()
        # The window opens once the tree carries the new topic: the first messages readable everywhere (the
        # first runs create the topic on every target, and platform mode's first Spark job starts its
        # executors), then WARM_S more (platform mode's first copies on fresh executors took 8-10 s instead of
        # 3-4 s for about 40 s, record 2026-11-28c), and not before two intervals.
        first = time.time()
        ready_by = time.monotonic() + 600
        while True:
            counted, done = converged(lock, produced, seen, first, first + 2)
            if counted and len(done) == len(counted):
                break
            if time.monotonic() > ready_by:
                raise TimeoutError(f"schedule {schedule}: the first messages did not reach every cluster in 600 s")
            stop_all.wait(1.0)
        window = max(4 * every, 180.0)
        window_start = max(time.time() + WARM_S, first + 2 * every)
        window_end = window_start + window
        progress(f"schedule {schedule}: producing {rate:g}/s on each cluster; measuring a {window:.0f}s window "
                 f"after {window_start - first:.0f}s")
        stop_produce.wait(max(0.0, window_end - time.time()))
        stop_produce.set()
        for thread in producers:
            thread.join(30)
        deadline = time.monotonic() + 6 * every + 600
        while True:
            counted, done = converged(lock, produced, seen, window_start, window_end)
            if len(done) == len(counted):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"schedule {schedule}: {len(done)} of {len(counted)} messages converged")
            stop_all.wait(1.0)
        stop_all.set()
        for thread in watches:
            thread.join(60)
        busy_copies = load.stop() if load is not None else None
        latencies = sorted(max(seen[v].values()) - t for v, t in counted.items())
        # The slowest messages as they went: where from, when, and how long each cluster took; the runs
        # of that moment are in the metadata database (the run dir is kept until the case runs again).
        slowest = sorted(counted.items(), key=lambda item: max(seen[item[0]].values()) - item[1])[-10:]
        slow = [{"message": v.decode(), "produced_at": datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds"),
                 "seconds_to": {c: round(at - t, 1) for c, at in sorted(seen[v].items())}}
                for v, t in reversed(slowest)]
        doubled = {name: duplicates(bootstrap, topic, 2) for name, bootstrap in bootstraps.items()}
        q = statistics.quantiles(latencies, n=100)
        out = {"mode": mode, "schedule": schedule, "busy": busy, "messages": len(latencies),
               **({"far": far, "rtt_ms": rtt_ms} if distance else {}),
               "rate_per_cluster": rate,
               "duplicates": doubled,
               "median_s": round(statistics.median(latencies), 2), "p99_s": round(q[98], 2),
               "max_s": round(latencies[-1], 2), "goal_p99_s": goal_p99(schedule), "slowest": slow,
               "where_the_time_goes": breakdown(stack.rows(), datetime.fromtimestamp(window_start - every, UTC),
                                                datetime.fromtimestamp(window_end + every, UTC))}
        if busy_copies is not None:
            out["busy_copies_s"] = busy_copies
        if schedule == ON_DATA:
            out["on_data_breakdown"] = {
                "runs": ondata_breakdown.run_spans(stack.rows(ondata_breakdown.RUN_ROWS), window_start - every,
                                                   window_end + every),
                "watcher": ondata_breakdown.watcher_waits(
                    counted, seen, ondata_breakdown.events_by_level(stack.rows(ondata_breakdown.EVENT_ROWS)))}
        progress(f"{mode}, schedule {schedule}: median {out['median_s']}s, p99 {out['p99_s']}s, max "
                 f"{out['max_s']}s over {len(latencies)} messages (goal p99 <= {out['goal_p99_s']}s); duplicates "
                 f"{doubled}")
        return out
    finally:
        if load is not None:
            load.stop()
        stack.stop()
        if distance is not None:
            distance.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scheduler_latency", description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="platform,demo")
    parser.add_argument("--schedules", default="10s,1m")
    parser.add_argument("--rate", type=float, default=2.0, help="messages per second on each cluster")
    parser.add_argument("--loads", default="quiet", help="quiet, busy (another copy running beside), or both")
    parser.add_argument("--rtts", default=None,
                        help="round trips in ms to the --far clusters, e.g. 0,50,100 (demo mode; default: none)")
    parser.add_argument("--far", default="c3,c4", help="the clusters --rtts places away (default: c3,c4)")
    parser.add_argument("--run-dir", type=Path, default=REPO / ".run" / "bench-scheduler")
    parser.add_argument("--out", default=datetime.now(UTC).strftime("%Y-%m-%d") + "-scheduler")
    args = parser.parse_args(argv)

    def progress(message: str) -> None:
        print(f"[bench] {message}", flush=True)

    results: list[dict[str, Any]] = []
    loads = [x for x in args.loads.split(",") if x]
    if set(loads) - {"quiet", "busy"}:
        parser.error(f"--loads: quiet and/or busy, not {args.loads!r}")
    rtts: list[float | None] = [float(x) for x in args.rtts.split(",") if x] if args.rtts else [None]
    far = [x for x in args.far.split(",") if x]
    for mode in [m for m in args.modes.split(",") if m]:
        for schedule in [s for s in args.schedules.split(",") if s]:
            for load in loads:
                for rtt in rtts:
                    busy = load == "busy"
                    case = f"{mode}-{schedule}-{load}" + ("" if rtt is None else f"-{rtt:g}ms")
                    try:
                        results.append(measure(mode, schedule, args.rate, args.run_dir / case, progress, busy=busy,
                                               far=far, rtt_ms=rtt))
                    except Exception as exc:  # recorded, and the other cases still run
                        progress(f"{case}: FAILED: {type(exc).__name__}: {exc}")
                        results.append({"mode": mode, "schedule": schedule, "busy": busy,
                                        **({} if rtt is None else {"far": far, "rtt_ms": rtt}),
                                        "error": f"{type(exc).__name__}: {exc}"[:2000]})
                    write_record(args.out, results)
    return 0


def write_record(name: str, results: list[dict[str, Any]]) -> None:
    """The record so far, JSON and Markdown, rewritten after every case (a later failure loses nothing)."""
    record = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "scheduler_latency": results}
    (RESULTS / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [f"# Latency through the scheduler, {record['date']}", "",
             "| mode | schedule | load | messages | median s | p99 s | max s | goal p99 s | duplicates |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        load = ("busy (another copy running)" if r.get("busy") else "quiet") + (
            f", {'+'.join(r['far'])} {r['rtt_ms']:g} ms away" if r.get("rtt_ms") is not None else "")
        if "error" in r:
            lines.append(f"| {r['mode']} | {r['schedule']} | {load} | failed: {r['error'][:300]} | | | | | |")
            continue
        lines.append(f"| {r['mode']} | {r['schedule']} | {load} | {r['messages']} | {r['median_s']} | {r['p99_s']} | "
                     f"{r['max_s']} | {r['goal_p99_s']} | {sum(r['duplicates'].values())} |")
    for r in results:
        if r.get("busy_copies_s"):
            copies = r["busy_copies_s"]
            lines.append(f"\n{r['mode']} {r['schedule']} busy: the other copy ran {len(copies)} times, "
                         f"{statistics.median(copies):.1f} s each (median)")
    lines += ["", "Where the time goes (medians per level run, seconds):", "",
              "| mode | schedule | DAG | runs | scheduling delay | plan queued | plan | between | copy queued | copy "
              "| run |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for dag_id, b in r.get("where_the_time_goes", {}).items():
            case = ondata_breakdown.case_label(r)
            lines.append(f"| {case} | {r['schedule']} | {dag_id} | {b['runs']} | {b['scheduling_delay_s']} | "
                         f"{b['plan_queue_s']} | {b['plan_s']} | {b['between_tasks_s']} | {b['copy_queue_s']} | "
                         f"{b['copy_s']} | {b['run_s']} |")
    lines += ondata_breakdown.breakdown_lines(results)
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    sys.exit(main())
