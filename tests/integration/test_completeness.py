"""The completeness audit on real brokers (mirrorflow.completeness), on a pair of clusters; mirror_audit on the
four-cluster tree under traffic is tests/dags/test_audit_dag.py."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow import provenance
from mirrorflow.completeness import store
from mirrorflow.completeness.count import count_cluster
from mirrorflow.completeness.run import run_audit
from mirrorflow.completeness.store import AUDIT_TOPIC, Position, StateWriter, read_state
from mirrorflow.completeness.tally import window_of
from mirrorflow.errors import MirrorflowError
from mirrorflow.kafka.config import ClusterClient
from tests.integration.kafka_io import produce, read_all
from tests.integration.mirroring import clients, converge, topic_everywhere, topology, traffic
from tests.integration.progress_lines import every_update, progress_lines

pytestmark = pytest.mark.kafka

NAMES = ["c1", "c2"]
PAIR = """
  level: 1
  children: [c1, c2]
"""


def test_the_audit_finds_converged_clusters_complete_reads_only_new_data_and_names_what_differs(kafka_clusters,
                                                                                               make_topic, caplog,
                                                                                               monkeypatch):
    topic = topic_everywhere(make_topic, NAMES)
    topo = topology(kafka_clusters, PAIR, [topic], NAMES)
    settings = clients(kafka_clusters, topo)
    cluster = {n: ClusterClient(n, settings[n]) for n in NAMES}
    for c in NAMES:
        traffic(kafka_clusters, c, topic, 20)
    every_update(monkeypatch, caplog)
    results = converge(topo, settings)

    # the level runs (in this process) said how far they got at every commit, and where they ended
    lines = progress_lines(caplog, "level", results[0].run_id)
    assert lines[-1]["final"] and lines[-1]["measured"] == "records" and lines[-1]["percent"] == 100.0
    assert lines[-1]["records"] == lines[-1]["planned"] == sum(p.planned_records for p in results[0].links) > 0
    assert any(0 < line["records"] for line in lines[:-1]), lines  # counted before the end, not only at it

    def audit():  # every window is final an hour from now
        return run_audit(cluster, lambda t: t == topic, grace_s=0, now_ms=int(time.time() * 1000) + 3_600_000)

    caplog.clear()
    first = audit()
    assert first.ok, first.summary()
    assert {n: first.counts[n].read for n in NAMES} == dict.fromkeys(NAMES, 40)
    # each cluster's count said its progress: offsets read of those planned (markers included), to the end
    for n in NAMES:
        lines = [line for line in progress_lines(caplog, "audit") if line["cluster"] == n]
        assert lines[-1]["final"] and lines[-1]["records"] == lines[-1]["planned"] >= 40, lines
        assert lines[-1]["bytes"] > 0 and any(0 < line["records"] for line in lines[:-1]), lines
    assert first.comparison.judged >= 2 and first.comparison.complete == first.comparison.judged
    # each cluster keeps how its cells compared (the history); a run writes only what is new or changed
    assert set(first.verdicts_written) == set(NAMES)
    kept = {k: v for k, v in read_state(cluster["c2"]).verdicts.items() if k.topic == topic}  # other tests' too
    assert len(kept) == first.verdicts_written["c2"] and all(v["complete"] for v in kept.values())
    assert {k.origin for k in kept} == {"c1"}
    second = audit()
    assert second.ok and {n: second.counts[n].read for n in NAMES} == dict.fromkeys(NAMES, 0)
    assert second.verdicts_written == {} and second.summary()["verdicts_written"] == {}

    traffic(kafka_clusters, "c2", topic, 10, start=20)
    converge(topo, settings)
    third = audit()
    assert third.ok and {n: third.counts[n].read for n in NAMES} == dict.fromkeys(NAMES, 10)

    # c1's next messages reach c2; then c2 deletes partition 0 (delete_records) before they are audited
    traffic(kafka_clusters, "c1", topic, 10, start=20)
    converge(topo, settings)
    c2 = settings["c2"]["bootstrap.servers"]
    audited = read_state(cluster["c2"]).positions[(topic, 0)].next
    on_c2 = [r for r in read_all(c2, topic, 2) if r.partition == 0]
    unaudited = [r for r in on_c2 if r.offset >= audited]
    assert unaudited and all(provenance.find(list(r.headers), topic, r.partition).cluster == "c1" for r in unaudited)
    admin = AdminClient(settings["c2"])
    for future in admin.delete_records([TopicPartition(topic, 0, on_c2[-1].offset + 1)],
                                       request_timeout=30).values():
        future.result(timeout=30)
    # and c1 gets one of c2's messages twice, by hand, stamp and all
    c2_copy = next(r for r in read_all(settings["c1"]["bootstrap.servers"], topic, 2)
                   if getattr(provenance.find(list(r.headers), topic, r.partition), "cluster", None) == "c2")
    produce(settings["c1"]["bootstrap.servers"], topic, [(c2_copy.key, c2_copy.value, list(c2_copy.headers),
                                                          c2_copy.timestamp)], partition=c2_copy.partition)

    fourth = audit()
    assert not fourth.ok
    assert {(d.cluster, d.origin) for d in fourth.comparison.differences} == {("c2", "c1"), ("c1", "c2")}
    lacking = [d for d in fourth.comparison.differences if d.cluster == "c2"]
    assert sum(d.expected - d.held for d in lacking) == len(unaudited)  # the tallies: what was never counted
    history = {k: v for k, v in read_state(cluster["c2"]).verdicts.items() if k.topic == topic}
    assert {(k.window_ms, v["expected"], v["held"], v["complete"]) for k, v in history.items() if not v["complete"]} == {
        (d.window_ms, d.expected, d.held, False) for d in lacking}
    # the drill-down names what c2 lacks now, in the differing windows: every c1 message its partition 0 held there
    windows = {d.window_ms for d in lacking}
    gone = sorted((o.partition, o.offset) for r in on_c2 for o in [provenance.find(list(r.headers), topic, r.partition)]
                  if o is not None and o.cluster == "c1" and window_of(r.timestamp, 600) in windows)
    drills = {(d.difference.cluster, d.difference.window_ms): d for d in fourth.drills}
    named = sorted(tuple(m) for w in windows for m in drills["c2", w].missing)
    assert sum(drills["c2", w].missing_count for w in windows) == len(gone) and named == gone[:len(named)]
    assert all(drills["c2", w].duplicated_count == drills["c2", w].unexpected_count == 0 for w in windows)
    [twice] = [d for d in fourth.drills if d.difference.cluster == "c1"]
    origin = provenance.find(list(c2_copy.headers), topic, c2_copy.partition)
    assert (twice.duplicated_count, twice.duplicated, twice.missing_count) == (
        1, [[origin.partition, origin.offset]], 0)

    # another window length is another set of tallies, counted from the start; for them c2's emptied partition
    # means c2 holds nothing older than now: nothing of the past is compared with c2, as reference or holder

    minute = run_audit(cluster, lambda t: t == topic, window_s=60, grace_s=0,
                       now_ms=int(time.time() * 1000) + 3_600_000)
    assert {n: minute.counts[n].read for n in NAMES} == {
        n: len(read_all(settings[n]["bootstrap.servers"], topic, 2)) for n in NAMES}
    assert minute.comparison.differences == () and minute.comparison.before_horizon >= 1
    assert minute.counts["c2"].horizons[topic] > read_all(settings["c2"]["bootstrap.servers"], topic, 2)[-1].timestamp


def test_a_trees_audit_keeps_its_state_under_its_namespace(kafka_clusters, make_topic):
    """A tree with ``namespace: acc`` audits into ``_mirrorflow.acc.audit``: its own state, read back whole, and
    nothing in the state of the tree without a namespace (docs/naming.md, "Several trees in one Airflow")."""
    topic = topic_everywhere(make_topic, NAMES)
    topo = topology(kafka_clusters, PAIR, [topic], NAMES)
    settings = clients(kafka_clusters, topo)
    traffic(kafka_clusters, "c1", topic, 5)
    converge(topo, settings)
    tree = {n: ClusterClient(n, settings[n], namespace="acc") for n in NAMES}

    audited = run_audit(tree, lambda t: t == topic, grace_s=0, now_ms=int(time.time() * 1000) + 3_600_000)
    assert audited.ok, audited.summary()
    assert {n: audited.counts[n].read for n in NAMES} == dict.fromkeys(NAMES, 5)
    assert (topic, 0) in read_state(tree["c2"]).positions
    assert (topic, 0) not in read_state(ClusterClient("c2", settings["c2"])).positions


def test_a_clusters_topics_are_written_a_batch_of_topics_per_transaction(kafka_clusters, make_topic, monkeypatch):
    """One producer writes a cluster's counts, ``TOPICS_PER_WRITE`` topics per transaction (the last batch when
    the count ends): a first audit of a large cluster paid a producer and a transaction per topic."""
    monkeypatch.setattr(store, "TOPICS_PER_WRITE", 2)
    mine = sorted(make_topic("c1") for _ in range(3))
    for topic in mine:
        traffic(kafka_clusters, "c1", topic, 3)
    client = ClusterClient("c1", {"bootstrap.servers": kafka_clusters["c1"].bootstrap})

    counted = count_cluster(client, read_state(client), lambda t: t in mine)
    assert [t.read for t in counted.topics] == [3, 3, 3]
    assert all((topic, 0) in read_state(client).positions for topic in mine)
    # the stored records of each topic, in offset order: the first two topics in one transaction (no marker
    # between them), the third in the next (after the first's commit marker)
    offsets: dict[str, list[int]] = {topic: [] for topic in mine}
    for record in read_all(kafka_clusters["c1"].bootstrap, AUDIT_TOPIC, 1):
        key = (record.key or b"").decode()
        for topic in mine:
            if f"|{topic}|" in key:
                offsets[topic].append(record.offset)
    first, second, third = (sorted(offsets[t]) for t in mine)
    together = sorted(first + second)
    assert together == list(range(together[0], together[0] + len(together))), offsets
    assert third[0] > together[-1] + 1 and third == list(range(third[0], third[0] + len(third))), offsets


def test_a_second_audit_of_a_cluster_fences_the_first_whose_next_write_fails_by_name(kafka_clusters, make_topic):
    topic = make_topic("c1")
    client = ClusterClient("c1", {"bootstrap.servers": kafka_clusters["c1"].bootstrap})
    first, second = StateWriter(client, 600), StateWriter(client, 600)
    first.add(topic, {0: Position(1)}, {}, None)
    first.flush()
    second.add(topic, {0: Position(2)}, {}, None)
    second.flush()
    first.add(topic, {0: Position(3)}, {}, None)
    with pytest.raises(MirrorflowError, match=f"audit state of {topic}.*{AUDIT_TOPIC}"):
        first.flush()
    assert read_state(client, 600).positions[(topic, 0)] == Position(2)  # the fenced write left nothing
