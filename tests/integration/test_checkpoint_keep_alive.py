"""Idle links keep their checkpoints: brokers that expire committed offsets after one minute (real brokers).

Kafka deletes a memberless group's committed offsets ``offsets.retention.minutes``
after their last commit; a link's checkpoint is such an offset. A target cluster
of this test's own expires them after one minute and checks every second. A
control group committed at the same time as the link's checkpoint shows the
expiry really happens; the link, idle meanwhile, keeps its checkpoint because
level runs commit it again (fenced, with nothing to copy) once it is half that
old. New traffic afterwards is copied once.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirrorflow.copy.job import run_job
from mirrorflow.copy.spec import JobSpec, LinkJob
from mirrorflow.copy.state.checkpoints import read_checkpoints
from mirrorflow.journal import JOURNAL_LOGGER
from mirrorflow.kafka.config import ClusterClient
from mirrorflow_dev.kafka import LocalCluster
from mirrorflow_dev.process import free_port
from tests.integration.kafka_io import produce, read_all

pytestmark = pytest.mark.kafka

LINK = "c1.L1"
_pause = threading.Event()  # never set: .wait(t) paces the level runs, the loop ends on a condition


@pytest.fixture
def forgetful_target(tmp_path: Path, kafka_distribution):
    """A target cluster that expires committed offsets one minute after their last commit."""
    cluster = LocalCluster("t", tmp_path / "t", free_port(), free_port(), kafka_distribution,
                           config={"offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "1000"},
                           progress=lambda message: None)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _run(source, target, topic, run_id):
    clusters = {"c1": {"bootstrap.servers": source.bootstrap}, "t": {"bootstrap.servers": target.bootstrap}}
    spec = JobSpec(level=1, run_id=run_id, topics=(topic,), clusters=clusters, slots=1,
                   links=(LinkJob(LINK, 1, "c1", "t"),))
    return run_job(spec)


def _committed(bootstrap, group, topic):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        offset = consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
        return offset if offset >= 0 else None
    finally:
        consumer.close()


def test_an_idle_link_keeps_its_checkpoint_past_offsets_retention(forgetful_target, kafka_clusters, make_topic,
                                                                   caplog):
    source = kafka_clusters["c1"]
    topic = make_topic("c1")
    make_topic(forgetful_target, name=topic)
    produce(source.bootstrap, topic, [(f"k{i}".encode(), f"m{i}".encode(), None, None) for i in range(100)],
            partition=0)
    assert _run(source, forgetful_target, topic, "keep-1").copied == 100
    control = Consumer({"bootstrap.servers": forgetful_target.bootstrap, "group.id": "control-" + topic})
    control.commit(offsets=[TopicPartition(topic, 0, 100)], asynchronous=False)
    control.close()
    copied_at = time.monotonic()
    caplog.set_level(logging.INFO, logger=JOURNAL_LOGGER)

    # Idle: level runs every few seconds until the control group's offset is gone (and a minute is over).
    target = ClusterClient("t", {"bootstrap.servers": forgetful_target.bootstrap})
    deadline, runs = time.monotonic() + 240, 0
    while True:
        result = _run(source, forgetful_target, topic, f"keep-idle-{runs}")
        runs += 1
        assert not result.errors and result.copied == 0, result.errors
        (checkpoint, _), = read_checkpoints(target, LINK, [TopicPartition(topic, 0)]).values()
        assert checkpoint == 100, f"the link's checkpoint is gone after {time.monotonic() - copied_at:.0f}s idle"
        # The control group committed after the link: once its offset is gone, an unrefreshed checkpoint is too.
        if _committed(forgetful_target.bootstrap, "control-" + topic, topic) is None:
            break
        assert time.monotonic() < deadline, "the broker never expired the control group's offset"
        _pause.wait(5)
    kept = [json.loads(r.getMessage()) for r in caplog.records if r.name == JOURNAL_LOGGER]
    assert any(line.get("kept_alive") for line in kept if line["event"] == "copy")

    produce(source.bootstrap, topic, [(f"k{i}".encode(), f"m{i}".encode(), None, None) for i in range(100, 110)],
            partition=0)
    after = _run(source, forgetful_target, topic, "keep-2")
    assert not after.errors and after.copied == 10
    assert [r.value for r in read_all(forgetful_target.bootstrap, topic, 1)] == [f"m{i}".encode() for i in range(110)]
