"""What benchmarks/scale.py measures, one function per periodic part, and what it sets up for them.

A :class:`Tree` is one measured topology on local clusters of its own. Each part
is the function the scheduled piece runs, called in this process:

- ``empty_run``: :func:`mirrorflow.copy.job.run_job` of every level, nothing to copy
  (plan, config and ACL sync, checkpoints, end offsets);
- ``watcher``: :func:`mirrorflow_airflow.triggers.data.measure_level` of every level with
  clients kept across polls, and the TCP connections a poll opens (:mod:`mirrorflow_dev.sockets`);
- ``lag``: :func:`mirrorflow_airflow.steps.lag_monitor.measure_lag`, the ``measure`` task of
  ``mirror_lag_monitor`` (snapshot, failover preview, stored in its Variable);
- ``offsets``: the four steps of ``mirror_offsets`` (:mod:`mirrorflow_airflow.steps.offsets`);
- ``audit``: :func:`mirrorflow.completeness.count.count_cluster` from the stored state with
  nothing new since the last audit (``read_state`` included, as ``run_audit`` does);
- ``page``: the ``/mirror/api/status`` route's function (:func:`mirrorflow_airflow.ui.app.status`)
  and the JSON encoding FastAPI gives its document.

Airflow runs in this process on a throwaway ``AIRFLOW_HOME`` (SQLite, migrated).
Outside a task the Task SDK cannot write Variables, so mirrorflow's state module
writes them through Airflow's model instead (:func:`airflow_in_process`). The trees
are measured side by side with no namespace (the default), so they share that
database: each tree's ``mirrorflow_*`` Variables are put back before its parts run
(:func:`restore_state`, untimed) and kept after (:func:`save_state`).

Run as ``python -m benchmarks.scale_parts SPEC.json [--connect URL]`` (by scale.py),
it is the convergence of a tree under its level DAGs (``dag.test()`` in a process
with its own ``AIRFLOW_HOME``, as benchmarks/airflow_batch.py runs them): it prints
one JSON object, and exits non-zero unless every message reached every cluster (the
caller then checks that each one is there exactly once).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, IsolationLevel, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from benchmarks.airflow_batch import _environment
from benchmarks.common import send
from mirrorflow.completeness.count import count_cluster
from mirrorflow.completeness.run import run_audit
from mirrorflow.completeness.store import read_state
from mirrorflow.copy.job import run_job
from mirrorflow.copy.spec import JobResult, build_spec
from mirrorflow.kafka import ClusterClient, KeptClients
from mirrorflow.topology import Topology, effective_links, parse_topology
from mirrorflow_dev.sockets import ConnectionWatch, own_connections

Progress = Callable[[str], None]
#: The consumer groups the offsets sync carries (committed on the first cluster, no members).
GROUPS = ("scale-g-0", "scale-g-1", "scale-g-2")
#: What mirrorflow's Airflow Variables are named (mirrorflow_airflow.state).
STATE = "mirrorflow_"
_pause = threading.Event()  # never set: .wait(t) is a polling interval with a deadline around it


# --------------------------------------------------------------------------- Airflow in this process

@contextlib.contextmanager
def airflow_in_process(progress: Progress) -> Iterator[Path]:
    """A migrated SQLite ``AIRFLOW_HOME`` for this process; mirrorflow's Variables written through Airflow's model.

    Set before anything imports Airflow (it reads its configuration once, on import).
    """
    from unittest import mock

    home = Path(tempfile.mkdtemp(prefix="mirrorflow-scale-airflow-"))
    _environment(home, None)
    started = time.monotonic()
    subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"], check=True, capture_output=True)
    progress(f"Airflow metadata database migrated in {time.monotonic() - started:.0f}s under {home}")
    import logging

    from airflow.models import Variable

    from mirrorflow_airflow import state

    for name in ("mirrorflow", "mirrorflow_airflow", "airflow"):  # the parts' INFO lines would bury the progress
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger("py.warnings").setLevel(logging.ERROR)
    with mock.patch.object(state, "Variable", Variable):  # the Task SDK's Variable.set needs a task's supervisor
        yield home
    shutil.rmtree(home, ignore_errors=True)


# --------------------------------------------------------------------------- trees

@dataclass
class Tree:
    """One measured topology: its clusters, its topics (name -> partitions) and the clients its watchers keep."""

    label: str
    size: int
    topology: Topology
    path: Path
    bootstraps: dict[str, str]
    topics: dict[str, int]
    conv_topic: str | None = None
    kept: dict[int, KeptClients] = field(default_factory=dict)
    #: The tree's ``mirrorflow_*`` Airflow Variables while another tree's are in the database.
    saved: dict[str, str] = field(default_factory=dict)
    #: Every message written to the convergence topic so far.
    sent: list[str] = field(default_factory=list)

    @property
    def ns(self) -> str:
        return self.topology.namespace

    @property
    def settings(self) -> dict[str, dict[str, str]]:
        return {name: {"bootstrap.servers": b} for name, b in self.bootstraps.items()}

    def client(self, name: str) -> ClusterClient:
        return ClusterClient.from_cluster_config(name, self.topology.clusters[name], namespace=self.ns)

    def ports(self) -> set[int]:
        return {int(b.rsplit(":", 1)[1]) for b in self.bootstraps.values()}

    def close(self) -> None:
        for kept in self.kept.values():
            kept.close()


def make_tree(run_dir: Path, label: str, size: int, prefix: str, bootstraps: dict[str, str], tree_yaml: str,
              topics: dict[str, int], conv_topic: str | None = None) -> Tree:
    """Write the tree's topology file (its topics: everything named ``<prefix>-*``) and parse it."""
    clusters = "\n".join(f'  {name}: {{bootstrap: "{b}"}}' for name, b in bootstraps.items())
    text = (f"name: scale-{prefix}\nclusters:\n{clusters}\ntree:\n{tree_yaml}\n"
            f'topics: ["{prefix}-.*"]\noffsets: {{groups: ["scale-g-.*"]}}\n')
    path = run_dir / f"topology-{prefix}.yaml"
    path.write_text(text)
    return Tree(label, size, parse_topology(text, source=str(path)), path, bootstraps, topics, conv_topic)


def save_state(tree: Tree) -> None:
    """Keep the tree's ``mirrorflow_*`` Variables (what its parts wrote) aside."""
    from airflow.models import Variable
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        tree.saved = {v.key: v.val for v in session.scalars(select(Variable).where(Variable.key.startswith(STATE)))}


def restore_state(tree: Tree) -> None:
    """Put the tree's ``mirrorflow_*`` Variables back in place of whatever tree's are there (none at first)."""
    from airflow.models import Variable
    from airflow.utils.session import create_session
    from sqlalchemy import delete

    with create_session() as session:
        session.execute(delete(Variable).where(Variable.key.startswith(STATE)))
    for key, value in tree.saved.items():
        Variable.set(key, value)


# --------------------------------------------------------------------------- data on the clusters

def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def create_topics(bootstrap: str, topics: dict[str, int], timeout: float = 600.0) -> None:
    """Create ``topics`` (name -> partitions) ten per request (a KRaft controller refuses 10,000 partitions at
    once) and wait until every partition has a leader."""
    admin = _admin(bootstrap)
    names = sorted(topics)
    for i in range(0, len(names), 10):
        batch = [NewTopic(t, topics[t], 1) for t in names[i:i + 10]]
        for future in admin.create_topics(batch, operation_timeout=120).values():
            future.result()
    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending:
        md = admin.list_topics(timeout=60).topics
        pending = {t for t in pending if t not in md or md[t].error is not None
                   or len(md[t].partitions) != topics[t] or any(p.leader < 0 for p in md[t].partitions.values())}
        if pending and time.monotonic() > deadline:
            raise TimeoutError(f"{bootstrap}: {len(pending)} topics without leaders after {timeout:.0f}s")
        if pending:
            _pause.wait(0.2)


def produce(bootstrap: str, records: Iterable[tuple[str, int, bytes | None, bytes]]) -> None:
    """Write ``(topic, partition, key, value)`` records and wait for every acknowledgement."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all", "enable.idempotence": True})
    for n, (topic, partition, key, value) in enumerate(records):
        send(producer, n, topic, value=value, key=key, partition=partition)
    if producer.flush(120):
        raise RuntimeError(f"{bootstrap}: not every record was acknowledged")


def one_per_partition(tree: Tree, cluster: str, skip: str | None = None) -> list[str]:
    """One record in every partition of the tree's topics (but ``skip``) on ``cluster``; returns their values."""
    values = [f"{cluster}|{t}|{p}" for t, n in sorted(tree.topics.items()) if t != skip for p in range(n)]
    produce(tree.bootstraps[cluster], ((v.split("|")[1], int(v.split("|")[2]), None, v.encode()) for v in values))
    return values


def tagged(tree: Tree, per_cluster: int, tag: str) -> list[str]:
    """``per_cluster`` unique messages on every cluster into the tree's convergence topic; returns their values."""
    assert tree.conv_topic is not None
    partitions = tree.topics[tree.conv_topic]
    values = []
    for cluster, bootstrap in tree.bootstraps.items():
        mine = [f"{cluster}|k{i % 3}|{i:04d}{tag}" for i in range(per_cluster)]
        produce(bootstrap, ((tree.conv_topic, i % partitions, f"{cluster}-k{i % 3}".encode(), v.encode())
                            for i, v in enumerate(mine)))
        values += mine
    tree.sent += values
    return values


def end_offsets(bootstrap: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Last stable offsets (read_committed ends) of ``tps``."""
    admin = _admin(bootstrap)  # kept until the answers are in: a client collected meanwhile never answers
    found = admin.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in tps},
                               isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=60)
    return {(tp.topic, tp.partition): future.result(120).offset for tp, future in found.items()}


def values_on(bootstrap: str, tps: list[tuple[str, int]], timeout: float = 600.0) -> Counter[str]:
    """Every committed value in ``tps``, counted (read_committed, up to the ends found first)."""
    ends = end_offsets(bootstrap, tps)
    pending = {tp for tp in tps if ends[tp] > 0}
    got: Counter[str] = Counter()
    if not pending:
        return got
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "auto.offset.reset": "earliest", "log_level": 3})
    consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in pending])
    deadline = time.monotonic() + timeout
    try:
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{bootstrap}: {len(pending)} partitions not read to their end")
            for msg in consumer.consume(1000, 0.1):
                key = (msg.topic(), msg.partition())
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF and msg.offset() >= ends[key]:
                        pending.discard(key)
                    continue
                if msg.offset() < ends[key]:
                    got[msg.value().decode()] += 1
                if msg.offset() + 1 >= ends[key]:
                    pending.discard(key)
    finally:
        consumer.close()
    return got


def check_exact(tree: Tree, topics: Iterable[str], expected: Iterable[str], what: str) -> None:
    """Raise unless every cluster of the tree holds each expected value in ``topics`` exactly once, and nothing else."""
    wanted = set(expected)
    tps = [(t, p) for t in topics for p in range(tree.topics[t])]
    for cluster, bootstrap in sorted(tree.bootstraps.items()):
        got = values_on(bootstrap, tps)
        missing, extra = sorted(wanted - set(got)), sorted(set(got) - wanted)
        twice = sorted(v for v, n in got.items() if n > 1)
        if missing or extra or twice:
            raise AssertionError(f"NOT EXACT: {tree.label}, {what}, {cluster}: {len(missing)} missing {missing[:5]}, "
                                 f"{len(extra)} unexpected {extra[:5]}, {len(twice)} duplicated {twice[:5]}")


def present_everywhere(tree: Tree, values: set[str]) -> set[str]:
    """Which of ``values`` every cluster of the tree holds in its convergence topic now."""
    assert tree.conv_topic is not None
    tps = [(tree.conv_topic, p) for p in range(tree.topics[tree.conv_topic])]
    found = set(values)
    for bootstrap in tree.bootstraps.values():
        found &= set(values_on(bootstrap, tps))
    return found


def groups_consumed(tree: Tree, cluster: str, partitions: int) -> None:
    """:data:`GROUPS` committed at the ends of the first ``partitions`` of the tree's partitions (0: all) on
    ``cluster``, without members; and ``cluster`` remembered as their owner, as ``mirror_offsets`` records one."""
    from mirrorflow_airflow.state import set_group_owners

    tps = [(t, p) for t, n in sorted(tree.topics.items()) for p in range(n)][:partitions or None]
    ends = end_offsets(tree.bootstraps[cluster], tps)
    for group in GROUPS:
        consumer = Consumer({"bootstrap.servers": tree.bootstraps[cluster], "group.id": group,
                             "enable.auto.commit": False, "log_level": 3})
        try:
            consumer.commit(offsets=[TopicPartition(t, p, ends[(t, p)]) for t, p in tps], asynchronous=False)
        finally:
            consumer.close()
    set_group_owners(tree.ns, {group: cluster for group in GROUPS})


# --------------------------------------------------------------------------- level runs

def level_run(tree: Tree, level: int) -> tuple[float, JobResult]:
    """One run of ``level`` in this process (no Spark), as ``mirror_level_<L>``'s copy task builds it; timed."""
    spec = build_spec(tree.topology, level, f"scale-{uuid.uuid4().hex[:8]}", effective_links(tree.topology, level),
                      tree.settings)
    started = time.perf_counter()
    result = run_job(spec)
    seconds = time.perf_counter() - started
    if not result.ok:
        raise RuntimeError(f"{tree.label}: level {level} run failed: {result.summary()['errors'][:5]}")
    return seconds, result


def settle(tree: Tree, progress: Progress, max_rounds: int = 8) -> int:
    """Every level, lowest first, round after round, until a round copies and skips nothing (untimed).

    Each run's partition rows are folded into the level's copy totals, as the copy task does (the page reads them).
    Returns what the first round copied.
    """
    from mirrorflow_airflow.state import record_copy_totals

    first = 0
    for round_no in range(max_rounds):
        moved = 0
        for level in tree.topology.levels:
            seconds, result = level_run(tree, level)
            record_copy_totals(tree.ns, level, result.partitions, finished_at=result.finished_at or time.time(),
                               run_id=result.run_id)
            summary = result.summary()
            moved += summary["copied"] + summary["skipped"]
            first += summary["copied"] if round_no == 0 else 0
            slowest = max(result.links, key=lambda r: sum(r.plan_steps.values()), default=None)
            steps = "" if slowest is None else ", its slowest plan " + " ".join(
                f"{k} {v:.1f}s" for k, v in slowest.plan_steps.items() if v >= 0.1)
            progress(f"{tree.label}: level {level} run {seconds:.1f}s (plan {result.plan_s:.1f}s, copy "
                     f"{result.copy_s:.1f}s{steps}), copied {summary['copied']}, skipped {summary['skipped']}")
        if moved == 0:
            return first
    raise RuntimeError(f"{tree.label}: still copying after {max_rounds} rounds")


# --------------------------------------------------------------------------- the parts

def empty_run(tree: Tree) -> dict[str, Any]:
    """Every level's run with nothing to copy, summed (and each level's)."""
    levels = {}
    for level in tree.topology.levels:
        seconds, result = level_run(tree, level)
        if result.copied:
            raise RuntimeError(f"{tree.label}: an empty run of level {level} copied {result.copied} records")
        levels[str(level)] = round(seconds, 4)
    return {"seconds": sum(levels.values()), "levels": levels}


def _context(tree: Tree) -> Any:
    """What the watcher resolves once and keeps for ``CONTEXT_REFRESH_S`` (30 s): the clusters' client settings."""
    from mirrorflow_airflow.triggers.base import CheckContext

    return CheckContext(tree.topology)


def _poll(tree: Tree, level: int, context: Any) -> Any:
    from mirrorflow_airflow.triggers.data import measure_level

    kept = tree.kept.setdefault(level, KeptClients())
    found = measure_level(level, context, kept=kept)
    if found.total:
        raise RuntimeError(f"{tree.label}: the level-{level} watcher found {found.total} records waiting")
    return found


def watcher(tree: Tree, polls: int) -> dict[str, Any]:
    """Every level's watcher poll, clients kept: the median of ``polls`` back to back, summed over the levels;
    then as many polls again under a connection watch (connections opened per poll, summed)."""
    levels: dict[str, float] = {}
    opened = 0
    ports = tree.ports()
    for level in tree.topology.levels:
        context = _context(tree)
        _poll(tree, level, context)  # makes the kept clients, or reconnects one the broker closed while idle
        took = []
        for _ in range(polls):
            started = time.perf_counter()
            _poll(tree, level, context)
            took.append(time.perf_counter() - started)
        levels[str(level)] = round(statistics.median(took), 5)
        before = own_connections(ports)
        with ConnectionWatch(ports) as watch:
            for _ in range(polls):
                _poll(tree, level, context)
        opened += len(watch.opened_since(before))
    return {"seconds": sum(levels.values()), "levels": levels, "connections_per_poll": opened / polls}


def lag(tree: Tree) -> dict[str, Any]:
    """The lag monitor's ``measure`` task: every link and selected group measured, the snapshot stored."""
    from mirrorflow_airflow.steps.lag_monitor import measure_lag

    started = time.perf_counter()
    data = measure_lag(tree.topology, datetime.now(UTC))
    seconds = time.perf_counter() - started
    if data["unreachable"]:
        raise RuntimeError(f"{tree.label}: the lag monitor found clusters unreachable: {data['unreachable']}")
    return {"seconds": seconds, "totals": data["totals"], "snapshot_bytes": len(json.dumps(data))}


def offsets(tree: Tree) -> dict[str, Any]:
    """``mirror_offsets``' four steps in order: owners, publish, distribute, commit."""
    from mirrorflow_airflow.steps.offsets import commit_run, distribute_positions, find_owners, publish_positions

    started = time.perf_counter()
    found = find_owners(tree.topology)
    published = publish_positions(tree.topology, found["owners"])
    distributed = distribute_positions(tree.topology)
    committed = commit_run(tree.topology, found, published, distributed)
    seconds = time.perf_counter() - started
    if sorted(found["owners"]) != sorted(GROUPS):
        raise RuntimeError(f"{tree.label}: the offsets sync found owners {found['owners']}, not {GROUPS}")
    return {"seconds": seconds, "published": published["published"], "committed": committed["committed"]}


def first_audit(tree: Tree) -> None:
    """The first audit of every cluster (``run_audit``, as ``mirror_audit``'s count task), its summary stored."""
    from mirrorflow_airflow.state import set_audit_result

    window_s = tree.topology.audit.window_minutes * 60
    result = run_audit({n: tree.client(n) for n in tree.bootstraps}, tree.topology.selects, window_s=window_s,
                       grace_s=tree.topology.audit.grace_minutes * 60.0, run_id="scale-first")
    if result.unreachable:
        raise RuntimeError(f"{tree.label}: first audit: unreachable {result.unreachable}")
    set_audit_result(tree.ns, {**result.summary(), "checked_at": datetime.now(UTC).isoformat()})


def audit(tree: Tree, clusters: Iterable[str]) -> dict[str, Any]:
    """An audit with nothing new of each of ``clusters``: its stored state read, then counted; summed."""
    window_s = tree.topology.audit.window_minutes * 60
    per: dict[str, float] = {}
    read = 0
    for name in clusters:
        client = tree.client(name)
        started = time.perf_counter()
        counted = count_cluster(client, read_state(client, window_s), tree.topology.selects)
        per[name] = round(time.perf_counter() - started, 4)
        read += counted.read
    if read:
        raise RuntimeError(f"{tree.label}: an idle audit read {read} new records")
    return {"seconds": sum(per.values()), "clusters": per}


def page(tree: Tree) -> dict[str, Any]:
    """The ``/mirror/api/status`` route's function and FastAPI's encoding of its document (as its response)."""
    import os

    from airflow.utils.session import create_session
    from fastapi.encoders import jsonable_encoder

    from mirrorflow_airflow.ui.app import status

    os.environ["MIRROR_TOPOLOGY"] = str(tree.path)  # the route reads the tree from here, as the API server does
    with create_session() as session:
        started = time.perf_counter()
        body = json.dumps(jsonable_encoder(status(session, tree=tree.ns)), ensure_ascii=False, allow_nan=False,
                          separators=(",", ":"))
        seconds = time.perf_counter() - started
    return {"seconds": seconds, "bytes": len(body)}


def warm(tree: Tree, progress: Progress) -> None:
    """Every part once, untimed: the watchers' clients made, the first offsets sync and audit done."""
    took = {}
    for what, part in (("watcher", lambda: [_poll(tree, level, _context(tree)) for level in tree.topology.levels]),
                       ("offsets", lambda: offsets(tree)), ("audit", lambda: first_audit(tree)),
                       ("lag", lambda: lag(tree)), ("page", lambda: page(tree))):
        started = time.monotonic()
        part()
        took[what] = time.monotonic() - started
    progress(f"{tree.label}: first runs (untimed) " + ", ".join(f"{w} {s:.1f}s" for w, s in took.items()))


# --------------------------------------------------------------------------- convergence

def convergence(tree: Tree, per_cluster: int, progress: Progress, max_rounds: int = 8) -> dict[str, Any]:
    """New messages on every cluster; the levels run as ``converge()`` runs them (lowest first, round after
    round until one copies nothing); after each run, which messages every cluster holds. Then exactly once."""
    values = tagged(tree, per_cluster, "c")
    waiting = set(values)
    reached: dict[str, tuple[int, float]] = {}
    runs, elapsed = 0, 0.0
    for _ in range(max_rounds):
        copied = 0
        for level in tree.topology.levels:
            seconds, result = level_run(tree, level)
            runs, elapsed, copied = runs + 1, elapsed + seconds, copied + result.copied
            for value in present_everywhere(tree, waiting):
                reached[value] = (runs, elapsed)
            waiting -= set(reached)
        if copied == 0:
            break
    else:
        raise RuntimeError(f"{tree.label}: not quiescent after {max_rounds} rounds")
    if waiting:
        raise AssertionError(f"NOT EXACT: {tree.label}: {len(waiting)} messages never reached every cluster")
    assert tree.conv_topic is not None
    check_exact(tree, [tree.conv_topic], tree.sent, "convergence")
    progress(f"{tree.label}: converged exactly in {runs} level runs ({elapsed:.1f}s of runs)")
    return {"clusters": len(tree.bootstraps), "levels": len(tree.topology.levels), "messages": len(values),
            "runs": runs, "run_seconds": round(elapsed, 3), **_reach(reached)}


def _reach(reached: dict[str, tuple[int, float]]) -> dict[str, Any]:
    """How many level runs (and seconds of them) each message took to be on every cluster: max, median, per origin."""
    by_origin: dict[str, list[tuple[int, float]]] = {}
    for value, at in reached.items():
        by_origin.setdefault(value.split("|")[0], []).append(at)
    return {"max_runs": max(r for r, _ in reached.values()), "median_runs": statistics.median(
                r for r, _ in reached.values()),
            "max_seconds": round(max(s for _, s in reached.values()), 3),
            "per_origin_runs": {o: max(r for r, _ in ats) for o, ats in sorted(by_origin.items())},
            "per_message": {v: [r, round(s, 3)] for v, (r, s) in sorted(reached.items())}}


def dag_convergence(tree: Tree, per_cluster: int, connect_url: str | None, run_dir: Path,
                    progress: Progress) -> dict[str, Any]:
    """New messages on every cluster, then the level DAGs under ``dag.test()`` in a process of their own
    (``python -m benchmarks.scale_parts``) until every message is on every cluster, exactly once."""
    values = tagged(tree, per_cluster, "d")
    spec = run_dir / f"dags-{tree.size}.json"
    spec.write_text(json.dumps({"topology": str(tree.path), "bootstraps": tree.bootstraps, "topic": tree.conv_topic,
                                "partitions": tree.topics[tree.conv_topic or ""], "values": values}))
    command = [sys.executable, "-m", "benchmarks.scale_parts", str(spec)]
    started = time.monotonic()
    proc = subprocess.run(command + (["--connect", connect_url] if connect_url else []), capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise AssertionError(f"{tree.label} under the level DAGs: exit {proc.returncode}:\n{proc.stdout[-3000:]}\n"
                             f"{proc.stderr[-5000:]}")
    out = json.loads(next(line for line in reversed(proc.stdout.splitlines()) if line.startswith('{"runs"')))
    out["process_seconds"] = round(time.monotonic() - started, 1)
    out["messages"] = len(values)
    out["seconds_to_reach"] = round(sum(r["seconds"] for r in out["dag_runs"][:out["reached_after"]]), 1)
    assert tree.conv_topic is not None
    check_exact(tree, [tree.conv_topic], tree.sent, "under the level DAGs")
    progress(f"{tree.label} under the level DAGs: every message on every cluster exactly once after "
             f"{out['runs']} DAG runs ({out['process_seconds']:.0f}s with Airflow's start)")
    return out


# --------------------------------------------------------------------------- the DAG run's own process

def _dag_rounds(tree: Tree, values: list[str], max_rounds: int) -> dict[str, Any]:
    """Each level DAG, lowest first, round after round; stops after a whole round that began with every message
    everywhere already (it must copy nothing twice: the caller checks exactly once)."""
    from mirrorflow_airflow.factories.levels import build_level_dags

    dags = list(build_level_dags(tree.topology).values())
    waiting, runs, reached_after = set(values), [], None
    for _ in range(max_rounds):
        complete = reached_after is not None
        for dag in dags:
            started = time.monotonic()
            run = dag.test()
            seconds = round(time.monotonic() - started, 2)
            runs.append({"dag_id": dag.dag_id, "state": str(run.state), "seconds": seconds})
            if run.state != "success":
                raise SystemExit(f"{dag.dag_id} ended {run.state}")
            waiting -= present_everywhere(tree, waiting) if waiting else set()
            if not waiting and reached_after is None:
                reached_after = len(runs)
        if complete:
            return {"runs": len(runs), "reached_after": reached_after, "dag_runs": runs}
    raise SystemExit(f"{len(waiting)} messages not on every cluster after {max_rounds} rounds of the level DAGs")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale_parts", description=__doc__.splitlines()[0])
    parser.add_argument("spec", type=Path, help="JSON: topology, bootstraps, topic, partitions, values")
    parser.add_argument("--connect", default=None, help="the level runs on this Spark Connect server (sc://host:port)")
    parser.add_argument("--max-rounds", type=int, default=6)
    args = parser.parse_args(argv)
    spec = json.loads(args.spec.read_text())
    home = Path(tempfile.mkdtemp(prefix="mirrorflow-scale-dags-"))
    _environment(home, args.connect)
    import os

    os.environ["MIRROR_TOPOLOGY"] = spec["topology"]  # dag.test() serializes the DAG folder's DAGs of this tree
    try:
        subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"], check=True,
                       capture_output=True)
        topology = parse_topology(Path(spec["topology"]).read_text(), source=spec["topology"])
        tree = Tree("dags", len(spec["bootstraps"]), topology, Path(spec["topology"]), spec["bootstraps"],
                    {spec["topic"]: spec["partitions"]}, spec["topic"])
        out = _dag_rounds(tree, spec["values"], args.max_rounds)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
