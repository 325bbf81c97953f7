"""Lag measurement against real brokers: exact record counts, ages from timestamps we chose, unreachable clusters.

Messages are produced with explicit old CreateTimes (hours or minutes in the
past), so an age assertion has a margin of a minute against a value of an hour
and never depends on how fast the test runs.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirrorflow.kafka.config import ClusterClient
from mirrorflow.lag import WHOLE, group_lag, link_lag, link_table, measure
from mirrorflow.topology import Topology, parse_topology
from mirrorflow.topology.routes import effective_links
from mirrorflow_dev.process import free_port
from tests.integration.groups import commit
from tests.integration.kafka_io import produce
from tests.integration.mirroring import FOUR, clients, converge, run_level, topic_everywhere, topology

pytestmark = pytest.mark.kafka

HOUR_MS = 3600_000
PAIR = "\n  level: 1\n  children: [c1, c2]\n"
PAIR_NAMES = ("c1", "c2")


def cluster_clients(settings) -> dict[str, ClusterClient]:
    return {name: ClusterClient(name, s) for name, s in settings.items()}


def records(key: str, count: int, timestamp_ms: int, start: int = 0) -> list:
    """``count`` messages one millisecond apart from ``timestamp_ms``: (key, value, headers, timestamp)."""
    return [(key.encode(), f"{key}|{i:06d}".encode(), None, timestamp_ms + i) for i in range(start, start + count)]


def test_link_lag_counts_uncopied_records_from_the_checkpoint_and_ages_the_oldest(kafka_clusters, make_topic):
    """c2 names the topic ``acme-<topic>``: the rows speak the logical name, the checkpoints are read on c2's."""
    topic = make_topic("c1", partitions=2)
    make_topic("c2", partitions=2, name=f"acme-{topic}")
    data = topology(kafka_clusters, PAIR, [topic], names=PAIR_NAMES).to_dict()
    data["clusters"]["c2"]["names"] = {"topic_prefix": "acme-"}
    topo = Topology.parse(data)
    settings = clients(kafka_clusters, topo)
    ccs = {n: ClusterClient.from_cluster_config(n, topo.cluster(n)) for n in topo.clusters}
    c1 = kafka_clusters["c1"].bootstrap
    now_ms = int(time.time() * 1000)

    produce(c1, topic, records("a", 3, now_ms - 2 * HOUR_MS), partition=0)
    assert run_level(topo, 1, settings).ok  # c1.L1 copies those 3 to c2: its checkpoint is 3
    produce(c1, topic, records("b", 4, now_ms - HOUR_MS // 2), partition=0)
    produce(c1, topic, records("c", 2, now_ms - HOUR_MS // 6), partition=1)

    rows = link_lag(topo, ccs, effective_links(topo, 1))
    by = {(r.link_id, r.partition): r for r in rows}
    assert set(by) == {(l, p) for l in ("c1.L1", "c2.L1") for p in (0, 1)}
    p0, p1 = by[("c1.L1", 0)], by[("c1.L1", 1)]
    assert (p0.records, p0.checkpoint, p0.start, p0.end) == (4, 3, 3, 7), p0
    # the oldest message not yet copied is the first "b" (30 minutes old), not the copied 2-hour-old "a"s
    assert p0.oldest_timestamp == now_ms - HOUR_MS // 2
    assert abs(p0.seconds - 1800) < 60, p0
    assert (p1.records, p1.checkpoint, p1.start, p1.end) == (2, None, 0, 2), p1
    assert abs(p1.seconds - 600) < 60, p1
    # c2.L1 has not yet stepped over the 3 copies it will skip (copy flags): they count, with their CreateTime,
    # and so does the marker of the transaction that wrote them (records are offsets)
    back = by[("c2.L1", 0)]
    assert (back.records, back.checkpoint, back.end) == (3 + 1, None, 4) and abs(back.seconds - 7200) < 60, back
    assert (by[("c2.L1", 1)].records, by[("c2.L1", 1)].seconds) == (0, 0.0)
    assert all(r.error is None for r in rows)

    # narrowing: one link, a topic filter that excludes everything, a regex
    assert {r.link_id for r in link_lag(topo, ccs, [topo.link("c1.L1")])} == {"c1.L1"}
    assert link_lag(topo, ccs, [topo.link("c1.L1")], topics=["no-such-topic"]) == []
    assert {r.topic for r in link_lag(topo, ccs, [topo.link("c1.L1")], topics=[topic[:-3] + ".*"])} == {topic}

    converge(topo, settings)
    after = link_lag(topo, ccs, topo.all_links())
    assert len(after) == 2 * 2  # both links, both partitions
    lagging = [r for r in after if r.records or r.seconds]
    assert not lagging, link_table(lagging)


def test_link_lag_reads_the_checkpoint_on_the_effective_target(kafka_clusters, make_topic):
    topic = topic_everywhere(make_topic, partitions=1)
    topo = topology(kafka_clusters, FOUR, [topic])
    settings = clients(kafka_clusters, topo)
    ccs = cluster_clients(settings)
    produce(kafka_clusters["c1"].bootstrap, topic, records("k", 5, int(time.time() * 1000) - HOUR_MS), partition=0)
    assert run_level(topo, 3, settings).ok  # c1.L3 -> c3 (its default target) copies all 5

    default = {r.link_id: r for r in link_lag(topo, ccs, effective_links(topo, 3))}["c1.L3"]
    assert (default.target, default.records, default.checkpoint) == ("c3", 0, 5)
    # with the link pointed at c4 (no checkpoint there yet), the same messages are pending again
    switched = {r.link_id: r for r in link_lag(topo, ccs, effective_links(topo, 3, {"c1.L3": "c4"}))}["c1.L3"]
    assert (switched.target, switched.records, switched.checkpoint) == ("c4", 5, None)
    assert abs(switched.seconds - 3600) < 60


def test_group_lag_is_exact_after_commits_with_state_and_members(kafka_clusters, make_topic):
    topic = make_topic("c1", partitions=2)
    bootstrap = kafka_clusters["c1"].bootstrap
    base_ms = int(time.time() * 1000) - HOUR_MS
    produce(bootstrap, topic, [(b"k", f"v{i}".encode(), None, base_ms + i * 1000) for i in range(10)], partition=0)
    produce(bootstrap, topic, records("k", 4, base_ms), partition=1)
    idle, active, internal = (f"{prefix}lagtest-{uuid.uuid4().hex[:6]}" for prefix in ("", "", "_mirrorflow."))

    for group, offsets in ((idle, [(0, 6), (1, 4)]), (internal, [(0, 0)])):
        commit(bootstrap, group, [TopicPartition(topic, p, o) for p, o in offsets])

    member = Consumer({"bootstrap.servers": bootstrap, "group.id": active, "enable.auto.commit": False,
                       "auto.offset.reset": "earliest"})
    assigned = threading.Event()
    member.subscribe([topic], on_assign=lambda c, tps: assigned.set())
    try:
        deadline = time.monotonic() + 30
        while not assigned.is_set():
            assert time.monotonic() < deadline, "the active group never got its assignment"
            member.poll(0.2)
        member.commit(offsets=[TopicPartition(topic, 0, 10), TopicPartition(topic, 1, 1)], asynchronous=False)

        rows = group_lag({"c1": ClusterClient("c1", {"bootstrap.servers": bootstrap})},
                         topics=lambda t: t == topic)
    finally:
        member.close()
    mine = {(r.group, r.partition): r for r in rows if r.group in (idle, active)}
    assert {k: (r.committed, r.end, r.records) for k, r in mine.items()} == {
        (idle, 0): (6, 10, 4), (idle, 1): (4, 4, 0), (active, 0): (10, 10, 0), (active, 1): (1, 4, 3)}
    # the first unconsumed message of the idle group on p0 is offset 6, produced at base + 6 s
    assert mine[(idle, 0)].oldest_timestamp == base_ms + 6000
    assert abs(mine[(idle, 0)].seconds - (3600 - 6)) < 60
    assert mine[(idle, 1)].seconds == 0.0 and mine[(active, 0)].seconds == 0.0
    assert abs(mine[(active, 1)].seconds - 3600) < 60
    assert (mine[(idle, 0)].state, mine[(idle, 0)].members) == ("empty", 0)
    assert (mine[(active, 0)].state, mine[(active, 0)].members) == ("stable", 1)
    assert not [r for r in rows if r.group.startswith("_mirrorflow.")], "mirrorflow's own groups are excluded"
    # a selector narrows the groups
    only = group_lag({"c1": ClusterClient("c1", {"bootstrap.servers": bootstrap})}, lambda g: g == idle,
                     topics=lambda t: t == topic)
    assert {r.group for r in only} == {idle}


def test_an_unreachable_cluster_is_reported_and_violates_the_sla_the_rest_is_measured(kafka_clusters, make_topic):
    topic = make_topic("c1")
    make_topic("c2", name=topic)
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    topo = parse_topology(f"""
clusters:
  c1: {{bootstrap: "{kafka_clusters['c1'].bootstrap}"}}
  c2: {{bootstrap: "{kafka_clusters['c2'].bootstrap}"}}
  dead: {{bootstrap: "{dead}"}}
tree: {{level: 3, children: [{{level: 1, children: [c1, c2]}}, dead]}}
topics: ["{topic}"]
lag: {{sla: {{records: 0}}, groups: [{{groups: ".*", records: 0}}]}}
""", source="test")
    produce(kafka_clusters["c1"].bootstrap, topic, records("k", 3, int(time.time() * 1000) - HOUR_MS), partition=0)
    ccs = {n: ClusterClient.from_cluster_config(n, topo.clusters[n]) for n in topo.clusters}

    started = time.monotonic()
    snap = measure(topo, ccs, topo.all_links(), timeout=8.0)  # ample for the healthy two on a loaded machine
    assert time.monotonic() - started < 30, "an unreachable cluster must cost one timeout, not one per request"

    assert set(snap.unreachable) == {"dead"} and snap.unreachable["dead"].startswith(f"is unreachable at {dead}")
    by_link = {r.link_id: r for r in snap.links if r.topic == WHOLE}
    assert set(by_link) == {"c1.L3", "c2.L3", "dead.L3"}  # every link touching the dead cluster
    assert all(f"not measured: cluster dead is unreachable at {dead}" in r.error for r in by_link.values())
    healthy = {(r.link_id, r.partition): r.records if r.error is None else r.error
               for r in snap.links if r.topic == topic}
    assert healthy == {("c1.L1", 0): 3, ("c2.L1", 0): 0}  # measured all the same
    violations = [str(v) for v in snap.violations]
    assert f"link c1.L1 (c1 -> c2) {topic}[0]: 3 records > 0" in violations
    assert f"link c1.L3 (c1 -> dead): not measured: cluster dead is unreachable at {dead}" in " ".join(violations)
    assert any(v.startswith("cluster dead: consumer groups not measured") for v in violations), violations

    data = json.loads(json.dumps(snap.to_dict()))  # JSON-able as stored
    assert data["unreachable"] == snap.unreachable and data["ok"] is False
    assert data["totals"]["link_records"] == 3 and data["totals"]["unreachable"] == ["dead"]
    assert data["per_link"]["c1.L1"]["records"] == 3
    assert data["per_link"]["dead.L3"]["errors"] and data["violations"] == violations
    assert data["sla"] == {"sla": {"records": 0}, "groups": [{"groups": ".*", "records": 0}]}


def test_a_checkpoint_that_vanished_since_the_last_measurement_is_a_violation(kafka_clusters, make_topic):
    from confluent_kafka.admin import AdminClient

    from mirrorflow.copy.state.checkpoints import checkpoint_group

    topic = topic_everywhere(make_topic, PAIR_NAMES, partitions=1)
    topo = topology(kafka_clusters, PAIR, [topic], PAIR_NAMES)
    settings = clients(kafka_clusters, topo)
    produce(kafka_clusters["c1"].bootstrap, topic, records("k", 5, int(time.time() * 1000) - HOUR_MS), partition=0)
    assert run_level(topo, 1, settings).ok
    links = effective_links(topo, 1)
    first = measure(topo, cluster_clients(settings), links, topics=[topic])
    assert first.ok, first.violations
    row = next(r for r in first.links if r.link_id == "c1.L1")
    assert (row.checkpoint, row.checkpoint_missing) == (5, False)

    admin = AdminClient({"bootstrap.servers": kafka_clusters["c2"].bootstrap})
    for future in admin.delete_consumer_groups([checkpoint_group("c1.L1")], request_timeout=30).values():
        future.result(timeout=30)
    without_history = measure(topo, cluster_clients(settings), links, topics=[topic])
    assert without_history.ok  # a first measurement cannot tell a lost checkpoint from a new link
    second = measure(topo, cluster_clients(settings), links, topics=[topic], previous=first.to_dict())
    assert [str(v) for v in second.violations] == [
        f"link c1.L1 (c1 -> c2) {topic}[0]: the link's checkpoint on c2 is gone (expired, deleted, or the link's id "
        f"changed): its next level run refuses to copy, or would copy everything again"]
    third = measure(topo, cluster_clients(settings), links, topics=[topic], previous=second.to_dict())
    assert len(third.violations) == 1  # it stays a violation until someone acts


def test_the_watchers_poll_asks_less_and_waits_on_exactly_what_the_full_measurement_counts(kafka_clusters,
                                                                                          make_topic):
    """``ages=False`` asks the stable ends alone, and the earliest offsets only where a checkpoint is behind:
    the records waiting and their marks are those of the full measurement in every case that start depends on.

    ``old``: p0 behind its checkpoint, p1 at it with an open transaction after it (nothing a copy can take),
    p2 behind a checkpoint that retention passed (records deleted); ``new``, never copied (no checkpoint): p0
    holds records whose first ones were deleted, p1 is empty. The watcher's own way, with kept clients (its
    kept read_committed consumer asks by timestamp), counts the same.
    """
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    from mirrorflow.kafka import KeptClients
    from mirrorflow.lag import waiting

    old = topic_everywhere(make_topic, PAIR_NAMES, partitions=3)
    topo = topology(kafka_clusters, PAIR, [old], names=PAIR_NAMES)
    settings = clients(kafka_clusters, topo)
    ccs = cluster_clients(settings)
    c1 = kafka_clusters["c1"].bootstrap
    now_ms = int(time.time() * 1000)
    for p, count in ((0, 3), (1, 2), (2, 2)):
        produce(c1, old, records(f"p{p}", count, now_ms - HOUR_MS), partition=p)
    assert run_level(topo, 1, settings).ok  # checkpoints 3, 2, 2
    produce(c1, old, records("p0", 4, now_ms - HOUR_MS, start=3), partition=0)  # waiting from 3 to 7
    produce(c1, old, records("p2", 5, now_ms - HOUR_MS, start=2), partition=2)  # end 7, first 5 deleted below
    new = topic_everywhere(make_topic, PAIR_NAMES, partitions=2)
    produce(c1, new, records("n", 3, now_ms - HOUR_MS), partition=0)
    admin = AdminClient({"bootstrap.servers": c1})
    for future in admin.delete_records([TopicPartition(old, 2, 5), TopicPartition(new, 0, 1)]).values():
        future.result(timeout=30)
    topo = topology(kafka_clusters, PAIR, [old, new], names=PAIR_NAMES)
    open_txn = Producer({"bootstrap.servers": c1, "transactional.id": f"lag-open-{uuid.uuid4().hex[:6]}"})
    open_txn.init_transactions(30)
    open_txn.begin_transaction()
    open_txn.produce(old, b"held", partition=1)
    open_txn.flush(30)

    cheap = waiting(link_lag(topo, ccs, effective_links(topo, 1), ages=False))
    full = waiting(link_lag(topo, ccs, effective_links(topo, 1)))
    kept = KeptClients()
    try:
        with kept.active():
            watchers = waiting(link_lag(topo, ccs, effective_links(topo, 1), ages=False))
        # an admin client per cluster, each link's checkpoint consumer, each source's offsets consumer: none dropped
        assert (kept.count, kept.dropped) == (2 + 2 + 2, 0)
    finally:
        kept.close()
        open_txn.abort_transaction(30)
    assert cheap == full == watchers
    assert [m for m in cheap.marks if m[0] == "c1.L1"] == sorted([("c1.L1", old, 0, 3, 7), ("c1.L1", old, 2, 5, 7),
                                                                   ("c1.L1", new, 0, 1, 3)])
    assert cheap.records["c1.L1"] == 4 + 2 + 2
