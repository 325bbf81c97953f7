"""A source partition truncated and written again under a link (mirrorflow.copy.state.history), on real brokers.

A single-broker source cluster of its own is stopped, its partition's last log
segment removed (what an unclean leader election or a restore from an older disk
leaves), and started again; then new messages are written at the offsets the
link had already copied. The level run must stop that partition, naming the
truncation, first while the log ends below the checkpoint (the planner sees it)
and then once it grew past it again (the copy reads the record before its
checkpoint again and finds another one). ``mirror_resolve_gap``'s ``rewind``
finds the first offset that differs and resumes there: every message written
again reaches the target once, the copies of the lost ones stay.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from mirrorflow.actions.gap import ResolveRefused, resolve
from mirrorflow.copy.engine.partition import copy_partition
from mirrorflow.copy.job import run_job
from mirrorflow.copy.spec import JobSpec, LinkJob
from mirrorflow.copy.state.checkpoints import CheckpointMeta, read_checkpoints
from mirrorflow.copy.task import PartitionTask
from mirrorflow.journal import JOURNAL_LOGGER
from mirrorflow.kafka.config import ClusterClient
from mirrorflow_dev.kafka import LocalCluster
from mirrorflow_dev.process import free_port
from tests.integration.kafka_io import produce, read_all

pytestmark = pytest.mark.kafka

LINK = "s.L1"
VALUE = 20_000  # bytes: 64 of them fill more than one 1 MiB segment


@pytest.fixture
def source_cluster(tmp_path: Path, kafka_distribution):
    """A source cluster of this test's own: it is stopped and its files edited."""
    cluster = LocalCluster("s", tmp_path / "s", free_port(), free_port(), kafka_distribution,
                           progress=lambda message: None)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _records(n, tag):
    return [(f"k{i}".encode(), f"{tag}{i}-".encode().ljust(VALUE, b"."), None, None) for i in range(n)]


def _run(source, target, topic, run_id):
    clusters = {"s": {"bootstrap.servers": source.bootstrap}, "c2": {"bootstrap.servers": target.bootstrap}}
    spec = JobSpec(level=1, run_id=run_id, topics=(topic,), clusters=clusters, slots=1,
                   links=(LinkJob(LINK, 1, "s", "c2"),))
    return run_job(spec)


def _cut_last_segment(cluster: LocalCluster, topic: str) -> int:
    """Stop the broker, remove the partition's last segment, start it again; returns the new log end."""
    cluster.stop()
    directory = cluster.data_dir / f"{topic}-0"
    bases = sorted(int(p.stem) for p in directory.glob("*.log"))
    assert len(bases) >= 2, f"one segment only in {directory}: {sorted(p.name for p in directory.iterdir())}"
    for path in directory.glob(f"{bases[-1]:020d}.*"):
        path.unlink()
    cluster.start()
    return bases[-1]


def test_a_truncated_and_rewritten_source_is_named_and_rewind_resumes_exactly(source_cluster, kafka_clusters,
                                                                               make_topic, caplog):
    target = kafka_clusters["c2"]
    topic = make_topic(source_cluster, config={"segment.bytes": str(1 << 20)})
    make_topic("c2", name=topic)
    produce(source_cluster.bootstrap, topic, _records(64, "old"), partition=0)
    first = _run(source_cluster, target, topic, "trunc-1")
    assert not first.errors and first.copied == 64
    src = ClusterClient("s", {"bootstrap.servers": source_cluster.bootstrap})
    dst = ClusterClient("c2", {"bootstrap.servers": target.bootstrap})
    (checkpoint, metadata), = read_checkpoints(dst, LINK, [TopicPartition(topic, 0)]).values()
    meta = CheckpointMeta.decode(metadata)
    assert checkpoint == 64 and meta is not None and meta.last is not None and meta.last.offset == 63

    end = _cut_last_segment(source_cluster, topic)
    assert 0 < end < 64
    caplog.set_level(logging.INFO, logger=JOURNAL_LOGGER)

    # 1. The log ends below the checkpoint: the planner names it; nothing copied.
    shorter = _run(source_cluster, target, topic, "trunc-2")
    assert [e.error for e in shorter.errors] == [
        f"truncated source: s {topic}[0] ends at offset {end}, below link {LINK}'s checkpoint 64: offsets "
        f"{end}..63, which the link copied, are no longer on s (an unclean leader election, a restore), and what "
        f"is written there next is not what was copied; nothing copied. Run mirror_resolve_gap with action rewind "
        f"(dry run first): it names the first offset that differs and resumes the link there"]
    assert shorter.copied == 0

    # 2. Written again past the checkpoint: the copy finds another record before its checkpoint.
    produce(source_cluster.bootstrap, topic, _records(80 - end, "new"), partition=0)
    rewritten = _run(source_cluster, target, topic, "trunc-3")
    assert rewritten.copied == 0
    (error,) = rewritten.errors
    assert error.error.startswith(f"truncated source: s {topic}[0] offset 63, the last record link {LINK} read "
                                    f"before its checkpoint, is another record now"), error.error
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == JOURNAL_LOGGER]
    assert [(l["checkpoint"], l["diverged_at"]) for l in lines if l["event"] == "truncated"] == [(64, end), (64, 63)]
    assert len(read_all(target.bootstrap, topic, 1)) == 64  # nothing copied over the new history
    # The per-partition path (after a refused copy, a restore) checks the same way.
    alone = copy_partition(PartitionTask(link_id=LINK, level=1, source="s", target="c2", topic=topic, partition=0,
                                         end_offset=80), src, dst)
    assert (alone.error, alone.diverged_at, alone.copied) == (error.error, 63, 0)

    # 3. rewind: a dry run names the first offset that differs; another offset is refused; then it resumes.
    dry = resolve(LINK, 1, src, dst, topic, 0, "rewind", dry_run=True)
    assert (dry.checkpoint, dry.position) == (64, end), dry
    assert f"the source's record at offset {end} differs" in (dry.note or "")
    with pytest.raises(ResolveRefused, match=f"first differs at offset {end}"):
        resolve(LINK, 1, src, dst, topic, 0, "rewind", requested=end - 1)
    resolve(LINK, 1, src, dst, topic, 0, "rewind", requested=end)
    resumed = _run(source_cluster, target, topic, "trunc-4")
    assert not resumed.errors and resumed.copied == 80 - end
    values = [r.value.split(b"-")[0] for r in read_all(target.bootstrap, topic, 1)]
    assert values == [f"old{i}".encode() for i in range(64)] + [f"new{i}".encode() for i in range(80 - end)]
    again = _run(source_cluster, target, topic, "trunc-5")
    assert not again.errors and again.copied == 0


TREE = """
  level: 3
  children:
    - {level: 1, children: [s, c2]}
    - {level: 1, children: [c3, c4]}
"""


def test_a_truncation_in_a_four_cluster_tree_under_traffic_stops_only_that_partition(source_cluster,
                                                                                      kafka_clusters, make_topic):
    """s (restartable) next to c2, and c3/c4: s's partition 0 is truncated and written again while c2..c4 produce."""
    from tests.integration.mirroring import (
        Traffic,
        assert_exactly_once,
        clients,
        converge,
        run_level,
        topology,
        traffic,
    )

    clusters = {"s": source_cluster, **{n: kafka_clusters[n] for n in ("c2", "c3", "c4")}}
    names = ["s", "c2", "c3", "c4"]
    topic = make_topic(source_cluster, partitions=2, config={"segment.bytes": str(1 << 20)})
    for name in names[1:]:
        make_topic(name, partitions=2, name=topic)
    topo = topology(clusters, TREE, [topic], names)
    settings = clients(clusters, topo)
    expected = [m for c in names for m in traffic(clusters, c, topic, 20)]
    converge(topo, settings)
    # s's own large messages fill partition 0 past a segment; copied everywhere, nothing arrives after them
    big = [f"s|s-big|{i:06d}" + "." * VALUE for i in range(64)]
    produce(source_cluster.bootstrap, topic, [(b"s-big", v.encode(), None, None) for v in big], partition=0)
    expected += big
    converge(topo, settings)
    before = {r.offset: r.value.decode() for r in read_all(source_cluster.bootstrap, topic, 2) if r.partition == 0}
    old_end = max(before) + 1

    end = _cut_last_segment(source_cluster, topic)
    lost = [v for o, v in before.items() if o >= end]
    assert lost and all(v.startswith("s|s-big|") for v in lost)
    rewritten = [f"s|s-new|{i:06d}" for i in range(old_end - end + 10)]
    produce(source_cluster.bootstrap, topic, [(b"s-new", v.encode(), None, None) for v in rewritten], partition=0)
    expected += rewritten
    with Traffic(clusters, topic, ["c2", "c3", "c4"], batch=5, interval=0.2) as flowing:
        stopped = [run_level(topo, level, settings) for level in topo.levels]
        flowing.wait_for(len(flowing.ids) + 30)
    expected += flowing.ids
    failed = sorted((e.link, e.topic, e.partition) for r in stopped for e in r.errors)
    assert failed == [("s.L1", topic, 0), ("s.L3", topic, 0)], [str(e) for r in stopped for e in r.errors]
    assert all(e.error.startswith(f"truncated source: s {topic}[0] offset {old_end - 1}, the last record link")
               for r in stopped for e in r.errors)

    src = ClusterClient("s", settings["s"])
    for link, target in (("s.L1", "c2"), ("s.L3", "c3")):
        done = resolve(link, int(link[-1]), src, ClusterClient(target, settings[target]), topic, 0, "rewind")
        assert (done.checkpoint, done.position) == (old_end, end), done
    converge(topo, settings)
    assert_exactly_once(clusters, ["s"], topic, [m for m in expected if m not in set(lost)])
    assert_exactly_once(clusters, ["c2", "c3", "c4"], topic, expected)  # the copies of the lost ones stay
