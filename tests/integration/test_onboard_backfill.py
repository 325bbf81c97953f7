"""The backfill job's start rules, in-process against real brokers: ``since``, ``none``, and a re-run."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirrorflow import copyflags, provenance
from mirrorflow.copy.state.checkpoints import checkpoint_group
from mirrorflow.onboard.backfill import BackfillSpec, run_backfill
from tests.integration.kafka_io import produce, read_all
from tests.integration.progress_lines import every_update, progress_lines

pytestmark = pytest.mark.kafka

HOUR_MS = 3_600_000


def _checkpoint(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": checkpoint_group("c3.L1")})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        consumer.close()


def _spec(kafka_clusters, topic: str, mode: str, since_ms: int | None = None) -> BackfillSpec:
    return BackfillSpec(run_id=f"t-{uuid.uuid4().hex[:6]}", link_id="c3.L1", level=1, source="c3", target="c4",
                        mode=mode, bits=0b101, topics={topic: 1}, since_ms=since_ms,
                        clusters={c: {"bootstrap.servers": kafka_clusters[c].bootstrap} for c in ("c3", "c4")})


@pytest.mark.parametrize("engine", ["in-process", "spark_connect"])  # this process, or a Spark Connect server
def test_since_copies_from_the_first_offset_at_the_timestamp_and_hands_over_its_end(kafka_clusters, make_topic,
                                                                                     engine, request, caplog,
                                                                                     monkeypatch):
    spark = request.getfixturevalue(engine) if engine == "spark_connect" else None
    every_update(monkeypatch, caplog)
    topic = make_topic("c3")
    make_topic("c4", name=topic)
    now = int(time.time() * 1000)
    old = [(b"k", f"old-{i}".encode(), [], now - 2 * HOUR_MS + i) for i in range(30)]
    new = [(b"k", f"new-{i}".encode(), [("h", b"v")], now - HOUR_MS + i) for i in range(40)]
    produce(kafka_clusters["c3"].bootstrap, topic, old + new)

    result = run_backfill(_spec(kafka_clusters, topic, "since", since_ms=now - HOUR_MS), spark)
    assert result.ok, result.errors
    got = read_all(kafka_clusters["c4"].bootstrap, topic, 1)
    assert [r.value.decode() for r in got] == [f"new-{i}" for i in range(40)]
    first = got[0]
    assert copyflags.read_flags(first.headers)[0] == 0b101  # every level c4 distributes at: never sent on
    assert provenance.find(first.headers, topic, 0) == provenance.Origin("c3", topic, 0, 30)
    assert ("h", b"v") in first.headers and first.timestamp == now - HOUR_MS
    assert _checkpoint(kafka_clusters["c4"].bootstrap, topic) == 70  # the regular link continues here
    # progress: offsets 30..69 planned and passed; in this process counted at each commit, on Spark by its tasks
    lines = progress_lines(caplog, "backfill", result.run_id)
    final = lines[-1]
    assert (final["final"], final["records"], final["planned"], final["link"]) == (True, 40, 40, "c3.L1")
    if spark is None:
        assert any(l["records"] == 40 and not l["final"] for l in lines), lines
    else:
        assert (lines[-1]["measured"], lines[-1]["tasks_done"], lines[-1]["tasks"]) == ("spark_tasks", 1, 1)

    again = run_backfill(_spec(kafka_clusters, topic, "since", since_ms=now - HOUR_MS), spark)
    assert again.ok and again.summary()["copied"] == 0 and again.partitions == []  # complete: nothing planned


def test_none_copies_nothing_but_commits_the_sibling_end_as_the_hand_over(kafka_clusters, make_topic):
    topic = make_topic("c3")
    make_topic("c4", name=topic)
    produce(kafka_clusters["c3"].bootstrap, topic, [(b"k", f"m{i}".encode(), [], None) for i in range(25)])

    result = run_backfill(_spec(kafka_clusters, topic, "none"))
    assert result.ok and result.summary()["copied"] == 0
    assert read_all(kafka_clusters["c4"].bootstrap, topic, 1) == []
    assert _checkpoint(kafka_clusters["c4"].bootstrap, topic) == 25
