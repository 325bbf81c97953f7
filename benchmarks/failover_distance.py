"""The time of a planned failover with one cluster far away: 0, 50 and 100 ms of round trip.

Two clusters on loopback, ``c1`` near and ``c2`` reached only through
:mod:`mirrorflow_dev.shaper` (its broker advertises the shaper's port; the shaper is
started again with each round trip, the round trips alternated over the rounds).
One level copies between them both ways, in this process (untimed, once at the
start). A measurement is one real ``mirror_failover_consumer_group`` run under
Airflow's ``dag.test()`` (a throwaway ``AIRFLOW_HOME``, SQLite), planned and exact,
of a fresh group that consumed everything on its source and stopped, the form as
the UI submits it (after one untimed run each way: the first use of a fresh
cluster's group coordinator and internal topics is not what is measured):

- ``to far``: from ``c1`` to ``c2`` (the target away: the switch's reads and the
  commit cross the distance);
- ``from far``: from ``c2`` to ``c1`` (the source away: the rechecks and the
  published positions cross it).

Each run is checked: it succeeded, and the group's committed offsets on the
target are its ends there (nothing skipped, nothing replayed). Printed per
round trip: the run's wall time, and the tasks' own durations.

MirrorMaker 2 runs beside it (``--no-mm2`` leaves it out): a dedicated
MirrorMaker 2 copies a topic of its own from the near to the far cluster, with
its checkpoints and group offset sync at ``--mm2-interval`` seconds (its default
is 60 for both); a fresh group commits the ends on the source and stops, and
the time until MirrorMaker 2 has committed the group on the target is measured,
with how many records its translated offsets would read again. That is what
stands for a planned failover there: it has no such operation, its consumers
move once the sync has run.

    python -m benchmarks.failover_distance --rtts 0,50,100 --rounds 2 --record
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.airflow_batch import _environment
from benchmarks.common import create_topic, stop_on_sigterm
from benchmarks.scale_parts import end_offsets
from mirrorflow_dev.kafka import KafkaDistribution, LocalCluster
from mirrorflow_dev.process import free_port
from mirrorflow_dev.shaper import Shape, Shaper

RESULTS = Path(__file__).resolve().parent / "results"
PARTITIONS = 8
TOPIC = "fo-bench"
MM2_TOPIC = "fo-mm2"


def progress(message: str) -> None:
    print(f"[failover {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def topology_text(near: str, far: str) -> str:
    return (f'name: failover-bench\nclusters:\n  c1: {{bootstrap: "{near}"}}\n  c2: {{bootstrap: "{far}"}}\n'
            f'tree:\n  level: 1\n  children: [c1, c2]\ntopics: ["{TOPIC}"]\n')


def fill(bootstrap: str, topic: str, count: int) -> None:
    """``count`` small messages over the topic's partitions, without transactions."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3})
    for i in range(count):
        producer.produce(topic, value=f"m{i}".encode(), partition=i % PARTITIONS)
        if i % 1000 == 999:
            producer.poll(0)
    if producer.flush(60):
        raise RuntimeError(f"{topic} on {bootstrap}: messages still unsent after 60 s")


def airflow_home(run_dir: Path) -> None:
    """A migrated SQLite ``AIRFLOW_HOME`` for this process, set before anything imports Airflow."""
    import subprocess

    _environment(run_dir / "airflow", None)
    subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"], check=True, capture_output=True)
    import logging

    for name in ("airflow", "mirrorflow", "mirrorflow_airflow"):  # dag.test()'s INFO lines would bury the progress
        logging.getLogger(name).setLevel(logging.WARNING)


def converge(topology: Any, settings: dict[str, dict[str, str]]) -> None:
    """Level 1, in this process, until a run copies nothing (untimed)."""
    from mirrorflow.copy.job import run_job
    from mirrorflow.copy.spec import build_spec
    from mirrorflow.topology import effective_links

    for _ in range(6):
        spec = build_spec(topology, 1, f"fo-bench-{uuid.uuid4().hex[:8]}", effective_links(topology, 1), settings)
        result = run_job(spec)
        if not result.ok:
            raise RuntimeError(f"level 1: {result.summary()['errors'][:3]}")
        if not result.summary()["copied"]:
            return
    raise RuntimeError("level 1 still copying after 6 runs")


def stopped_group(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    """``group`` committed at every partition's end on ``bootstrap``, with no member left; the ends."""
    ends = {p: end for (_, p), end in end_offsets(bootstrap, [(topic, p) for p in range(PARTITIONS)]).items()}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "log_level": 3})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in ends.items()], asynchronous=False)
    finally:
        consumer.close()
    return ends


def committed(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "log_level": 3})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
        return {tp.partition: tp.offset for tp in got}
    finally:
        consumer.close()


def failover(dag: Any, group: str, source: str, target: str, bootstraps: dict[str, str]) -> dict[str, Any]:
    """One planned exact failover of ``group`` under ``dag.test()``: wall time, task durations, checked."""
    stopped_group(bootstraps[source], TOPIC, group)
    conf = {"groups": [group], "from_cluster": source, "to_cluster": target, "mode": "planned",
            "precision": "exact", "dry_run": False, "force": False}
    started = time.perf_counter()
    run = dag.test(run_conf=conf)
    seconds = time.perf_counter() - started
    if run.state != "success":
        raise RuntimeError(f"failover of {group} {source} -> {target}: the run ended {run.state}")
    tasks = {ti.task_id: (ti.end_date - ti.start_date).total_seconds()
             for ti in run.get_task_instances() if ti.start_date and ti.end_date}
    ends = {p: e for (_, p), e in end_offsets(bootstraps[target], [(TOPIC, p) for p in range(PARTITIONS)]).items()}
    got = committed(bootstraps[target], TOPIC, group)
    if got != ends:
        raise RuntimeError(f"failover of {group} to {target}: committed {got}, its ends there are {ends}")
    return {"seconds": seconds, "tasks": tasks}


def mm2_failover(near: str, far: str, group: str, interval: float, timeout: float = 600.0) -> dict[str, Any]:
    """Seconds from a group's last commit on the near cluster until MirrorMaker 2 committed it on the far one."""
    ends = stopped_group(near, MM2_TOPIC, group)
    started = time.monotonic()
    deadline = started + timeout
    while True:
        got = committed(far, MM2_TOPIC, group)
        if all(o >= 0 for o in got.values()):
            far_ends = {p: e for (_, p), e in end_offsets(far, [(MM2_TOPIC, p) for p in range(PARTITIONS)]).items()}
            return {"seconds": time.monotonic() - started, "replay": sum(far_ends[p] - got[p] for p in got),
                    "skip": sum(max(0, got[p] - far_ends[p]) for p in got), "source_ends": sum(ends.values())}
        if time.monotonic() > deadline:
            raise TimeoutError(f"MirrorMaker 2 did not sync {group} to the far cluster in {timeout:.0f}s "
                               f"(checkpoints every {interval:g}s)")
        time.sleep(0.2)  # polling the target's committed offsets, under the deadline above


class MirrorMaker:
    """A dedicated MirrorMaker 2 from near to far: the topic, its checkpoints and its group offset sync."""

    def __init__(self, near: str, far: str, interval: float, workdir: Path) -> None:
        from benchmarks import mm2

        self.mm2, self.near, self.far, self.interval, self.workdir = mm2, near, far, interval, workdir
        self.proc: Any = None

    def start(self) -> None:
        import subprocess

        mm2 = self.mm2
        libs = mm2.fetch(progress=progress)
        props = mm2.mm2_properties(self.near, self.far, MM2_TOPIC, tasks_max=2, exactly_once=False,
                                   run_id=uuid.uuid4().hex[:8])
        s, t = mm2.SOURCE_ALIAS, mm2.TARGET_ALIAS
        every = str(max(1, round(self.interval)))
        props.update({"groups": "fo-mm2-.*", "groups.exclude": "", "emit.checkpoints.enabled": "true",
                      "emit.checkpoints.interval.seconds": every, "sync.group.offsets.enabled": "true",
                      "sync.group.offsets.interval.seconds": every, "refresh.groups.interval.seconds": every,
                      f"{s}->{t}.offset.lag.max": "0"})
        config = mm2.write_properties(self.workdir / "mm2.properties", props)
        log4j = self.workdir / "log4j2.xml"
        log4j.write_text(mm2.LOG4J2_XML.format(log_name="mm2.log", root_level="INFO"))
        dist = KafkaDistribution(version=mm2.MM2_VERSION, home=libs.parent, tools_version=mm2.MM2_VERSION)
        cmd = dist.java_command(mm2.MM2_MAIN, str(config), heap_max=mm2.MM2_HEAP_MAX, heap_min=mm2.MM2_HEAP_MIN,
                                log4j_config=log4j, jvm_options=[f"-Dkafka.logs.dir={self.workdir}"])
        with (self.workdir / "mm2.out").open("ab") as out:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=self.workdir, start_new_session=True)
        ends = {p: e for (_, p), e in end_offsets(self.near, [(MM2_TOPIC, p) for p in range(PARTITIONS)]).items()}
        deadline = time.monotonic() + 300
        while True:  # the topic copied: MirrorMaker 2 runs and has offset syncs for every partition
            copied = {p: e for (_, p), e in end_offsets(self.far, [(MM2_TOPIC, p) for p in range(PARTITIONS)]).items()}
            if all(copied.get(p, 0) >= e for p, e in ends.items()):
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"MirrorMaker 2 did not copy {MM2_TOPIC}: see {self.workdir / 'mm2.log'}")
            time.sleep(0.5)  # polling the target's ends, under the deadline above

    def stop(self) -> None:
        if self.proc is not None:
            self.mm2.stop_process(self.proc)
            self.proc = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.failover_distance",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--rtts", default="0,50,100", help="round trips in ms, comma-separated")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--messages", type=int, default=8000, help="written on c1 before the rounds")
    parser.add_argument("--no-mm2", action="store_true")
    parser.add_argument("--mm2-interval", type=float, default=5.0,
                        help="MirrorMaker 2's checkpoint and group sync interval, seconds (its default: 60)")
    parser.add_argument("--record", action="store_true", help="write benchmarks/results/<date>-failover-distance.*")
    args = parser.parse_args(argv)
    stop_on_sigterm()
    rtts = [float(r) for r in args.rtts.split(",")]
    run_dir = Path(tempfile.mkdtemp(prefix="mirrorflow-failover-distance-"))
    distribution = KafkaDistribution.fetch()
    proxy = free_port()
    near = LocalCluster("c1", run_dir / "c1", free_port(), free_port(), distribution, progress=progress)
    far = LocalCluster("c2", run_dir / "c2", free_port(), free_port(), distribution, advertised_port=proxy,
                       progress=progress)
    shaper = Shaper(proxy, far.own_bootstrap, Shape(0.0)).start()
    rows: list[dict[str, Any]] = []
    mirror: MirrorMaker | None = None
    try:
        near.start()
        far.start()
        bootstraps = {"c1": near.bootstrap, "c2": far.bootstrap}
        airflow_home(run_dir)
        from mirrorflow.topology import parse_topology
        from mirrorflow_airflow.factories.failover import build_failover_dag

        path = run_dir / "topology.yaml"
        path.write_text(topology_text(near.bootstrap, far.bootstrap))
        os.environ["MIRROR_TOPOLOGY"] = str(path)  # the sensor's trigger loads the topology from there
        topology = parse_topology(path.read_text(), source=str(path))
        for bootstrap in bootstraps.values():
            create_topic(bootstrap, PARTITIONS, name=TOPIC)
        fill(near.bootstrap, TOPIC, args.messages)
        converge(topology, {n: {"bootstrap.servers": b} for n, b in bootstraps.items()})
        progress(f"{args.messages} messages on c1 and c2")
        dag = build_failover_dag(topology)
        for source, target in (("c1", "c2"), ("c2", "c1")):  # first uses on fresh clusters (group coordinators,
            failover(dag, f"fo-warm-{source}", source, target, bootstraps)  # internal topics), untimed
        progress("warmed up: one failover each way")
        if not args.no_mm2:
            for bootstrap in bootstraps.values():
                create_topic(bootstrap, PARTITIONS, name=MM2_TOPIC)
            fill(near.bootstrap, MM2_TOPIC, args.messages)
        for round_no in range(args.rounds):
            for rtt in (rtts if round_no % 2 == 0 else list(reversed(rtts))):
                shaper.stop()
                shaper = Shaper(proxy, far.own_bootstrap, Shape(rtt / 1000)).start()
                for direction, source, target in (("to far", "c1", "c2"), ("from far", "c2", "c1")):
                    group = f"fo-{round_no}-{rtt:g}-{source}-{uuid.uuid4().hex[:4]}"
                    result = failover(dag, group, source, target, bootstraps)
                    rows.append({"rtt_ms": rtt, "round": round_no, "contender": f"mirrorflow {direction}",
                                 **result})
                    tasks = ", ".join(f"{k} {v:.2f}s" for k, v in result["tasks"].items())
                    progress(f"rtt {rtt:g} ms, {direction}: {result['seconds']:.2f}s ({tasks})")
                if not args.no_mm2:
                    mirror = MirrorMaker(near.bootstrap, far.bootstrap, args.mm2_interval,
                                         run_dir / f"mm2-{round_no}-{rtt:g}")
                    mirror.workdir.mkdir(parents=True, exist_ok=True)
                    mirror.start()
                    result = mm2_failover(near.bootstrap, far.bootstrap, f"fo-mm2-{uuid.uuid4().hex[:6]}",
                                          args.mm2_interval)
                    mirror.stop()
                    mirror = None
                    rows.append({"rtt_ms": rtt, "round": round_no, "contender": "mm2 to far", **result})
                    progress(f"rtt {rtt:g} ms, mm2 to far: {result['seconds']:.2f}s, {result['replay']} "
                             "records to read again")
    finally:
        if mirror is not None:
            mirror.stop()
        shaper.stop()
        near.stop()
        far.stop()
    summary = summarize(rows, args.mm2_interval)
    print(summary)
    if args.record:
        stem = RESULTS / f"{dt.date.today().isoformat()}-failover-distance"
        stem.with_suffix(".json").write_text(json.dumps({"partitions": PARTITIONS, "messages": args.messages,
                                                         "mm2_interval_s": args.mm2_interval, "rows": rows},
                                                        indent=1))
        stem.with_suffix(".md").write_text(summary + "\n")
        progress(f"written {stem}.json and .md")
    return 0


def summarize(rows: list[dict[str, Any]], interval: float) -> str:
    """Medians per round trip and contender: the run's wall time and each task's."""
    rtts = sorted({r["rtt_ms"] for r in rows})
    contenders = sorted({r["contender"] for r in rows})

    def median(values: list[float]) -> str:
        return f"{statistics.median(values):.2f}" if values else "–"

    tasks = sorted({t for r in rows for t in r.get("tasks", {})})
    lines = [f"# A planned failover with c2 away ({PARTITIONS} partitions, medians)", "",
             "| rtt ms | contender | runs | seconds | " + " | ".join(tasks) + " |",
             "|---|---|---|---|" + "---|" * len(tasks)]
    for rtt in rtts:
        for contender in contenders:
            mine = [r for r in rows if r["rtt_ms"] == rtt and r["contender"] == contender]
            if not mine:
                continue
            cells = [median([r["tasks"][t] for r in mine if t in r.get("tasks", {})]) for t in tasks]
            lines.append(f"| {rtt:g} | {contender} | {len(mine)} | {median([r['seconds'] for r in mine])} | "
                         + " | ".join(cells) + " |")
    replays = [r["replay"] for r in rows if "replay" in r]
    if replays:
        lines += ["", f"MirrorMaker 2 (checkpoints and group sync every {interval:g} s; its default is 60 s): "
                      f"records its synced offsets would read again, per run: {replays}"]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
