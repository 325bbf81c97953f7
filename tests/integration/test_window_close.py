"""A replication window that closes during a run (issue 33): the copy stops there, committed, and goes on later.

Windows are written to the minute, so the tests steer the one moment that matters, when
the window closes, through ``mirrorflow.copy.plan.windows.window_closes`` (the zone and day
arithmetic behind it has its own tests, tests/unit/test_windows.py). Everything else is
real: the level job in this process on two real clusters, throttled so that the planned
work cannot fit before the window's end.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

import mirrorflow.copy.plan.windows as windows_module
from mirrorflow.copy.job import run_job
from mirrorflow.copy.spec import JobSpec, LinkJob
from tests.integration.kafka_io import produce, read_all
from tests.integration.mirroring import checkpointed

pytestmark = pytest.mark.kafka

PARTITIONS = 8
PER_PARTITION = 150
VALUE = 1000  # bytes: 1.2 MB in all, at 20,000 B/s about a minute of copying


def _spec(kafka_clusters, topic: str, run_id: str, **link) -> JobSpec:
    return JobSpec(level=1, run_id=run_id, topics=(topic,),
                   links=(LinkJob("c1.L1", 1, "c1", "c2", **link),),
                   clusters={c: {"bootstrap.servers": kafka_clusters[c].bootstrap} for c in ("c1", "c2")})


def test_a_run_stops_at_its_window_end_committed_and_the_next_window_continues_exactly(
        kafka_clusters, make_topic, monkeypatch, caplog):
    topic = make_topic("c1", partitions=PARTITIONS)
    make_topic("c2", partitions=PARTITIONS, name=topic)
    for p in range(PARTITIONS):
        produce(kafka_clusters["c1"].bootstrap, topic,
                [(b"k", f"p{p}-{i}".encode().ljust(VALUE, b"."), None, None) for i in range(PER_PARTITION)],
                partition=p)
    closings: list[datetime] = []  # the window closes 4 s after the plan asks (a slow plan must not eat it)

    def closes_soon(windows, now):
        closings.append(datetime.now(UTC) + timedelta(seconds=4))
        return closings[-1]

    monkeypatch.setattr(windows_module, "window_closes", closes_soon)
    caplog.set_level("INFO", logger="mirrorflow.audit")

    first = run_job(_spec(kafka_clusters, topic, "in-window", max_bytes_per_second=20_000, txn_records=50,
                          windows=("Mon-Sun 00:00-24:00 Europe/Amsterdam",)))
    stopped_after = time.time() - closings[-1].timestamp()

    assert first.ok, first.summary()["errors"]
    assert 0 <= stopped_after < 10, f"the run went on {stopped_after:.1f}s past its window's end"
    closed = [r for r in first.partitions if r["window_closed"]]
    assert closed and 0 < first.copied < PARTITIONS * PER_PARTITION
    # Every started transaction was committed: what is on the target is exactly what the checkpoints say.
    on_target = read_all(kafka_clusters["c2"].bootstrap, topic, PARTITIONS)
    assert len(on_target) == first.copied == checkpointed(kafka_clusters["c2"].bootstrap, "c1.L1", topic,
                                                          PARTITIONS, wait=30)
    assert all(r["next_offset"] == sum(1 for m in on_target if m.partition == r["partition"])
               for r in first.partitions)
    line = next(json.loads(r.getMessage()) for r in caplog.records
                if r.name == "mirrorflow.audit" and json.loads(r.getMessage())["event"] == "window_closed")
    assert line["link"]["id"] == "c1.L1" and line["next_window"] and set(line["stopped_at"]) == {
        f"{topic}[{r['partition']}]" for r in closed}

    monkeypatch.undo()  # the next window: open all day, unthrottled
    second = run_job(_spec(kafka_clusters, topic, "next-window"))
    assert second.ok and not any(r["window_closed"] for r in second.partitions)
    values = Counter(m.value for m in read_all(kafka_clusters["c2"].bootstrap, topic, PARTITIONS))
    assert len(values) == PARTITIONS * PER_PARTITION and set(values.values()) == {1}, "lost or doubled"


def test_the_one_partition_path_stops_at_the_window_end_too(kafka_clusters, make_topic):
    """The path a restore and a refused group take (mirrorflow.copy.engine.partition)."""
    from mirrorflow.copy.engine.partition import copy_partition
    from mirrorflow.copy.task import PartitionTask
    from mirrorflow.kafka.config import ClusterClient

    topic = make_topic("c1", partitions=1)
    make_topic("c2", partitions=1, name=topic)
    produce(kafka_clusters["c1"].bootstrap, topic,
            [(b"k", f"m{i}".encode().ljust(VALUE, b"."), None, None) for i in range(300)], partition=0)
    closes = time.time() + 3
    task = PartitionTask(link_id="c1.L1", level=1, source="c1", target="c2", topic=topic, partition=0,
                         end_offset=300, txn_records=50, max_bytes_per_second=20_000, stop_at=closes)
    result = copy_partition(task, *(ClusterClient(c, {"bootstrap.servers": kafka_clusters[c].bootstrap})
                                    for c in ("c1", "c2")))
    assert result.error is None and result.window_closed and 0 < result.next_offset < 300
    assert time.time() - closes < 10
    on_target = read_all(kafka_clusters["c2"].bootstrap, topic, 1)
    assert len(on_target) == result.copied == result.next_offset == checkpointed(
        kafka_clusters["c2"].bootstrap, "c1.L1", topic, 1, wait=30)
