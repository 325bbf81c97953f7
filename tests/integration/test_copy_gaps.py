"""Retention gaps on real brokers: the source deleted offsets a link had not copied yet (c1 -> c2).

The source's log start is moved past the link's checkpoint with ``delete_records``,
as retention does. The default policy (``on_gap: fail``) stops that partition, names
the lost range and keeps the checkpoint; ``skip`` steps over it, records the loss and
writes a ``gap`` audit line. Other partitions go on either way.
"""

from __future__ import annotations

import json
import logging
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow.copy.engine.clients import CopyClients
from mirrorflow.copy.engine.group import copy_group
from mirrorflow.copy.engine.partition import copy_partition
from mirrorflow.copy.job import run_job
from mirrorflow.copy.spec import JobSpec, LinkJob
from mirrorflow.copy.state.checkpoints import checkpoint_group
from mirrorflow.copy.task import PartitionTask
from mirrorflow.copy.txn_groups import TXN_GROUPS
from mirrorflow.journal import JOURNAL_LOGGER
from mirrorflow.kafka.config import ClusterClient
from tests.integration.kafka_io import produce, read_all
from tests.integration.mirroring import (
    FOUR,
    THREE,
    assert_exactly_once,
    clients,
    converge,
    run_level,
    topic_everywhere,
    topology,
    traffic,
)

pytestmark = pytest.mark.kafka

LINK = "c1.L1"


def _clients(kafka_clusters):
    return (ClusterClient("c1", {"bootstrap.servers": kafka_clusters["c1"].bootstrap}),
            ClusterClient("c2", {"bootstrap.servers": kafka_clusters["c2"].bootstrap}))


def _task(topic, partition, end, **kw):
    return PartitionTask(link_id=LINK, level=1, source="c1", target="c2", topic=topic, partition=partition,
                         end_offset=end, **kw)


def _records(n, tag="m"):
    base = int(time.time() * 1000) - 60_000  # recent: the brokers' time-based retention leaves them alone
    return [(f"k{i}".encode(), f"{tag}{i}".encode(), None, base + i) for i in range(n)]


def _delete_before(bootstrap, topic, partition, offset):
    """Move the partition's log start to ``offset``, as retention would."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, partition, offset)], request_timeout=30).values():
        assert future.result(timeout=30).low_watermark == offset


def _checkpoint(bootstrap, topic, partition):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": checkpoint_group(LINK)})
    try:
        tp = consumer.committed([TopicPartition(topic, partition)], timeout=30)[0]
        return tp.offset if tp.offset >= 0 else None
    finally:
        consumer.close()


def _topic_pair(make_topic, partitions=1):
    """The same new topic on c1 (the source) and c2 (the target)."""
    topic = make_topic("c1", partitions=partitions)
    make_topic("c2", partitions=partitions, name=topic)
    return topic


def _level_run(kafka_clusters, topic, run_id, **link_settings):
    """One in-process level run of the link c1 -> c2 on ``topic`` (no Spark)."""
    clusters = {n: {"bootstrap.servers": kafka_clusters[n].bootstrap} for n in ("c1", "c2")}
    spec = JobSpec(level=1, run_id=run_id, topics=(topic,), clusters=clusters, slots=1,
                   links=(LinkJob(LINK, 1, "c1", "c2", **link_settings),))
    return run_job(spec)


def test_a_retention_gap_fails_the_partition_by_name_and_skip_steps_over_it(kafka_clusters, make_topic):
    topic = _topic_pair(make_topic)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    produce(c1, topic, _records(200), partition=0)
    src, dst = _clients(kafka_clusters)
    assert copy_partition(_task(topic, 0, 100), src, dst).next_offset == 100
    _delete_before(c1, topic, 0, 150)

    failed = copy_partition(_task(topic, 0, 200), src, dst)
    assert failed.error == ("retention gap: offsets 100..149 (50) are no longer on c1 and were never copied; the "
                            "partition stops at 100 (on_gap: fail; on_gap: skip steps over them with a recorded loss)")
    assert (failed.error_offset, failed.lost_to_retention, failed.lost_offsets, failed.copied) == (100, 50,
                                                                                                    [100, 149], 0)
    assert _checkpoint(c2, topic, 0) == 100  # left as it was: the gap stays visible until an operator decides
    assert len(read_all(c2, topic, 1)) == 100

    skipped = copy_partition(_task(topic, 0, 200, on_gap="skip"), src, dst)
    assert skipped.ok, skipped.error
    assert (skipped.start_offset, skipped.copied, skipped.lost_to_retention, skipped.lost_offsets) == (
        150, 50, 50, [100, 149])
    assert _checkpoint(c2, topic, 0) == 200
    assert [r.value for r in read_all(c2, topic, 1)][100:] == [f"m{i}".encode() for i in range(150, 200)]


def test_in_a_transaction_group_only_the_partition_with_the_gap_stops(kafka_clusters, make_topic):
    partitions = TXN_GROUPS + 1  # partitions 0 and TXN_GROUPS share transaction group 0
    topic = _topic_pair(make_topic, partitions)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    group = [0, TXN_GROUPS]
    for p in group:
        produce(c1, topic, _records(60, tag=f"p{p}-"), partition=p)
    src, dst = _clients(kafka_clusters)
    with_clients = CopyClients()
    try:
        first = copy_group([_task(topic, p, 30) for p in group], src, dst, clients=with_clients)
        assert [r.next_offset for r in first] == [30, 30]
        _delete_before(c1, topic, 0, 45)

        second = copy_group([_task(topic, p, 60) for p in group], src, dst, clients=with_clients)
    finally:
        with_clients.close()
    gap, fine = second
    assert gap.error is not None and gap.error.startswith("retention gap: offsets 30..44 (15) are no longer on c1")
    assert (gap.copied, gap.lost_offsets) == (0, [30, 44])
    assert fine.ok and (fine.copied, fine.next_offset) == (30, 60)
    assert _checkpoint(c2, topic, 0) == 30 and _checkpoint(c2, topic, TXN_GROUPS) == 60


def _gap_lines(caplog):
    out = []
    for record in caplog.records:
        if record.name == JOURNAL_LOGGER and '"event":"gap"' in record.getMessage():
            out.append((record.levelno, json.loads(record.getMessage())))
    return out


@pytest.mark.parametrize("on_gap", ["fail", "skip"])
def test_a_level_run_names_the_gap_in_a_loud_audit_line_even_when_nothing_is_left_past_it(
        kafka_clusters, make_topic, caplog, on_gap):
    topic = _topic_pair(make_topic)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    produce(c1, topic, _records(40), partition=0)

    def run(run_id):
        return _level_run(kafka_clusters, topic, run_id, max_records_per_run=25, on_gap=on_gap)

    assert run("first").copied == 25
    _delete_before(c1, topic, 0, 40)  # everything: the source holds nothing past the gap
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=JOURNAL_LOGGER):
        result = run("second")
    [(level, line)] = _gap_lines(caplog)
    assert level == logging.WARNING
    assert (line["topic"], line["partition"], line["lost_offsets"], line["lost"], line["on_gap"]) == (
        topic, 0, [25, 39], 15, on_gap)
    if on_gap == "fail":
        [error] = result.errors
        assert (error.link, error.topic, error.partition, error.offset) == (LINK, topic, 0, 25)
        assert "retention gap: offsets 25..39 (15)" in error.error
        assert line["action"].startswith("stopped")
        assert _checkpoint(c2, topic, 0) == 25
    else:
        assert result.errors == []
        assert line["action"].startswith("skipped")
        assert _checkpoint(c2, topic, 0) == 40


def _recreate(bootstrap, make_topic, cluster, topic, partitions=1):
    """Delete ``topic`` and create it again under the same name: a new incarnation, offsets from 0."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
    deadline = time.monotonic() + 60
    while True:
        try:
            make_topic(cluster, partitions=partitions, name=topic)
            return
        except Exception as exc:  # the deletion is still being carried out: TOPIC_ALREADY_EXISTS or similar
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic} could not be created again on {cluster}: {exc}") from exc
            _pause.wait(0.5)


_pause = __import__("threading").Event()  # never set: a bounded back-off between attempts


def _committed_meta(bootstrap, topic, partition):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": checkpoint_group(LINK)})
    try:
        tp = consumer.committed([TopicPartition(topic, partition)], timeout=30)[0]
        return tp.offset, tp.metadata
    finally:
        consumer.close()


def test_a_recreated_source_topic_is_copied_from_its_first_offset_and_said_so(kafka_clusters, make_topic, caplog):
    topic = _topic_pair(make_topic)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap

    def run(run_id):
        return _level_run(kafka_clusters, topic, run_id)

    produce(c1, topic, _records(100, tag="old"), partition=0)
    assert run("first").copied == 100
    offset, first_meta = _committed_meta(c2, topic, 0)
    assert offset == 100 and first_meta.startswith("mirrorflow:v1;source=")

    _recreate(c1, make_topic, "c1", topic)  # the old incarnation's checkpoint (100) is above every new offset
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=JOURNAL_LOGGER):
        empty = run("recreated, still empty")
    assert empty.errors == [] and empty.copied == 0
    [line] = [json.loads(r.getMessage()) for r in caplog.records
              if r.name == JOURNAL_LOGGER and '"event":"checkpoint_set_aside"' in r.getMessage()]
    assert (line["checkpoint"], line["metadata"]) == (100, first_meta)
    assert line["reason"].startswith("the source topic was recreated (topic id ")
    offset, meta = _committed_meta(c2, topic, 0)
    assert offset == 0 and meta != first_meta  # the new incarnation's first offset, with its id

    produce(c1, topic, _records(130, tag="new"), partition=0)
    assert run("new traffic").copied == 130
    values = [r.value for r in read_all(c2, topic, 1)]
    assert values == [f"old{i}".encode() for i in range(100)] + [f"new{i}".encode() for i in range(130)]
    assert run("nothing new").copied == 0


def test_a_recreated_target_topic_is_filled_again_from_the_source_not_resumed(kafka_clusters, make_topic):
    """Kafka drops the link's committed offsets with the deleted target topic, so the link starts over.

    (The topic-id check of the checkpoint would also set a surviving checkpoint aside:
    tests/unit/test_copy_start.py.)
    """
    topic = _topic_pair(make_topic)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap

    def run(run_id):
        return _level_run(kafka_clusters, topic, run_id)

    produce(c1, topic, _records(60), partition=0)
    assert run("first").copied == 60
    _recreate(c2, make_topic, "c2", topic)  # the target lost everything; the source still holds it all
    produce(c1, topic, _records(5, tag="late"), partition=0)
    result = run("after the target was recreated")
    assert result.errors == []
    values = [r.value for r in read_all(c2, topic, 1)]
    assert values == [f"m{i}".encode() for i in range(60)] + [f"late{i}".encode() for i in range(5)]


def _forget_checkpoint(bootstrap):
    """What offsets.retention.minutes does to an idle link: its committed offsets are gone."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_consumer_groups([checkpoint_group(LINK)], request_timeout=30).values():
        future.result(timeout=30)


def test_a_lost_checkpoint_is_recovered_exactly_from_the_copies_provenance(kafka_clusters, make_topic, caplog):
    topic = _topic_pair(make_topic)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    produce(c1, topic, _records(50), partition=0)
    assert _level_run(kafka_clusters, topic, "first").copied == 50
    _forget_checkpoint(c2)
    produce(c1, topic, _records(10, tag="late"), partition=0)

    caplog.clear()
    with caplog.at_level(logging.INFO, logger=JOURNAL_LOGGER):
        recovered = _level_run(kafka_clusters, topic, "without a checkpoint")
    assert not recovered.errors and recovered.copied == 10
    [line] = [json.loads(r.getMessage()) for r in caplog.records
              if r.name == JOURNAL_LOGGER and '"checkpoint_recovered"' in r.getMessage()]
    assert (line["position"], line["topic"], line["partition"]) == (50, topic, 0)
    assert line["how"].startswith("c2 holds copies of c1's messages up to source offset 49; of the 10 records after "
                                  "that, none is on c2")
    values = [r.value for r in read_all(c2, topic, 1)]
    assert values == [f"m{i}".encode() for i in range(50)] + [f"late{i}".encode() for i in range(10)]
    assert _checkpoint(c2, topic, 0) == 60


def test_a_lost_checkpoint_that_cannot_be_proven_refuses_and_resume_from_continues_exactly(kafka_clusters,
                                                                                           make_topic, caplog):
    """A switched link's target may hold the source's messages through other links: no proof, so a refusal."""
    from mirrorflow.actions.gap import ResolveRefused, resolve

    topic = _topic_pair(make_topic)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap

    def run(run_id):
        return _level_run(kafka_clusters, topic, run_id, switched=True)

    produce(c1, topic, _records(50), partition=0)
    assert run("first").copied == 50
    _forget_checkpoint(c2)
    produce(c1, topic, _records(10, tag="late"), partition=0)

    caplog.clear()
    with caplog.at_level(logging.INFO, logger=JOURNAL_LOGGER):
        refused = run("without a checkpoint")
    [error] = refused.errors
    assert (error.topic, error.partition, refused.copied) == (topic, 0, 0)
    assert "the link has no checkpoint on c2, but c2 already holds 50 copies" in error.error
    assert "resume_from, offset 50" in error.error
    assert any('"event":"checkpoint_missing"' in r.getMessage() for r in caplog.records if r.name == JOURNAL_LOGGER)
    assert len(read_all(c2, topic, 1)) == 50  # nothing copied twice

    src, dst = _clients(kafka_clusters)
    with pytest.raises(ResolveRefused, match=r"would drop offsets 0\.\.59, which the source still holds: the target "
                                             r"holds copies of only 50 of the 60 the link copies"):
        resolve(LINK, 1, src, dst, topic, 0, "resume_from", requested=60)
    done = resolve(LINK, 1, src, dst, topic, 0, "resume_from", requested=50)
    assert (done.checkpoint, done.position, done.lost) == (None, 50, None)
    assert run("resumed").copied == 10
    values = [r.value for r in read_all(c2, topic, 1)]
    assert values == [f"m{i}".encode() for i in range(50)] + [f"late{i}".encode() for i in range(10)]




def test_a_lost_checkpoint_of_a_link_that_forwards_copies_is_recovered_exactly(kafka_clusters, make_topic, caplog):
    """c3.L1 (c3 -> c4) passes on c1's messages that c1.L3 brought to c3: those are the doubtful ones."""

    topic = topic_everywhere(make_topic)
    topo = topology(kafka_clusters, FOUR, [topic])
    settings = clients(kafka_clusters, topo)
    names = ["c1", "c2", "c3", "c4"]
    expected = [m for c in names for m in traffic(kafka_clusters, c, topic, 20)]
    converge(topo, settings)
    c4 = kafka_clusters["c4"].bootstrap

    def forget():
        admin = AdminClient({"bootstrap.servers": c4})
        for future in admin.delete_consumer_groups([checkpoint_group("c3.L1")], request_timeout=30).values():
            future.result(timeout=30)

    # c1's new messages reach c3 (level 3) but not yet c4; then c3.L1's checkpoint is lost
    expected += traffic(kafka_clusters, "c1", topic, 10, start=20)
    assert run_level(topo, 3, settings).ok
    forget()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=JOURNAL_LOGGER):
        recovered = run_level(topo, 1, settings)
    assert recovered.ok, "\n".join(str(e) for e in recovered.errors)
    lines = [json.loads(r.getMessage()) for r in caplog.records
             if r.name == JOURNAL_LOGGER and '"checkpoint_recovered"' in r.getMessage()]
    assert {line["link"]["id"] for line in lines} == {"c3.L1"}
    assert all("copies from other clusters checked" in line["how"] for line in lines)
    converge(topo, settings)
    assert_exactly_once(kafka_clusters, names, topic, expected)

    # now c3.L1 has passed c1's newest messages on to c4 before its checkpoint is lost: after them it resumes
    expected += traffic(kafka_clusters, "c1", topic, 10, start=30)
    assert run_level(topo, 3, settings).ok and run_level(topo, 1, settings).ok
    expected += traffic(kafka_clusters, "c1", topic, 10, start=40)
    assert run_level(topo, 3, settings).ok
    forget()
    again = run_level(topo, 1, settings)
    assert again.ok, "\n".join(str(e) for e in again.errors)
    converge(topo, settings)
    assert_exactly_once(kafka_clusters, names, topic, expected)


def test_a_topic_recreated_inside_the_tree_brings_every_message_to_every_cluster_once(kafka_clusters, make_topic,
                                                                                      caplog):
    """c1 forwards between c2 (level 1) and c3 (level 3); its topic is deleted and created again.

    The links into c1 fill the new topic again from c2 and c3 (Kafka dropped their checkpoints with the
    topic); c1's links out set their checkpoints aside and pass on only what their targets do not hold
    yet: c3's messages that reached c1 but not c2 before the deletion, and everything new. c1's own old
    messages are gone from c1 (that is what deleting the topic there means); the others keep them.
    """
    parts = range(5)  # partitions 0 and 4 share a transaction group (copy.group), 1..3 are copied alone
    topic = topic_everywhere(make_topic, partitions=len(parts))
    topo = topology(kafka_clusters, FOUR, [topic])
    settings = clients(kafka_clusters, topo)
    names = ["c1", "c2", "c3", "c4"]
    old = {c: traffic(kafka_clusters, c, topic, 20, keys=20) for c in names}  # every partition gets some
    converge(topo, settings)
    old["c3"] += traffic(kafka_clusters, "c3", topic, 20, start=20, keys=20)
    assert run_level(topo, 3, settings).copied == 20  # on c1, not yet passed on to c2 (level 1)

    _recreate(kafka_clusters["c1"].bootstrap, make_topic, "c1", topic, partitions=len(parts))
    new = [m for c in names for m in traffic(kafka_clusters, c, topic, 20, start=100, keys=20)]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=JOURNAL_LOGGER):
        converge(topo, settings)
    everything = [m for c in names for m in old[c]] + new
    assert_exactly_once(kafka_clusters, ["c2", "c3", "c4"], topic, everything)
    assert_exactly_once(kafka_clusters, ["c1"], topic, [m for m in everything if m not in set(old["c1"])])
    lines = [json.loads(r.getMessage()) for r in caplog.records
             if r.name == JOURNAL_LOGGER and '"checkpoint_set_aside"' in r.getMessage()]
    assert sorted((line["link"]["id"], line["partition"]) for line in lines) == sorted(
        (link, p) for link in ("c1.L1", "c1.L3") for p in parts)
    # c1.L1 passes c3's messages on to c2 (c4's reach c2 at level 3); c1.L3 passes on only c1's own
    held = {(line["link"]["id"], line["partition"]): line["held_on_target"] for line in lines}
    assert all(set(held["c1.L1", p]) == {"c3"} and held["c1.L3", p] == {} for p in parts), held
    # once c1.L1 read past what c2 held, its checkpoints stop carrying the floors
    consumer = Consumer({"bootstrap.servers": kafka_clusters["c2"].bootstrap, "group.id": checkpoint_group("c1.L1")})
    try:
        metas = [tp.metadata for tp in consumer.committed([TopicPartition(topic, p) for p in parts], timeout=30)]
    finally:
        consumer.close()
    assert all(m.startswith("mirrorflow:v1;") and ";held=" not in m for m in metas), metas


def test_resume_from_counts_the_copies_a_link_passes_on_not_only_its_sources_own(kafka_clusters, make_topic):
    """c1.L1 passes c3's messages on to c2: moving its checkpoint back over them would copy them again."""
    from mirrorflow.actions.gap import ResolveRefused, resolve

    topic = topic_everywhere(make_topic, partitions=1)
    topo = topology(kafka_clusters, FOUR, [topic])
    settings = clients(kafka_clusters, topo)
    expected = traffic(kafka_clusters, "c3", topic, 20)
    converge(topo, settings)
    assert_exactly_once(kafka_clusters, ["c1", "c2", "c3", "c4"], topic, expected)
    c1, c2 = ClusterClient("c1", settings["c1"]), ClusterClient("c2", settings["c2"])
    with pytest.raises(ResolveRefused, match=r"resuming at 0 would copy again 20 message\(s\)"):
        resolve("c1.L1", 1, c1, c2, topic, 0, "resume_from", requested=0, dry_run=True)


def _values(bootstrap, topic, partition):
    return [r.value.decode() for r in read_all(bootstrap, topic, 2) if r.partition == partition]


def test_on_gap_restore_heals_a_gap_from_the_archive_or_stops_naming_what_it_lacks(kafka_clusters, make_topic,
                                                                                   s3_bucket, caplog):
    from mirrorflow.actions.gap import ResolveRefused, resolve
    from mirrorflow.archive import ArchiveSpec, run_archive

    topic = _topic_pair(make_topic, partitions=2)
    c1, c2 = _clients(kafka_clusters)
    b1, b2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    for p in (0, 1):
        produce(b1, topic, _records(20, f"a{p}-"), partition=p)
    spec = JobSpec(level=1, run_id="heal-1", topics=(topic,),
                   links=(LinkJob(LINK, 1, "c1", "c2", on_gap="restore"),),
                   clusters={"c1": dict(c1.settings), "c2": dict(c2.settings)},
                   archive=s3_bucket.to_dict(), archived=("c1",))
    assert run_job(spec).ok  # the link holds 0..19 of both partitions
    for p in (0, 1):
        produce(b1, topic, _records(20, f"b{p}-"), partition=p)
    archived = run_archive(ArchiveSpec(run_id="a1", clusters={"c1": dict(c1.settings)}, archived=("c1",),
                                       topics=(topic,), location=s3_bucket))
    assert archived.ok and archived.count == 80
    produce(b1, topic, _records(10, "c1-"), partition=1)  # 40..49 of partition 1: never archived
    _delete_before(b1, topic, 0, 30)  # gap 20..29: the archive holds it
    _delete_before(b1, topic, 1, 45)  # gap 20..44: the archive holds 20..39, not 40..44

    caplog.set_level(logging.INFO, logger=JOURNAL_LOGGER)
    healed = run_job(JobSpec(**{**spec.__dict__, "run_id": "heal-2"}))
    [stopped] = healed.errors
    assert (stopped.topic, stopped.partition, stopped.offset) == (topic, 1, 20)
    assert (f"offsets 40..44 (5) of c1 {topic}[1] are in no archive (the archive of c1 holds 20..39 of the lost "
            f"20..44); nothing restored, the partition stops at 20") in stopped.error
    [p0] = [r for r in healed.partitions if r["partition"] == 0]
    assert (p0["restored"], p0["restored_offsets"], p0["copied"], p0["next_offset"]) == (10, [20, 29], 20, 40)
    assert _values(b2, topic, 0) == [f"a0-{i}" for i in range(20)] + [f"b0-{i}" for i in range(20)]
    assert _values(b2, topic, 1) == [f"a1-{i}" for i in range(20)]  # nothing restored of a partial gap
    assert (_checkpoint(b2, topic, 0), _checkpoint(b2, topic, 1)) == (40, 20)
    gaps = {line["partition"]: line for _, line in _gap_lines(caplog)}
    assert gaps[0]["action"].startswith("restored from the archive of c1") and gaps[0]["restored"] == 10
    assert gaps[1]["missing"] == [[40, 44]] and gaps[1]["archived"] == [[20, 39]]

    # the operator's restore is refused for the same reason, by name; nothing changes
    with pytest.raises(ResolveRefused, match=r"offsets 40\.\.44 \(5\) .* are in no archive"):
        resolve(LINK, 1, c1, c2, topic, 1, "restore", archive=s3_bucket.to_dict(), archived=["c1"])
    assert _checkpoint(b2, topic, 1) == 20

    # a gap after the archive ran again: mirror_resolve_gap's restore heals it; a dry run changes nothing
    produce(b1, topic, _records(10, "d0-"), partition=0)  # 40..49
    assert run_archive(ArchiveSpec(run_id="a2", clusters={"c1": dict(c1.settings)}, archived=("c1",),
                                   topics=(topic,), location=s3_bucket)).ok
    _delete_before(b1, topic, 0, 50)
    dry = resolve(LINK, 1, c1, c2, topic, 0, "restore", archive=s3_bucket.to_dict(), archived=["c1"], dry_run=True)
    assert (dry.position, dry.restored) == (50, 0) and _checkpoint(b2, topic, 0) == 40
    done = resolve(LINK, 1, c1, c2, topic, 0, "restore", archive=s3_bucket.to_dict(), archived=["c1"])
    assert (done.position, done.restored) == (50, 10) and _checkpoint(b2, topic, 0) == 50
    with pytest.raises(ResolveRefused, match="there is no gap"):
        resolve(LINK, 1, c1, c2, topic, 0, "restore", archive=s3_bucket.to_dict(), archived=["c1"])
    after = run_job(JobSpec(**{**spec.__dict__, "run_id": "heal-3"}))
    assert [e.partition for e in after.errors] == [1]  # partition 0 has nothing left to copy
    assert _values(b2, topic, 0) == ([f"a0-{i}" for i in range(20)] + [f"b0-{i}" for i in range(20)]
                                     + [f"d0-{i}" for i in range(10)])

    # partition 1: c2's archive (by provenance) proves nothing either; restore_and_skip restores what c1's archive
    # holds and steps over only the 5 offsets no archive holds
    both = ["c1", "c2"]
    with pytest.raises(ResolveRefused, match="looked for by provenance in the archives of c2; refused"):
        resolve(LINK, 1, c1, c2, topic, 1, "restore", archive=s3_bucket.to_dict(), archived=both)
    partial = resolve(LINK, 1, c1, c2, topic, 1, "restore_and_skip", archive=s3_bucket.to_dict(), archived=both)
    assert (partial.restored, partial.missing, partial.position) == (20, [[40, 44]], 45)
    assert run_job(JobSpec(**{**spec.__dict__, "run_id": "heal-4"})).ok
    assert _values(b2, topic, 1) == ([f"a1-{i}" for i in range(20)] + [f"b1-{i}" for i in range(20)]
                                     + [f"c1-{i}" for i in range(5, 10)])



def test_a_gap_the_sources_archive_never_saw_is_restored_by_provenance_from_another_clusters_archive(
        kafka_clusters, make_topic, s3_bucket):
    """c1 is not archived; c3 is. c1.L1 (to c2) passes on c1's own messages and those c3 and c4 send to c1."""
    from mirrorflow.actions.gap import ResolveRefused, resolve
    from mirrorflow.archive import ArchiveSpec, run_archive
    from mirrorflow.copy.spec import build_spec
    from mirrorflow.topology.routes import effective_links
    from tests.integration.kafka_io import stable_end_offsets

    topic = topic_everywhere(make_topic)
    topo = topology(kafka_clusters, FOUR, [topic], extra=(
        "replication: {links: {c1.L1: {on_gap: restore}}}\narchive: {clusters: [c3]}\n"))
    settings = clients(kafka_clusters, topo)
    location = s3_bucket.to_dict()

    def all_but_c1_l1(level):
        links = [l for l in effective_links(topo, level) if l.link_id != "c1.L1"]
        return run_job(build_spec(topo, level, f"t-{level}-{time.monotonic_ns()}", links, settings))

    def archive_c3(run_id):
        done = run_archive(ArchiveSpec(run_id=run_id, clusters={"c3": settings["c3"]}, archived=("c3",),
                                       topics=(topic,), location=s3_bucket))
        assert done.ok, done.errors

    every = []
    for origin, n in (("c1", 40), ("c3", 20), ("c4", 20)):
        every += traffic(kafka_clusters, origin, topic, n)
    converge(topo, settings)
    for origin, n in (("c1", 40), ("c3", 20), ("c4", 20)):  # c1.L1 stands still: c2 waits for all of these
        every += traffic(kafka_clusters, origin, topic, n, start=100)
    converge(topo, settings, runner=all_but_c1_l1)
    archive_c3("a1")
    b1 = kafka_clusters["c1"].bootstrap
    admin = AdminClient({"bootstrap.servers": b1})
    ends = stable_end_offsets(b1, topic, 2)
    for future in admin.delete_records([TopicPartition(topic, p, e) for p, e in enumerate(ends)],
                                       request_timeout=30).values():
        future.result(timeout=30)  # c1 loses everything c1.L1 never copied; no archive of c1 exists

    def dry_restore():
        return resolve("c1.L1", 1, ClusterClient("c1", settings["c1"]), ClusterClient("c2", settings["c2"]), topic,
                       0, "restore", archive=location, archived=["c3"], dry_run=True)

    # nothing of c3 on c1 past the gap yet: where c3's messages in the gap end cannot be known
    with pytest.raises(ResolveRefused, match="c3's messages cannot be bounded: c1 holds none of them past the gap"):
        dry_restore()
    for origin, n in (("c1", 10), ("c3", 10), ("c4", 10)):
        every += traffic(kafka_clusters, origin, topic, n, start=200)
    converge(topo, settings, runner=all_but_c1_l1)
    # bounded now, but c3's archive ends where the gap ends: it does not prove it holds the whole of it
    with pytest.raises(ResolveRefused, match=r"c1's messages after origin offset \d+ and before \d+ \(archives of c3"):
        dry_restore()
    archive_c3("a2")
    assert "c1: " in dry_restore().note  # proven: a dry run names what each archive gives
    healed = run_level(topo, 1, settings, archive=location)
    assert healed.ok, healed.summary()["errors"]
    restored = {p["partition"]: p for p in healed.partitions if p["link_id"] == "c1.L1"}
    assert sum(p["restored"] for p in restored.values()) > 0
    assert [restored[p]["restored_offsets"][0] for p in (0, 1)] == [restored[p]["start_offset"] for p in (0, 1)]
    converge(topo, settings, archive=location)
    assert_exactly_once(kafka_clusters, ["c2", "c3", "c4"], topic, every)
    # restored copies carry what c1.L1's copies carry: c1's own crossed level 1, c3's levels 3 and 1 (c4's
    # reach c2 straight from c4.L3)
    flags = {(v.split("|")[0], dict(r.headers)["mirror.copy.flags"])
             for r in read_all(kafka_clusters["c2"].bootstrap, topic, 2) if not (v := r.value.decode()).startswith("c2")}
    assert flags == {("c1", b"1"), ("c3", b"5"), ("c4", b"4")}


def test_a_top_level_link_heals_by_provenance_although_another_link_of_its_level_writes_to_its_target(
        kafka_clusters, make_topic, s3_bucket):
    """THREE: c1.L3 and c2.L3 both send to c3, whose level-3 copies of c2's messages are not c1.L3's to restore."""
    from mirrorflow.archive import ArchiveSpec, run_archive
    from mirrorflow.copy.spec import build_spec
    from mirrorflow.topology.routes import effective_links
    from tests.integration.kafka_io import stable_end_offsets

    names = ("c1", "c2", "c3")
    topic = topic_everywhere(make_topic, names)
    topo = topology(kafka_clusters, THREE, [topic], names=names, extra=(
        "replication: {links: {c1.L3: {on_gap: restore}}}\narchive: {clusters: [c2]}\n"))
    settings = clients(kafka_clusters, topo)
    location = s3_bucket.to_dict()
    assert {l.link_id: l.default_target for l in effective_links(topo, 3)}["c2.L3"] == "c3"

    def all_but_c1_l3(level):
        links = [l for l in effective_links(topo, level) if l.link_id != "c1.L3"]
        return run_job(build_spec(topo, level, f"t-{level}-{time.monotonic_ns()}", links, settings))

    def archive_c2(run_id):
        assert run_archive(ArchiveSpec(run_id=run_id, clusters={"c2": settings["c2"]}, archived=("c2",),
                                       topics=(topic,), location=s3_bucket)).ok

    every = traffic(kafka_clusters, "c1", topic, 40) + traffic(kafka_clusters, "c2", topic, 20)
    converge(topo, settings)
    every += traffic(kafka_clusters, "c1", topic, 40, start=100) + traffic(kafka_clusters, "c2", topic, 20, start=100)
    converge(topo, settings, runner=all_but_c1_l3)
    b1 = kafka_clusters["c1"].bootstrap
    ends = stable_end_offsets(b1, topic, 2)
    admin = AdminClient({"bootstrap.servers": b1})
    for future in admin.delete_records([TopicPartition(topic, p, e) for p, e in enumerate(ends)],
                                       request_timeout=30).values():
        future.result(timeout=30)  # c1.L3 never copied c1's second batch, and c1 is not archived
    every += traffic(kafka_clusters, "c1", topic, 10, start=200) + traffic(kafka_clusters, "c2", topic, 10, start=200)
    converge(topo, settings, runner=all_but_c1_l3)
    archive_c2("a1")  # c2 holds c1's messages on both sides of the gap

    healed = run_level(topo, 3, settings, archive=location)
    assert healed.ok, healed.summary()["errors"]
    assert sum(p["restored"] for p in healed.partitions if p["link_id"] == "c1.L3") > 0
    converge(topo, settings, archive=location)
    assert_exactly_once(kafka_clusters, ["c2", "c3"], topic, every)


def test_a_source_topic_deleted_after_copies_is_an_audit_line_saying_how_far_the_link_copied(kafka_clusters,
                                                                                            make_topic, caplog):
    """The source's end went with the topic: the run says what it can, the checkpoint per partition."""
    names = ("c1", "c2")
    topic = topic_everywhere(make_topic, names, partitions=2)
    topo = topology(kafka_clusters, "\n  level: 1\n  children: [c1, c2]\n", [topic], names)
    settings = clients(kafka_clusters, topo)
    traffic(kafka_clusters, "c1", topic, 10)
    assert run_level(topo, 1, settings).ok
    admin = AdminClient({"bootstrap.servers": kafka_clusters["c1"].bootstrap})
    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
    deadline = time.monotonic() + 60
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{topic} still listed on c1 60 s after its deletion"
        _pause.wait(0.2)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=JOURNAL_LOGGER):
        run_level(topo, 1, settings)  # c2.L1 creates the topic on c1 again, empty
    [line] = [json.loads(r.getMessage()) for r in caplog.records
              if r.name == JOURNAL_LOGGER and '"topic_deleted_on_source"' in r.getMessage()]
    assert (line["link"]["id"], line["topic"]) == ("c1.L1", topic)
    assert sum(line["copied_up_to"].values()) == 10  # every record of c1 had been copied
