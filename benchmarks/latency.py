"""Latency to convergence in the four-cluster tree under a steady produce rate on every cluster.

The tree is the demo's shape: pairs (c1, c2) and (c3, c4) at level 1 under a
level-3 root, so a message reaches the far pair by a level-3 copy and the
fourth cluster by a level-1 copy after that. Each level runs on its schedule
as the level DAGs do: a run starts at every schedule tick; a run still going
at the next tick delays that run until it ends (``max_active_runs=1``, no
catch-up). Each run is the real job: ``spark-submit`` of
``spark_jobs/mirror_level.py`` with the spec the level DAG would build. The
scheduler itself is not in the loop (no Airflow task start-up), so the numbers
are a floor for what the DAGs add; the empty micro-batch section measures that
part on its own.

Producers write ``rate`` messages per second to each cluster, each carrying
its produce time; a watcher per cluster records when each message becomes
readable there (``read_committed``). A message's latency is the time from its
produce until it is readable on all four clusters. Messages produced during
the measurement window are counted; the run ends once all of them converged.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.common import create_topic
from benchmarks.mirrorflow_copy import submit
from mirrorflow.copy.spec import build_spec
from mirrorflow.topology import parse_topology
from mirrorflow.topology.replication import parse_schedule
from mirrorflow.topology.routes import effective_links

NAMES = ("c1", "c2", "c3", "c4")
TREE = "{level: 3, children: [{level: 1, children: [c1, c2]}, {level: 1, children: [c3, c4]}]}"


class _Watch(threading.Thread):
    def __init__(self, cluster: str, bootstrap: str, topic: str, partitions: int, seen: dict, lock: threading.Lock,
                 stop: threading.Event) -> None:
        super().__init__(name=f"watch-{cluster}", daemon=True)
        self.cluster, self.seen, self.lock, self.stop_ = cluster, seen, lock, stop
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-lat-{uuid.uuid4().hex[:6]}",
                                  "isolation.level": "read_committed", "enable.auto.commit": False,
                                  "fetch.wait.max.ms": 20, "log_level": 3})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])

    def run(self) -> None:
        try:
            while not self.stop_.is_set():
                msgs = self.consumer.consume(500, 0.1)
                now = time.time()
                with self.lock:
                    for m in msgs:
                        if m.error() is None:
                            self.seen.setdefault(m.value(), {}).setdefault(self.cluster, now)
        finally:
            self.consumer.close()


class _Produce(threading.Thread):
    def __init__(self, cluster: str, bootstrap: str, topic: str, rate: float, produced: dict, lock: threading.Lock,
                 stop: threading.Event) -> None:
        super().__init__(name=f"produce-{cluster}", daemon=True)
        self.cluster, self.topic, self.rate, self.produced, self.lock, self.stop_ = \
            cluster, topic, rate, produced, lock, stop
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all", "log_level": 3})

    def run(self) -> None:
        seq, start = 0, time.monotonic()
        while not self.stop_.is_set():
            due = start + seq / self.rate
            if self.stop_.wait(max(0.0, due - time.monotonic())):
                break
            value = f"{self.cluster}|{seq}".encode()
            with self.lock:
                self.produced[value] = time.time()
            self.producer.produce(self.topic, value, key=value)
            self.producer.poll(0)
            seq += 1
        self.producer.flush(30)


class _Level(threading.Thread):
    """One level's schedule: a run per tick, never two at once, no catch-up."""

    def __init__(self, level: int, every: float, run: Callable[[], dict], stop: threading.Event) -> None:
        super().__init__(name=f"level-{level}", daemon=True)
        self.level, self.every, self.run_, self.stop_ = level, every, run, stop
        self.durations: list[float] = []
        self.late = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        next_tick = time.monotonic()
        try:
            while not self.stop_.is_set():
                started = time.monotonic()
                self.run_()
                self.durations.append(time.monotonic() - started)
                next_tick += self.every
                if time.monotonic() > next_tick:  # overran: the next run starts now, missed ticks are dropped
                    self.late += 1
                    next_tick = time.monotonic()
                self.stop_.wait(max(0.0, next_tick - time.monotonic()))
        except BaseException as exc:  # reported by the caller
            self.error = exc


def converged(lock: threading.Lock, produced: dict[bytes, float], seen: dict[bytes, dict[str, float]],
              window_start: float, window_end: float) -> tuple[dict[bytes, float], list[bytes]]:
    """The messages produced in the window (value: produce time), and those of them readable on every cluster."""
    with lock:
        window = {v: t for v, t in produced.items() if window_start <= t < window_end}
        return window, [v for v in window if len(seen.get(v, {})) == len(NAMES)]


def measure(clusters: dict[str, str], schedule: str, *, rate: float = 20.0, partitions: int = 2,
            progress: Callable[[str], None], connect_url: str | None = None) -> dict[str, Any]:
    """``connect_url``: every level run is a client of that Spark Connect server instead of a ``spark-submit``."""
    every = parse_schedule(schedule).total_seconds()
    window = max(2 * every, 120.0)  # at least two ticks of each level
    topic = f"bench-lat-{uuid.uuid4().hex[:8]}"
    for bootstrap in clusters.values():
        create_topic(bootstrap, partitions, name=topic)
    lines = "\n".join(f'  {n}: {{bootstrap: "{clusters[n]}"}}' for n in NAMES)
    topo = parse_topology(f"clusters:\n{lines}\ntree: {TREE}\ntopics: [\"{topic}\"]\n", source="bench-latency")
    settings = {n: {"bootstrap.servers": clusters[n]} for n in NAMES}

    def level_run(level: int) -> Callable[[], dict]:
        def run() -> dict:
            spec = build_spec(topo, level, f"bench-lat-{uuid.uuid4().hex[:6]}", effective_links(topo, level), settings)
            return submit(spec, connect_url=connect_url)
        return run

    lock, stop_produce, stop_all = threading.Lock(), threading.Event(), threading.Event()
    produced: dict[bytes, float] = {}
    seen: dict[bytes, dict[str, float]] = {}
    watches = [_Watch(n, clusters[n], topic, partitions, seen, lock, stop_all) for n in NAMES]
    levels = [_Level(level, every, level_run(level), stop_all) for level in topo.levels]
    producers = [_Produce(n, clusters[n], topic, rate, produced, lock, stop_produce) for n in NAMES]
    for t in (*watches, *levels):
        t.start()
    warm_up = min(every, 30.0)  # the first runs start with the producers; skip the very first messages
    for p in producers:
        p.start()
    window_start = time.time() + warm_up
    window_end = window_start + window
    progress(f"latency at schedule {schedule}: producing {rate:g}/s on each of 4 clusters; measuring messages "
             f"produced in a {window:.0f}s window after {warm_up:.0f}s of warm-up")
    deadline = time.monotonic() + warm_up + window + 4 * every + 300
    try:
        while time.time() < window_end:
            if any(level.error for level in levels):
                raise RuntimeError(f"a level run failed: {[l.error for l in levels if l.error]}")
            stop_produce.wait(1.0)
        stop_produce.set()
        for p in producers:
            p.join(30)
        while True:
            window, done = converged(lock, produced, seen, window_start, window_end)
            if len(done) == len(window):
                break
            if any(level.error for level in levels):
                raise RuntimeError(f"a level run failed: {[l.error for l in levels if l.error]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"latency at {schedule}: {len(done)} of {len(window)} messages converged")
            stop_all.wait(1.0)
    finally:
        stop_produce.set()
        stop_all.set()
        for t in (*levels, *watches):
            t.join(300)
    with lock:
        latencies = sorted(max(seen[v].values()) - t for v, t in window.items())
    q = statistics.quantiles(latencies, n=100)
    out = {"schedule": schedule + (" (Connect)" if connect_url else ""), "messages": len(latencies), "rate_per_cluster": rate,
           "median_s": round(statistics.median(latencies), 2), "p99_s": round(q[98], 2),
           "max_s": round(latencies[-1], 2),
           "runs": {f"level {lv.level}": {"runs": len(lv.durations), "median_run_s":
                                          round(statistics.median(lv.durations), 1) if lv.durations else None,
                                          "overran": lv.late} for lv in levels}}
    progress(f"latency at {out['schedule']}: median {out['median_s']}s, p99 {out['p99_s']}s over {len(latencies)} messages; "
             f"runs {out['runs']}")
    return out
