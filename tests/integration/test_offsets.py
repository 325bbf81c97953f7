"""Offset distribution on real clusters: publish on the owner, carry along the tree, commit elsewhere.

The assertions are counts: what a group reads on the other cluster after the
commit, compared with what it consumed on the owner. Nothing may be skipped;
with a single origin and the exact precision nothing may be read twice.
"""

from __future__ import annotations

from collections import Counter

from mirrorflow.copy.links import effective_links
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.offsets.distribute import distribute
from mirrorflow.offsets.failover import missing_on_target, distributed_positions, plan_failover
from mirrorflow.offsets.groups import describe
from mirrorflow.offsets.sync import apply_commits, commit_positions, publish_owned
from mirrorflow.offsets.topic import ensure_topic
from tests.integration.groups import consume_and_commit, read_from_committed
from tests.integration.mirroring import FOUR, clients, converge, topic_everywhere, topology, traffic


def _clients(kafka_clusters, topo):
    return {n: ClusterClient(n, s) for n, s in clients(kafka_clusters, topo).items()}


def _round(topo, cc, owners, precision=("exact", 60.0)):
    """One mirror_offsets pass by hand: publish on owners, distribute, commit everywhere else."""
    for c in cc.values():
        ensure_topic(c)
    for cluster in set(owners.values()):
        publish_owned(cc[cluster], [g for g, o in owners.items() if o == cluster], topo.selects)
    report = distribute({lvl: effective_links(topo, lvl) for lvl in topo.levels}, cc)
    assert not report.errors, report.errors
    out = {}
    for name, c in cc.items():
        infos = describe(c, list(owners))
        out[name] = commit_positions(c, owners, lambda g, i=infos: not i[g].active, lambda _g: precision)
    return out


def test_exact_single_origin_moves_without_skip_or_replay(kafka_clusters, make_topic):
    topic = topic_everywhere(make_topic)
    topo = topology(kafka_clusters, FOUR, [topic])
    expected = traffic(kafka_clusters, "c1", topic, 300)
    converge(topo, clients(kafka_clusters, topo))
    done = consume_and_commit(kafka_clusters["c1"].bootstrap, topic, "g-exact", 130)
    cc = _clients(kafka_clusters, topo)

    reports = _round(topo, cc, {"g-exact": "c1"})

    for cluster in ("c2", "c3", "c4"):
        rest = read_from_committed(kafka_clusters[cluster].bootstrap, topic, "g-exact", 2)
        assert Counter(done) + Counter(rest) == Counter(expected), f"{cluster}: skipped or replayed"
        assert {r.group for r in reports[cluster].rows} == {"g-exact"}
    assert not reports["c1"].rows  # the owner itself is never committed to

    again = _round(topo, cc, {"g-exact": "c1"})
    assert all(not r.rows for r in again.values()), "a second pass with nothing new must change nothing"


def test_timestamp_precision_replays_only_within_the_margin(kafka_clusters, make_topic):
    topic = topic_everywhere(make_topic)
    topo = topology(kafka_clusters, FOUR, [topic])
    expected = traffic(kafka_clusters, "c1", topic, 400)  # CreateTimes 1 ms apart per message
    converge(topo, clients(kafka_clusters, topo))
    done = consume_and_commit(kafka_clusters["c1"].bootstrap, topic, "g-ts", 150)
    cc = _clients(kafka_clusters, topo)

    _round(topo, cc, {"g-ts": "c1"}, precision=("timestamp", 0.05))  # 50 ms margin

    rest = read_from_committed(kafka_clusters["c4"].bootstrap, topic, "g-ts", 2)
    assert not set(expected) - set(done) - set(rest), "the timestamp rule skipped messages"
    replayed = set(done) & set(rest)
    assert replayed, "a 50 ms margin over 1 ms-spaced messages must replay some"
    # message i was produced with CreateTime base + (i % 1000) ms, one origin: replay bounded by the margin
    seq = {v: int(v.split("|")[2]) for v in expected}
    by_partition_last = max(seq[v] for v in done)
    assert all(by_partition_last - seq[v] <= 50 + 5 for v in replayed), sorted(seq[v] for v in replayed)[:10]


def test_exact_active_active_never_skips_and_predicts_its_replay(kafka_clusters, make_topic):
    topic = topic_everywhere(make_topic)
    topo = topology(kafka_clusters, FOUR, [topic])
    settings = clients(kafka_clusters, topo)
    expected = traffic(kafka_clusters, "c1", topic, 150) + traffic(kafka_clusters, "c3", topic, 150)
    converge(topo, settings)
    expected += traffic(kafka_clusters, "c3", topic, 100, start=150) + traffic(kafka_clusters, "c1", topic, 100,
                                                                                start=150)
    converge(topo, settings)
    done = consume_and_commit(kafka_clusters["c1"].bootstrap, topic, "g-aa", 320)
    cc = _clients(kafka_clusters, topo)
    ensure_topic(cc["c1"])
    publish_owned(cc["c1"], ["g-aa"], topo.selects)
    distribute({lvl: effective_links(topo, lvl) for lvl in topo.levels}, cc)

    for target in ("c2", "c4"):
        positions = distributed_positions(cc[target], "c1", ["g-aa"])
        assert len(positions) == 2
        assert missing_on_target(cc[target], positions) == {}
        plan = plan_failover(cc[target], positions, source="c1", mode="planned", precision="exact", margin_s=60,
                             groups=["g-aa"])
        apply_commits(cc[target], plan.commit_rows())
        rest = read_from_committed(kafka_clusters[target].bootstrap, topic, "g-aa", 2)
        assert not set(expected) - set(done) - set(rest), f"{target}: skipped messages"
        assert len(set(done) & set(rest)) == sum(r.expected_replay for r in plan.rows), target
