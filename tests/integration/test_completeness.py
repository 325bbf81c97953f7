"""The completeness audit against a converged four-cluster tree on real brokers (mirrorflow.completeness)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow import provenance
from mirrorflow.completeness.run import run_audit
from mirrorflow.completeness.store import read_state
from mirrorflow.completeness.tally import window_of
from mirrorflow.kafka.config import ClusterClient
from tests.integration.kafka_io import produce, read_all
from tests.integration.mirroring import FOUR, clients, converge, topic_everywhere, topology, traffic

pytestmark = pytest.mark.kafka

NAMES = ["c1", "c2", "c3", "c4"]


def test_the_audit_finds_a_converged_tree_complete_reads_only_new_data_and_names_what_differs(kafka_clusters,
                                                                                             make_topic):
    topic = topic_everywhere(make_topic)
    topo = topology(kafka_clusters, FOUR, [topic])
    settings = clients(kafka_clusters, topo)
    cluster = {n: ClusterClient(n, settings[n]) for n in NAMES}
    for c in NAMES:
        traffic(kafka_clusters, c, topic, 20)
    converge(topo, settings)

    def audit():  # every window is final an hour from now
        return run_audit(cluster, lambda t: t == topic, grace_s=0, now_ms=int(time.time() * 1000) + 3_600_000)

    first = audit()
    assert first.ok, first.summary()
    assert {n: first.counts[n].read for n in NAMES} == dict.fromkeys(NAMES, 80)
    assert first.comparison.judged >= 4 and first.comparison.complete == first.comparison.judged
    second = audit()
    assert second.ok and {n: second.counts[n].read for n in NAMES} == dict.fromkeys(NAMES, 0)

    traffic(kafka_clusters, "c2", topic, 10, start=20)
    converge(topo, settings)
    third = audit()
    assert third.ok and {n: third.counts[n].read for n in NAMES} == dict.fromkeys(NAMES, 10)

    # c3's next messages reach every cluster; then c2 deletes partition 0 (delete_records) before they are audited
    traffic(kafka_clusters, "c3", topic, 10, start=20)
    converge(topo, settings)
    c2 = settings["c2"]["bootstrap.servers"]
    audited = read_state(cluster["c2"]).positions[(topic, 0)].next
    on_c2 = [r for r in read_all(c2, topic, 2) if r.partition == 0]
    unaudited = [r for r in on_c2 if r.offset >= audited]
    assert unaudited and all(provenance.find(list(r.headers)).cluster == "c3" for r in unaudited)
    admin = AdminClient(settings["c2"])
    for future in admin.delete_records([TopicPartition(topic, 0, on_c2[-1].offset + 1)],
                                       request_timeout=30).values():
        future.result(timeout=30)
    # and c4 gets one of c1's messages twice, by hand, stamp and all
    c1_copy = next(r for r in read_all(settings["c4"]["bootstrap.servers"], topic, 2)
                   if getattr(provenance.find(list(r.headers)), "cluster", None) == "c1")
    produce(settings["c4"]["bootstrap.servers"], topic, [(c1_copy.key, c1_copy.value, list(c1_copy.headers),
                                                          c1_copy.timestamp)], partition=c1_copy.partition)

    fourth = audit()
    assert not fourth.ok
    assert {(d.cluster, d.origin) for d in fourth.comparison.differences} == {("c2", "c3"), ("c4", "c1")}
    lacking = [d for d in fourth.comparison.differences if d.cluster == "c2"]
    assert sum(d.expected - d.held for d in lacking) == len(unaudited)  # the tallies: what was never counted
    # the drill-down names what c2 lacks now, in the differing windows: every c3 message its partition 0 held there
    windows = {d.window_ms for d in lacking}
    gone = sorted((o.partition, o.offset) for r in on_c2 for o in [provenance.find(list(r.headers))]
                  if o is not None and o.cluster == "c3" and window_of(r.timestamp, 600) in windows)
    drills = {(d.difference.cluster, d.difference.window_ms): d for d in fourth.drills}
    named = sorted(tuple(m) for w in windows for m in drills["c2", w].missing)
    assert sum(drills["c2", w].missing_count for w in windows) == len(gone) and named == gone[:len(named)]
    assert all(drills["c2", w].duplicated_count == drills["c2", w].unexpected_count == 0 for w in windows)
    [twice] = [d for d in fourth.drills if d.difference.cluster == "c4"]
    origin = provenance.find(list(c1_copy.headers))
    assert (twice.duplicated_count, twice.duplicated, twice.missing_count) == (
        1, [[origin.partition, origin.offset]], 0)

    # another window length is another set of tallies, counted from the start: c2's deleted partition is now
    # before its horizon (not compared on it), c4's duplicate still differs
    minute = run_audit(cluster, lambda t: t == topic, window_s=60, grace_s=0,
                       now_ms=int(time.time() * 1000) + 3_600_000)
    assert {n: minute.counts[n].read for n in NAMES} == {
        n: len(read_all(settings[n]["bootstrap.servers"], topic, 2)) for n in NAMES}
    assert {(d.cluster, d.origin) for d in minute.comparison.differences} == {("c4", "c1")}
