"""The completeness audit on a compacted topic, compacted on another schedule on each cluster (real log cleaners).

c1 keeps its segments open for days (its cleaner never gets to them in the test);
c2 rolls a segment every 100 ms and cleans at once. Both hold the same latest value
of every key, tombstones included, while c2 holds far fewer records: the audit must
call that complete (compaction, not loss) window after window, and still name the
one record whose key's latest value c2 lost.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow import provenance
from mirrorflow.completeness.run import run_audit
from mirrorflow.completeness.store import read_state
from mirrorflow.kafka.config import ClusterClient
from tests.integration.kafka_io import produce, read_all
from tests.integration.mirroring import clients, converge, topology

pytestmark = pytest.mark.kafka

NAMES = ["c1", "c2"]
PAIR = """
  level: 1
  children: [c1, c2]
"""
# compact,delete: compacted, and delete_records allowed (how the test makes a real loss on c2);
# retention far longer than the test
LAZY = {"cleanup.policy": "compact,delete", "retention.ms": "-1"}
EAGER = {**LAZY, "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"}
KEYS = 20
_pause = threading.Event()  # never set: .wait(t) paces the condition polls below, each with a deadline


def _updates(n: int, start: int, at_ms: int, partition: int, tombstones: set[int] = frozenset()) -> list[tuple]:
    """``n`` updates of KEYS keys in one partition, each an update of its key; ``tombstones``: indexes deleted."""
    return [(f"p{partition}-k{i % KEYS}".encode(), None if i in tombstones else f"c1|{i}".encode(), None,
             at_ms + i) for i in range(start, start + n)]


def _latest(bootstrap: str, topic: str) -> dict[tuple[int, bytes], bytes | None]:
    """(partition, key) -> the value of its last record (``None``: a tombstone)."""
    out: dict[tuple[int, bytes], bytes | None] = {}
    for r in read_all(bootstrap, topic, 2):
        out[(r.partition, r.key)] = r.value
    return out


def _roll(bootstrap: str, topic: str) -> None:
    """A record of the cluster's own in each partition: a segment older than ``segment.ms`` rolls at an append."""
    for p in (0, 1):
        produce(bootstrap, topic, [(b"roll", b"roll", None, None)], partition=p)


def _compacted_on(bootstrap: str, topic: str, fewer_than: int, timeout: float = 90.0) -> int:
    """Wait until the cluster holds fewer than ``fewer_than`` records of the topic (its cleaner ran)."""
    deadline = time.monotonic() + timeout
    while (held := len(read_all(bootstrap, topic, 2))) >= fewer_than:
        assert time.monotonic() < deadline, f"the cleaner of {bootstrap} left {held} records in {timeout:.0f}s"
        _roll(bootstrap, topic)
        _pause.wait(1.0)
    return held


def test_a_compacted_topic_compacted_on_different_schedules_is_complete_and_a_lost_latest_value_is_named(
        kafka_clusters, make_topic):
    topic = make_topic("c1", partitions=2, config=LAZY)
    make_topic("c2", partitions=2, config=EAGER, name=topic)
    topo = topology(kafka_clusters, PAIR, [topic], NAMES)
    settings = clients(kafka_clusters, topo)
    cluster = {n: ClusterClient(n, settings[n]) for n in NAMES}
    c1, c2 = (settings[n]["bootstrap.servers"] for n in NAMES)
    hour_ago = int(time.time() * 1000) - 3_600_000

    def audit():  # one-minute windows, every one final
        return run_audit(cluster, lambda t: t == topic, window_s=60, grace_s=0,
                         now_ms=int(time.time() * 1000) + 3_600_000)

    # window after window: 600 updates of 20 keys per partition, a few of them tombstones
    sent = 0
    for round_ in range(2):
        at = hour_ago + round_ * 120_000
        for p in (0, 1):
            produce(c1, topic, _updates(600, 0, at, p, tombstones={581, 597}), partition=p)
        sent += 1200
        converge(topo, settings)
        held = _compacted_on(c2, topic, fewer_than=sent // 2)
        converge(topo, settings)  # c2's own records (what rolled its segments) reach c1 too
        print(f"round {round_}: c1 holds {len(read_all(c1, topic, 2))} records, c2 {held} after compaction")
        result = audit()
        assert result.ok, result.summary()
        assert result.comparison.compacted > 0 and result.comparison.complete == result.comparison.judged

    # the latest value of every key is the same on both clusters, tombstones included (they travelled)
    latest = _latest(c1, topic)
    assert _latest(c2, topic) == latest
    assert {k for k, v in latest.items() if v is None} == {(p, f"p{p}-k{i % KEYS}".encode()) for p in (0, 1)
                                                           for i in (581, 597)}
    # the verdicts say why the windows are complete
    kept = {k: v for k, v in read_state(cluster["c2"], 60).verdicts.items() if k.topic == topic and k.origin == "c1"}
    assert kept and all(v["complete"] for v in kept.values()) and any(v.get("compacted") for v in kept.values())

    # a real loss: a key's only record reaches c2 and is deleted there; every other record before it in its
    # partition is superseded on c2 by later ones (c2's own by one more of its own, which reaches c1), so
    # only that record is c2's loss
    at = hour_ago + 300_000
    produce(c1, topic, [(b"solo", b"c1|solo", None, at)], partition=0)
    produce(c1, topic, _updates(KEYS, 1000, at + 1, 0), partition=0)
    converge(topo, settings)
    [solo] = [r for r in read_all(c2, topic, 2) if r.key == b"solo"]
    origin = provenance.find(list(solo.headers), topic, 0)
    admin = AdminClient({"bootstrap.servers": c2})  # referenced until its futures are done
    for future in admin.delete_records([TopicPartition(topic, 0, solo.offset + 1)], request_timeout=30).values():
        future.result(timeout=30)
    _roll(c2, topic)
    converge(topo, settings)
    lost = audit()
    assert not lost.ok
    [drilled] = lost.drills
    assert (drilled.difference.cluster, drilled.difference.origin) == ("c2", "c1")
    assert (drilled.missing_count, drilled.missing, drilled.duplicated_count, drilled.unexpected_count) == (
        1, [[0, origin.offset]], 0, 0)
